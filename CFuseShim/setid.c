#define _GNU_SOURCE
#include "cfuse.h"
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/fuse.h>

// The clearing of set-user-ID and set-group-ID bits, taken over from the kernel
// (FUSE_HANDLE_KILLPRIV_V2), which libfuse 3.14 cannot ask for: it knows no such flag, builds
// its INIT answer from the flags it knows, and drops the "clear them" marks the kernel then
// puts on writes, truncates, chowns and opens with O_TRUNC.
//
// Why: while the kernel clears them itself it must know, before every write(2), whether the
// file has a security.capability attribute, and asks the mount each time (a GETXATTR per
// write), and it asks for the file's attributes again before each chown (a GETATTR). `tar x`
// of 2,000 files sent 29,117 requests, 3,700 of them for this. Handed the job, the kernel
// marks an inode that had nothing to clear (S_NOSEC) and asks no more for its next writes.
//
// How: the mount reads and answers /dev/fuse through these two functions (libfuse's custom
// I/O). Reading, they note the kernel's INIT (to answer it with the flag added, if the kernel
// offers it) and, for each request, whether the kernel marked it; the operation, run next on
// the same thread, asks `cfuse_request_clears_setid`. The mount has no security.capability
// to remove (it refuses every extended attribute but its own), so the mode bits are all.

static _Atomic uint64_t init_to_answer;  // the INIT request's id, while its answer is due
static atomic_int clearing_taken;
static _Thread_local int request_clears_setid;

// Whether the kernel marked this request (its body, `length` bytes after the header).
static int marked(uint32_t opcode, const char *body, size_t length) {
    switch (opcode) {
    case FUSE_WRITE:
        if (length < offsetof(struct fuse_write_in, write_flags) + sizeof(uint32_t)) return 0;
        return (((const struct fuse_write_in *)body)->write_flags & FUSE_WRITE_KILL_SUIDGID) != 0;
    case FUSE_SETATTR:
        if (length < sizeof(uint32_t)) return 0;
        return (((const struct fuse_setattr_in *)body)->valid & FATTR_KILL_SUIDGID) != 0;
    case FUSE_OPEN:
        if (length < sizeof(struct fuse_open_in)) return 0;
        return (((const struct fuse_open_in *)body)->open_flags & FUSE_OPEN_KILL_SUIDGID) != 0;
    default:
        return 0;
    }
}

ssize_t cfuse_setid_read(int fd, void *buffer, size_t size, void *userdata) {
    (void)userdata;
    ssize_t count = cfuse_read_request(fd, buffer, size);
    request_clears_setid = 0;
    if (count < (ssize_t)sizeof(struct fuse_in_header)) return count;
    const struct fuse_in_header *header = buffer;
    const char *body = (const char *)(header + 1);
    size_t length = (size_t)count - sizeof(*header);
    // The first fields of fuse_init_in (major, minor, max_readahead, flags) are in every
    // version of the protocol.
    if (header->opcode == FUSE_INIT && length >= 16) {
        const struct fuse_init_in *init = (const struct fuse_init_in *)body;
        if (init->flags & FUSE_HANDLE_KILLPRIV_V2) atomic_store(&init_to_answer, header->unique);
    } else {
        request_clears_setid = marked(header->opcode, body, length);
    }
    return count;
}

ssize_t cfuse_setid_writev(int fd, struct iovec *parts, int count, void *userdata) {
    (void)userdata;
    uint64_t init = atomic_load(&init_to_answer);
    if (init != 0 && count >= 2 && parts[0].iov_len >= sizeof(struct fuse_out_header) && parts[1].iov_len >= 16) {
        const struct fuse_out_header *header = parts[0].iov_base;
        if (header->unique == init && header->error == 0) {
            ((struct fuse_init_out *)parts[1].iov_base)->flags |= FUSE_HANDLE_KILLPRIV_V2;
            atomic_store(&init_to_answer, 0);
            atomic_store(&clearing_taken, 1);
        }
    }
    return writev(fd, parts, count);
}

// Given, so that libfuse keeps splicing file data into its answers (it does not, for a
// session whose custom I/O has no splice_send).
static ssize_t splice_send(int from, off_t *fromOffset, int to, off_t *toOffset, size_t length, unsigned int flags, void *userdata) {
    (void)userdata;
    return splice(from, fromOffset, to, toOffset, length, flags);
}

int cfuse_take_setid_clearing(struct fuse_session *session) {
    static const struct fuse_custom_io io = { .read = cfuse_setid_read, .writev = cfuse_setid_writev, .splice_send = splice_send };
    return fuse_session_custom_io(session, &io, fuse_session_fd(session));
}

int cfuse_request_clears_setid(void) { return request_clears_setid; }

int cfuse_setid_clearing_taken(void) { return atomic_load(&clearing_taken); }
