#define _GNU_SOURCE
#include "cfuse.h"
#include <unistd.h>
#include <string.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <malloc.h>

struct fuse_session *cfuse_session_new(int argc, char **argv, const struct fuse_lowlevel_ops *ops, void *userdata) {
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_session *session = fuse_session_new(&args, ops, sizeof(*ops), userdata);
    fuse_opt_free_args(&args);
    return session;
}

// Where libfuse's log goes while cfuse_check_options runs (at start-up, one thread).
static char *captured_log;
static size_t captured_size;

static void capture_log(enum fuse_log_level level, const char *format, va_list arguments) {
    (void)level;
    size_t used = strlen(captured_log);
    if (used + 1 < captured_size) vsnprintf(captured_log + used, captured_size - used, format, arguments);
}

int cfuse_check_options(int argc, char **argv, char *message, size_t size) {
    static const struct fuse_lowlevel_ops none;
    message[0] = 0;
    captured_log = message;
    captured_size = size;
    fuse_set_log_func(capture_log);
    struct fuse_session *session = cfuse_session_new(argc, argv, &none, NULL);
    fuse_set_log_func(NULL);  // libfuse's own: stderr
    if (session == NULL) return -1;
    fuse_session_destroy(session);
    return 0;
}

// The 3.12 loop, named directly. With FUSE_USE_VERSION below 312 the header maps
// fuse_session_loop_mt to fuse_session_loop_mt_32, which reads its argument as the old
// two-field config: given the object fuse_loop_cfg_create makes, it took the version tag for
// clone_fd (on) and clone_fd for max_idle_threads (0). Every request then started a worker
// thread that opened /dev/fuse again and exited once idle: strace of 5,000 empty creates
// counted 23,904 opens of /dev/fuse and 29,368 thread exits.
int fuse_session_loop_mt_312(struct fuse_session *se, struct fuse_loop_config *config);

int cfuse_session_loop(struct fuse_session *session, unsigned max_threads) {
    struct fuse_loop_config *config = fuse_loop_cfg_create();
    if (config == NULL) return -1;
    fuse_loop_cfg_set_max_threads(config, max_threads);
    // Keep workers alive: operations answer asynchronously, so workers are idle again at
    // once, and libfuse would otherwise start and stop a thread (with its splice pipe) for
    // nearly every request.
    fuse_loop_cfg_set_idle_threads(config, max_threads);
    fuse_loop_cfg_set_clone_fd(config, 0);
    int result = fuse_session_loop_mt_312(session, config);
    fuse_loop_cfg_destroy(config);
    return result;
}

void cfuse_file_info_set_keep_cache(struct fuse_file_info *info, int keep) { info->keep_cache = keep ? 1 : 0; }
void cfuse_file_info_set_direct_io(struct fuse_file_info *info, int direct) { info->direct_io = direct ? 1 : 0; }
void cfuse_file_info_set_noflush(struct fuse_file_info *info, int noflush) { info->noflush = noflush ? 1 : 0; }

void cfuse_conn_configure(struct fuse_conn_info *conn, unsigned max_readahead) {
    if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
    // The kernel picks readdirplus only where entries are looked at (`ls -l`), plain readdir
    // elsewhere (`find`): no inode made for each of a million files it only names.
    if (conn->capable & FUSE_CAP_READDIRPLUS_AUTO) conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
    if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
    if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
    if (conn->capable & FUSE_CAP_SPLICE_WRITE) conn->want |= FUSE_CAP_SPLICE_WRITE;
    if (conn->capable & FUSE_CAP_SPLICE_MOVE) conn->want |= FUSE_CAP_SPLICE_MOVE;
    // open(O_TRUNC) arrives as one open with the flag, not a setattr before it.
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
    conn->max_readahead = max_readahead;
    conn->max_read = 0;
}

int cfuse_reply_fd(fuse_req_t req, int fd, off_t offset, size_t size) {
    struct fuse_bufvec buffer = FUSE_BUFVEC_INIT(size);
    buffer.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    buffer.buf[0].fd = fd;
    buffer.buf[0].pos = offset;
    return fuse_reply_data(req, &buffer, FUSE_BUF_SPLICE_MOVE);
}

int cfuse_heap_limit_arenas(int count) { return mallopt(M_ARENA_MAX, count); }

int cfuse_heap_trim(void) { return malloc_trim(0); }

int cfuse_syncfs(int fd) { return syncfs(fd); }
