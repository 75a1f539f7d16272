#ifndef CCRYPTO_SHIM_H
#define CCRYPTO_SHIM_H
#include <stddef.h>
#include <stdint.h>

// SHA-256 through OpenSSL's EVP interface (hardware-accelerated where the CPU allows).
// The shim keeps OpenSSL's headers, macros and opaque types out of Swift: callers see one
// opaque context pointer and three calls.
typedef struct ccrypto_sha256 ccrypto_sha256;

ccrypto_sha256 *ccrypto_sha256_new(void);
void ccrypto_sha256_update(ccrypto_sha256 *ctx, const void *bytes, size_t count);
/// Writes 32 bytes to `digest` and resets the context for reuse.
void ccrypto_sha256_finish(ccrypto_sha256 *ctx, uint8_t *digest);
void ccrypto_sha256_free(ccrypto_sha256 *ctx);
/// One-shot digest of a buffer.
void ccrypto_sha256_oneshot(const void *bytes, size_t count, uint8_t *digest);

#endif
