import Foundation
import Synchronization

/// Times Dropbox does not record, kept for as long as the kernel holds the inode: when a
/// file's or folder's status last changed here (chmod, a time set, a rename: its ctime),
/// when a folder's entries last changed here (an entry made, removed or renamed in it: its
/// mtime and ctime) or the time set on it (`touch`, `rsync -a`, `tar x`), and the access
/// time set on a file or folder (`touch -a`, `cp -p`, `tar x --atime-preserve`; reads do not
/// move it). Tools compare them (a backup's ctime check after a chmod, `find -newer` of a
/// folder, a POSIX suite's `utimensat` checks).
///
/// Bounded by the kernel's inode cache: an inode's times go when the kernel forgets it, and
/// it shows Dropbox's times again (a file's modification time as its ctime and atime; a
/// folder's modification time, kept then by `FolderTimes`, or the mount's start as all three
/// of a folder's times; doc/SEMANTICS.md).
final class ChangeTimes: Sendable {
    private struct Times {
        /// The status change (ctime) if later than the modification time.
        var status: timespec?
        /// A folder's modification time, replacing the mount's start.
        var folderModified: timespec?
        /// The access time set here, replacing the modification time.
        var accessed: timespec?

        func isSame(as other: Times) -> Bool {
            ChangeTimes.same(status, other.status) && ChangeTimes.same(folderModified, other.folderModified)
                && ChangeTimes.same(accessed, other.accessed)
        }
    }

    private let times = Mutex<[UInt64: Times]>([:])

    /// chmod, a time set, a rename of the inode.
    func statusChanged(_ inode: UInt64) {
        update(inode) { $0.status = $1 }
    }

    /// An entry of the folder was made, removed or renamed.
    func entriesChanged(_ folder: UInt64) {
        update(folder) { times, now in (times.folderModified, times.status) = (now, now) }
    }

    /// A folder made here: all its times are now, as on a disk (not the mount's start), as
    /// after an entry of it changed.
    func folderMade(_ folder: UInt64) { entriesChanged(folder) }

    /// utimensat of a folder: its modification time is `time`, its status changed now.
    func setFolderModified(_ folder: UInt64, to time: timespec) {
        update(folder) { times, now in (times.folderModified, times.status) = (time, now) }
    }

    /// utimensat's access time: kept, and the status changed now.
    func setAccessed(_ inode: UInt64, to time: timespec) {
        update(inode) { times, now in (times.accessed, times.status) = (time, now) }
    }

    private func update(_ inode: UInt64, _ change: (inout Times, timespec) -> Void) {
        let now = LocalVersion.now()
        times.withLock { change(&$0[inode, default: Times()], now) }
    }

    /// The kernel let go of the inode: its times go, but a folder's modification time changed
    /// here is handed to `keep` (`FolderTimes`) first. A lookup answered meanwhile (the
    /// kernel's next one gets the same number) finds the time here until `keep` returned, and
    /// kept after, never the one kept before; a time it set meanwhile stays.
    func forget(_ inode: UInt64, keepingFolderTime keep: (timespec) -> Void) {
        guard let held = times.withLock({ $0.isEmpty ? nil : $0[inode] }) else { return }
        if let modified = held.folderModified { keep(modified) }
        times.withLock { times in
            if let now = times[inode], now.isSame(as: held) { times[inode] = nil }
        }
    }

    /// A folder's modification time changed here, if any.
    func folderModified(_ inode: UInt64) -> timespec? {
        times.withLock { $0.isEmpty ? nil : $0[inode]?.folderModified }
    }

    /// When the inode's status last changed here (for a folder, an entry made, removed or
    /// renamed in it among the causes), while the kernel held it; nil if it did not.
    func lastStatusChange(of inode: UInt64) -> timespec? {
        times.withLock { $0.isEmpty ? nil : $0[inode]?.status }
    }

    static func same(_ a: timespec?, _ b: timespec?) -> Bool {
        a?.tv_sec == b?.tv_sec && a?.tv_nsec == b?.tv_nsec
    }

    /// Every folder modification time changed here, by inode.
    func foldersModified() -> [(inode: UInt64, time: timespec)] {
        times.withLock { $0.compactMap { inode, times in times.folderModified.map { (inode, $0) } } }
    }

    /// Puts the kept times into `attributes` (whose mtime, ctime and atime are Dropbox's).
    func apply(to attributes: inout stat, inode: UInt64, isFolder: Bool) {
        guard let kept = times.withLock({ $0.isEmpty ? nil : $0[inode] }) else { return }
        if isFolder, let modified = kept.folderModified { attributes.st_mtim = modified }
        attributes.st_ctim = attributes.st_mtim
        attributes.st_atim = kept.accessed ?? attributes.st_mtim
        if let status = kept.status, Self.isLater(status, than: attributes.st_ctim) { attributes.st_ctim = status }
    }

    static func isLater(_ a: timespec, than b: timespec) -> Bool {
        a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec
    }
}
