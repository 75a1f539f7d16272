#include "ccrypto.h"
#include <openssl/evp.h>

ccrypto_sha256 *ccrypto_sha256_new(void) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx != NULL) EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    return (ccrypto_sha256 *)ctx;
}

void ccrypto_sha256_update(ccrypto_sha256 *ctx, const void *bytes, size_t count) {
    EVP_DigestUpdate((EVP_MD_CTX *)ctx, bytes, count);
}

void ccrypto_sha256_finish(ccrypto_sha256 *ctx, uint8_t *digest) {
    unsigned int length = 0;
    EVP_DigestFinal_ex((EVP_MD_CTX *)ctx, digest, &length);
    EVP_DigestInit_ex((EVP_MD_CTX *)ctx, EVP_sha256(), NULL);
}

void ccrypto_sha256_free(ccrypto_sha256 *ctx) {
    EVP_MD_CTX_free((EVP_MD_CTX *)ctx);
}

void ccrypto_sha256_oneshot(const void *bytes, size_t count, uint8_t *digest) {
    unsigned int length = 0;
    EVP_Digest(bytes, count, digest, &length, EVP_sha256(), NULL);
}
