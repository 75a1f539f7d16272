#ifndef CFUSE_SHIM_H
#define CFUSE_SHIM_H
// The only code that includes libfuse's headers. Swift fills `struct fuse_lowlevel_ops`
// and calls the reply functions directly; this shim exists for what Swift cannot reach:
// FUSE_USE_VERSION must be set before the headers, FUSE_ARGS_INIT and
// fuse_session_loop_mt are macros, and the loop's configuration object wants a typed setup.
#define FUSE_USE_VERSION 34
#include <fuse3/fuse_lowlevel.h>
// getxattr/setxattr/removexattr, which Glibc's module leaves out: `dropboxfs pin` sets the
// mount's `user.dropbox.pinned` attribute.
#include <sys/xattr.h>

/// fuse_session_new over an argv (copied by libfuse): FUSE_ARGS_INIT is a macro.
struct fuse_session *cfuse_session_new(int argc, char **argv, const struct fuse_lowlevel_ops *ops, void *userdata);

/// Whether libfuse takes these options (argv as for cfuse_session_new), checked by making a
/// session and dropping it, nothing mounted: 0 if it does; -1 with what libfuse said (it
/// names the option it does not know) in `message`, instead of on stderr.
int cfuse_check_options(int argc, char **argv, char *message, size_t size);

/// Runs the multithreaded loop until unmount or a signal: fuse_session_loop_mt is a macro
/// that picks a versioned symbol.
int cfuse_session_loop(struct fuse_session *session, unsigned max_threads);

/// The `fuse_file_info` bitfields Swift may not set reliably, as plain calls.
void cfuse_file_info_set_keep_cache(struct fuse_file_info *info, int keep);
/* Bitfield: Swift cannot set it. Direct I/O bypasses the page cache for one open file. */
void cfuse_file_info_set_direct_io(struct fuse_file_info *info, int direct);
/* Bitfield: an open whose close needs no FLUSH request (the kernel then sends none). */
void cfuse_file_info_set_noflush(struct fuse_file_info *info, int noflush);

/// Answers a read with `size` bytes of `fd` at `offset`, spliced by the kernel where it can
/// (no copy through user space): FUSE_BUFVEC_INIT is a macro.
int cfuse_reply_fd(fuse_req_t req, int fd, off_t offset, size_t size);

/// Sets the FUSE_CAP_* flags we want, from the connection's capable set (init callback).
void cfuse_conn_configure(struct fuse_conn_info *conn, unsigned max_readahead);

/// glibc's allocator settings, for the daemon these headers serve (malloc.h is not in
/// Swift's Glibc module): at most `count` arenas; free pages handed back to the system.
int cfuse_heap_limit_arenas(int count);
int cfuse_heap_trim(void);

/// syncfs(2), which Glibc's module leaves out (it wants _GNU_SOURCE): flushes the whole
/// filesystem holding `fd`, for the daemon's cache.
int cfuse_syncfs(int fd);

/// Takes over from the kernel the clearing of set-user-ID and set-group-ID bits
/// (FUSE_HANDLE_KILLPRIV_V2, which libfuse 3.14 cannot ask for; see setid.c): call after
/// fuse_session_mount. The kernel then asks for no GETXATTR before each write, only before
/// the first write to each inode.
int cfuse_take_setid_clearing(struct fuse_session *session);

/// read(2) of the next request from /dev/fuse; while requests come in bursts, polled for a
/// moment first, so that the next one needs no wake-up (see request_spin.c).
ssize_t cfuse_read_request(int fd, void *buffer, size_t size);

/// Whether the kernel marked the request this thread is answering as one that clears the
/// file's set-ID bits (a write or truncate by a caller without CAP_FSETID, a chown, an
/// open with O_TRUNC). Ask at the start of the operation, on the thread libfuse called.
int cfuse_request_clears_setid(void);

/// Whether the kernel accepted (its INIT was answered with the flag).
int cfuse_setid_clearing_taken(void);

/// The reading and answering functions the session is given, open to tests.
ssize_t cfuse_setid_read(int fd, void *buffer, size_t size, void *userdata);
ssize_t cfuse_setid_writev(int fd, struct iovec *parts, int count, void *userdata);

#endif
