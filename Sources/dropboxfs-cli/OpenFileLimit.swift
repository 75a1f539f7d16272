import Foundation

/// The daemon's limit of open descriptors, raised from the soft limit to the hard one. The
/// soft limit is often 1,024, kept low for programs that still use select(2); this one polls.
/// Each file open for writing holds a staging file, each connection a socket, each spliced
/// read a block file: a user with many files open at once must not meet EMFILE first.
enum OpenFileLimit {
    static func raise() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}
