import CFuseShim

/// The daemon's use of glibc's allocator. Memory freed after a large listing stays in the
/// process unless handed back: glibc gives each busy thread an arena of its own (up to 8 a
/// core) and returns a freed page only from the top of one. A mount runs for months, so
/// its memory must fall back once the work that needed it is done.
public enum Heap {
    /// Two arenas whatever the number of threads (Dispatch and libfuse run many): listing a
    /// folder of 100,000 files left the daemon at 155 MiB with glibc's default, 137 with one.
    public static func limitArenas() {
        _ = cfuse_heap_limit_arenas(2)
    }

    /// Hands free pages back to the system, wherever they lie in the heap: called after work
    /// that held many entries at once (a large listing, a large folder closed).
    static func giveBack() {
        _ = cfuse_heap_trim()
    }

    /// Entries above which a listing or a folder's snapshot counts as large.
    static let largeCount = 10_000
}
