import Foundation

/// One step of a differential sequence: a system call on a path or an open descriptor, or
/// something that happens around the mount (another client changes a file on Dropbox,
/// uploads are forced to finish). Paths and descriptor slots are small indices, so every
/// sequence is meaningful whatever came before it (a slot picks among the descriptors open
/// at that moment; with none open it does nothing on both sides), which is what lets the
/// property-based shrinker drop any step.
public enum Step: Sendable, Equatable, CustomStringConvertible {
    case open(path: Int, mode: OpenMode)
    case close(slot: Int)
    case write(slot: Int, offset: Int64, length: Int, fill: UInt8)
    /// `megabytes` MiB written from `offset` in writes of 1 MiB, as `cp` or `dd` writes a
    /// large file (each MiB with a fill of its own, so a block out of place shows): past
    /// `UploadSchedule.largeFile` a file goes up through a session of its own, and one written
    /// from empty past a chunk starts that session before its close.
    case stream(slot: Int, offset: Int64, megabytes: Int, fill: UInt8)
    /// `count` new files in the folder at `path`, as `cp -r` or `tar x` makes them: each
    /// created (O_WRONLY|O_CREAT|O_TRUNC), given `size` bytes (a fill of its own) and closed,
    /// one after the other; the first failure ends it. Past 1,000 files the uploads take
    /// more than one batch commit, past 4,096 more than the staging pool holds.
    case burst(path: Int, count: Int, size: Int, fill: UInt8)
    /// `rm -r` of the path: every file below it unlinked and every folder removed after what
    /// it holds, names in sorted order (the same on both sides); the first failure ends it.
    case removeTree(path: Int)
    case read(slot: Int, offset: Int64, length: Int)
    case ftruncate(slot: Int, size: Int64)
    /// fallocate(2) in one of the modes the kernel passes to a FUSE filesystem.
    case fallocate(slot: Int, mode: Int32, offset: Int64, length: Int64)
    /// Stores through a shared mapping (mmap, memcpy, then msync if `sync`, munmap): the
    /// bytes reach the file through the kernel's page cache instead of write(2).
    case mapWrite(slot: Int, offset: Int64, length: Int, fill: UInt8, sync: Bool)
    case fsync(slot: Int)
    case fdatasync(slot: Int)
    case fstat(slot: Int)
    case truncate(path: Int, size: Int64)
    case rename(from: Int, to: Int)
    /// `p` → `P` → `p`: a case-only rename there and back, each step compared.
    case caseRename(path: Int)
    case unlink(path: Int)
    case mkdir(path: Int)
    case rmdir(path: Int)
    case stat(path: Int)
    /// utimensat (touch, tar x, cp -a, rsync): both times to `seconds` and `nanos` (a time
    /// before 2001, which `stat` then compares: `Sys.Status.setTime`), or to now (nil).
    case touch(path: Int, seconds: Int?, nanos: Int)
    case list(path: Int)
    /// open(O_RDONLY | O_DIRECTORY), held in a slot as `open`'s descriptors are: a listing
    /// read through it later (`listOpen`) spans the steps between, as `ls` or `find` in
    /// another process does.
    case openFolder(path: Int)
    /// The names of the folder a slot's descriptor holds, read from its start, then the stat
    /// of each name both sides list (whether a name made or removed since the folder was
    /// opened is listed POSIX leaves open): readdirplus hands the kernel attributes.
    case listOpen(slot: Int)
    /// chmod: a mode kept here (Dropbox keeps none), which renames take along and stat shows.
    case chmod(path: Int, mode: mode_t)
    /// chown (`cp -a`, `rsync -a`, `tar xp` as root): an owner and a group kept here, as a
    /// mode is (nil: unchanged, -1).
    case chown(path: Int, owner: UInt32?, group: UInt32?)
    /// setxattr of a `user.` attribute to one byte, or (nil) removexattr, kept here as a mode
    /// is; then every attribute the path has is compared.
    case setAttribute(path: Int, name: Int, value: UInt8?)
    /// `cp from to`: open `from` to read, `to` with O_WRONLY|O_CREAT|O_TRUNC, copy_file_range
    /// until it copies nothing, close both (a whole file Dropbox holds is copied by Dropbox).
    case copy(from: Int, to: Int)
    /// Another client writes the file on Dropbox (only when it is a closed file on both sides).
    case remoteWrite(path: Int, length: Int, fill: UInt8)
    /// `remoteWrite` of the file a slot's descriptor was opened on: done only where every
    /// descriptor open on it only reads, which then keeps the revision it opened (as after a
    /// rename over the file on a disk).
    case remoteWriteOpen(slot: Int, length: Int, fill: UInt8)
    /// Another client deletes the file, or the folder with its tree, on Dropbox (only a closed
    /// file, or a folder with no file open below it).
    case remoteDelete(path: Int)
    /// Another client moves the file, or the folder with its tree, on Dropbox to a free name
    /// (only a closed file, or a folder with no file open below it).
    case remoteRename(from: Int, to: Int)
    /// Every file's uploads finish now (fsync of each through the mount).
    case settle
    /// Dropbox goes out of reach or comes back: connections refused, or (`silent`) taken and
    /// never answered, so calls under way and made meanwhile hang until they time out. Out of
    /// reach, a call that needs it fails with ENETUNREACH and must change nothing (the local
    /// side is then not run); everything else must go on matching local disk.
    case network(up: Bool, silent: Bool = false)
    /// The kernel forgets every inode and name no descriptor holds (`drop_caches`, as memory
    /// pressure does): what the mount keeps for an inode only while the kernel holds it must
    /// be kept elsewhere by then (a folder's time, a mode). Nothing in the core's model,
    /// whose lookups are never forgotten.
    case forget
    /// Every descriptor is closed, then the filesystem's process is killed (kill -9) and
    /// mounted again: a completed close survives it (doc/SEMANTICS.md), and so do renames,
    /// removals and new folders, sent or still queued.
    case crash

    /// Modes tools set: executables, the defaults, private files and folders, read-only ones.
    public static let chmodModes: [mode_t] = [0o755, 0o644, 0o600, 0o700, 0o444, 0o555, 0o640, 0o4755]

    /// Owners and groups a chown gives: root's (the mount's default here), others, or none (-1).
    public static let chownIDs: [UInt32?] = [nil, 0, 1000, 65534]

    /// The extended attributes sequences set.
    public static let attributeNames = ["user.a", "user.b"]

    /// 0, KEEP_SIZE, PUNCH_HOLE | KEEP_SIZE, ZERO_RANGE, ZERO_RANGE | KEEP_SIZE.
    public static let fallocateModes: [Int32] = [0, 0x01, 0x03, 0x10, 0x11]

    /// The paths a sequence works in: enough to rename into and over, nest and collide, and
    /// one name beyond ASCII (folded by its Unicode lowercase mapping, escaped in the
    /// `Dropbox-API-Arg` header; last, so kept sequences keep their indices).
    public static let paths = ["a", "b", "c", "d", "d/a", "d/b", "e", "e/f", "d/e", "\u{E9}t\u{E9}"]

    /// Open flags worth combining (the ones tools use).
    public struct OpenMode: Sendable, Equatable, CustomStringConvertible {
        public let flags: Int32
        /// The mode a file it creates asks for (before the umask).
        public var createMode: mode_t = 0o644
        public let description: String
        public static let all = [
            OpenMode(flags: O_RDONLY, description: "RDONLY"),
            OpenMode(flags: O_WRONLY, description: "WRONLY"),
            OpenMode(flags: O_RDWR, description: "RDWR"),
            OpenMode(flags: O_RDWR | O_CREAT, description: "RDWR|CREAT"),
            OpenMode(flags: O_WRONLY | O_CREAT | O_TRUNC, description: "WRONLY|CREAT|TRUNC"),
            OpenMode(flags: O_RDWR | O_CREAT | O_TRUNC, description: "RDWR|CREAT|TRUNC"),
            OpenMode(flags: O_WRONLY | O_CREAT | O_APPEND, description: "WRONLY|CREAT|APPEND"),
            OpenMode(flags: O_RDWR | O_CREAT | O_EXCL, description: "RDWR|CREAT|EXCL"),
            OpenMode(flags: O_RDWR | O_APPEND, description: "RDWR|APPEND"),
            // Files made with other than the default mode, as `tar x` as root (0600, set to
            // the archive's mode before the close) and a script's output (0755).
            OpenMode(flags: O_WRONLY | O_CREAT | O_EXCL, createMode: 0o600, description: "WRONLY|CREAT|EXCL, 0600"),
            OpenMode(flags: O_RDWR | O_CREAT, createMode: 0o755, description: "RDWR|CREAT, 0755"),
        ]
    }

    public var description: String {
        func path(_ index: Int) -> String { index < 0 ? "." : Self.paths[index] }
        switch self {
        case .open(let p, let mode): return "open(\(path(p)), \(mode))"
        case .close(let slot): return "close(#\(slot))"
        case .write(let slot, let offset, let length, let fill): return "pwrite(#\(slot), at: \(offset), \(length) bytes of \(fill))"
        case .stream(let slot, let offset, let megabytes, let fill):
            return "stream(#\(slot), at: \(offset), \(megabytes) MiB of \(fill)+)"
        case .burst(let p, let count, let size, let fill): return "burst(\(path(p)), \(count) files of \(size) bytes of \(fill)+)"
        case .removeTree(let p): return "rm -r \(path(p))"
        case .read(let slot, let offset, let length): return "pread(#\(slot), at: \(offset), \(length))"
        case .ftruncate(let slot, let size): return "ftruncate(#\(slot), \(size))"
        case .fallocate(let slot, let mode, let offset, let length):
            return "fallocate(#\(slot), mode \(String(mode, radix: 16)), at: \(offset), \(length))"
        case .mapWrite(let slot, let offset, let length, let fill, let sync):
            return "mmapWrite(#\(slot), at: \(offset), \(length) bytes of \(fill)\(sync ? ", msync" : ""))"
        case .fsync(let slot): return "fsync(#\(slot))"
        case .fdatasync(let slot): return "fdatasync(#\(slot))"
        case .fstat(let slot): return "fstat(#\(slot))"
        case .truncate(let p, let size): return "truncate(\(path(p)), \(size))"
        case .rename(let from, let to): return "rename(\(path(from)), \(path(to)))"
        case .caseRename(let p): return "caseRename(\(path(p)))"
        case .unlink(let p): return "unlink(\(path(p)))"
        case .mkdir(let p): return "mkdir(\(path(p)))"
        case .rmdir(let p): return "rmdir(\(path(p)))"
        case .stat(let p): return "stat(\(path(p)))"
        case .touch(let p, let seconds, let nanos): return "touch(\(path(p)), \(seconds.map { "\($0).\(nanos)" } ?? "now"))"
        case .list(let p): return "list(\(path(p)))"
        case .openFolder(let p): return "opendir(\(path(p)))"
        case .listOpen(let slot): return "readdir(#\(slot)), then stat each name"
        case .chmod(let p, let mode): return "chmod(\(path(p)), \(String(mode, radix: 8)))"
        case .chown(let p, let owner, let group): return "chown(\(path(p)), \(owner.map(String.init) ?? "-1"), \(group.map(String.init) ?? "-1"))"
        case .copy(let from, let to): return "cp(\(path(from)), \(path(to)))"
        case .setAttribute(let p, let name, let value):
            return value.map { "setxattr(\(path(p)), \(Self.attributeNames[name]), \($0))" } ?? "removexattr(\(path(p)), \(Self.attributeNames[name]))"
        case .remoteWrite(let p, let length, let fill): return "remoteWrite(\(path(p)), \(length) bytes of \(fill))"
        case .remoteWriteOpen(let slot, let length, let fill): return "remoteWriteOpen(#\(slot), \(length) bytes of \(fill))"
        case .remoteDelete(let p): return "remoteDelete(\(path(p)))"
        case .remoteRename(let from, let to): return "remoteRename(\(path(from)), \(path(to)))"
        case .settle: return "settle"
        case .forget: return "forget (drop caches)"
        case .network(let up, let silent): return up ? "network up" : silent ? "network down (silent)" : "network down"
        case .crash: return "crash and mount again"
        }
    }
}

extension Step {
    /// Whether the mount may answer this call with ENETUNREACH while Dropbox is out of reach
    /// (doc/SEMANTICS.md, "Offline") whatever came before it: calls that need bytes only
    /// Dropbox has (reads, writes and truncations into blocks not in the cache, the close
    /// that seals such a file, a copy that reads it). mkdir, rmdir and rename may too, after
    /// certain renames only (`DifferentialRunner` tracks them); everything else is answered
    /// from local state, offline too.
    public var mayNeedDropbox: Bool {
        switch self {
        case .read, .write, .stream, .mapWrite, .ftruncate, .truncate, .fallocate, .close, .copy: return true
        default: return false
        }
    }
}

/// Random sequences from a seed (SplitMix64): the same seed gives the same sequence on
/// every machine, so CI runs a fixed set and a failure names the seed that shows it.
public struct SequenceGenerator {
    private var state: UInt64

    /// Which kind of sequences it makes (`Mix`).
    public let mix: Mix

    public init(seed: UInt64, mix: Mix = .fromEnvironment) {
        state = seed
        self.mix = mix
    }

    /// What sequences are made of: `default`, every kind of step; `tree`, mostly mkdir,
    /// rmdir and rename (`DROPBOXFS_DIFF_MIX=tree`); `large`, files past the size that
    /// uploads alone, in sessions of their own, written in streams of MiBs and changed while
    /// they upload (`DROPBOXFS_DIFF_MIX=large`; the default mix never makes one: its files
    /// stay under 9 MiB); `many`, bursts of hundreds to thousands of small files in a folder
    /// and `rm -r` of them, with renames, outages, kills and other clients' changes around
    /// (`DROPBOXFS_DIFF_MIX=many`; the other mixes make at most ten files).
    public enum Mix: String, Sendable {
        case `default`, tree, large, many
        public static let fromEnvironment = Mix(rawValue: ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_MIX"] ?? "") ?? .default

        /// Steps a sequence has: fewer in the large-file and many-files mixes, whose steps
        /// write tens of MiB or thousands of files on both sides, and upload them.
        public var lengths: ClosedRange<Int> { self == .large || self == .many ? 20...45 : 40...90 }
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

    /// Offsets that matter: the start, small ones, and both sides of the 4 MiB block edges
    /// (the block cache's and the content hash's unit).
    mutating func offset() -> Int64 {
        let block: Int64 = 4 << 20
        switch below(6) {
        case 0: return 0
        case 1, 2: return Int64(below(20_000))
        case 3: return block - Int64(below(5_000))
        case 4: return block + Int64(below(5_000))
        default: return 2 * block - Int64(below(5_000))
        }
    }

    mutating func length() -> Int {
        switch below(10) {
        case 0: return 1 + below(300_000)
        case 1, 2: return 1 + below(70_000)
        default: return 1 + below(5_000)
        }
    }

    public mutating func operation() -> Step {
        switch mix {
        case .default: return anyOperation()
        case .tree: return treeOperation()
        case .large: return largeFileOperation()
        case .many: return manyFilesOperation()
        }
    }

    /// The tree mix: sequences of mostly mkdir, rmdir and rename (a few files, listings,
    /// settles, outages and kills among them), for the order of namespace changes on Dropbox,
    /// and what the queue keeps while it is out of reach; the default mix has one such change
    /// in five steps.
    private mutating func treeOperation() -> Step {
        let path = below(Step.paths.count)
        switch below(100) {
        case 0..<25: return .mkdir(path: path)
        case 25..<40: return .rmdir(path: path)
        case 40..<75: return .rename(from: path, to: below(Step.paths.count))
        case 75..<78: return .caseRename(path: path)
        case 78..<80: return .list(path: below(Step.paths.count + 1) - 1)
        case 80: return below(2) == 0 ? .openFolder(path: below(Step.paths.count + 1) - 1) : .listOpen(slot: below(4))
        // A folder's time set, and compared: renames, removals and forgets must keep it.
        case 81..<83: return .touch(path: path, seconds: 946_684_800 + below(1_000_000), nanos: below(1_000_000_000))
        case 83: return .stat(path: path)
        case 84..<89: return .open(path: path, mode: Step.OpenMode.all[4])  // WRONLY|CREAT|TRUNC
        case 89..<94: return .close(slot: below(4))
        case 94..<96: return .unlink(path: path)
        case 96..<98: return .settle
        // Outages and kills among them: the queue keeps what Dropbox cannot have yet.
        case 98: return .network(up: below(2) == 0)
        default: return [.crash, .forget, .settle][below(3)]
        }
    }

    private mutating func anyOperation() -> Step {
        let path = below(Step.paths.count), slot = below(4)
        let fill = UInt8(truncatingIfNeeded: next())
        switch below(100) {
        case 0..<15: return .open(path: path, mode: Step.OpenMode.all[below(Step.OpenMode.all.count)])
        case 15, 41:
            guard below(4) != 0 else { return .touch(path: path, seconds: nil, nanos: 0) }
            return .touch(path: path, seconds: 946_684_800 + below(1_000_000), nanos: below(2) == 0 ? 0 : below(1_000_000_000))
        case 16..<26: return .close(slot: slot)
        case 26..<41: return .write(slot: slot, offset: offset(), length: length(), fill: fill)
        case 42..<44:
            return .mapWrite(slot: slot, offset: below(2) == 0 ? Int64(below(20_000)) : offset(), length: length(), fill: fill, sync: below(2) == 0)
        case 44..<52: return .read(slot: slot, offset: offset(), length: length())
        case 52..<55: return .ftruncate(slot: slot, size: below(2) == 0 ? Int64(below(10_000)) : offset())
        case 55: return .fallocate(slot: slot, mode: Step.fallocateModes[below(Step.fallocateModes.count)], offset: offset(), length: Int64(length()))
        case 56..<59: return .fsync(slot: slot)
        case 59..<61: return .fdatasync(slot: slot)
        case 61..<64: return .fstat(slot: slot)
        case 64..<66: return .truncate(path: path, size: Int64(below(10_000)))
        case 66..<72: return .rename(from: path, to: below(Step.paths.count))
        case 72..<74: return .caseRename(path: path)
        case 74..<79: return .unlink(path: path)
        case 79..<84: return .mkdir(path: path)
        case 84..<86: return .rmdir(path: path)
        case 86: return .stat(path: path)
        case 87: return .copy(from: path, to: below(Step.paths.count))
        case 88:
            guard below(2) == 0 else { return .setAttribute(path: path, name: below(2), value: below(3) == 0 ? nil : fill) }
            return .chmod(path: path, mode: Step.chmodModes[below(Step.chmodModes.count)])
        case 89: return .chown(path: path, owner: Step.chownIDs[below(Step.chownIDs.count)], group: Step.chownIDs[below(Step.chownIDs.count)])
        case 90..<92: return .list(path: below(Step.paths.count + 1) - 1)  // -1: the sequence's root
        case 92: return below(2) == 0 ? .openFolder(path: below(Step.paths.count + 1) - 1) : .listOpen(slot: slot)
        case 93: return .remoteWrite(path: path, length: length(), fill: fill)
        case 94: return .remoteWriteOpen(slot: slot, length: length(), fill: fill)
        case 95: return .remoteDelete(path: path)
        case 96: return .remoteRename(from: path, to: below(Step.paths.count))
        default:
            switch below(9) {
            case 0, 1, 2:
                let up = below(2) == 0
                return .network(up: up, silent: !up && below(3) == 0)
            case 3: return .crash
            case 4: return .forget
            default: return .settle
            }
        }
    }

    /// Offsets in large files: the start, both sides of the size past which a file uploads
    /// alone (16 MiB), of the 32 MiB chunks its session takes, and of the 4 MiB blocks.
    mutating func largeOffset() -> Int64 {
        let mib: Int64 = 1 << 20
        switch below(7) {
        case 0: return 0
        case 1: return Int64(below(20_000))
        case 2: return 16 * mib + Int64(below(10_000)) - 5_000
        case 3: return 32 * mib + Int64(below(10_000)) - 5_000
        case 4: return 36 * mib - Int64(below(5_000))
        case 5: return Int64(below(44)) * mib + Int64(below(5_000))
        default: return offset()
        }
    }

    /// The large-file mix (`Mix.large`): streams of 17 to 40 MiB (from the start, most of
    /// them, as `cp` writes), writes, reads and truncations at large offsets, and around them
    /// what meets an upload under way: renames, removals, copies, fsyncs, another client's
    /// changes, outages, kills and forgets.
    private mutating func largeFileOperation() -> Step {
        // Mostly the top folder's files, opened mostly to create or write: a step on a
        // descriptor does nothing while none is open.
        func pick() -> Int { below(10) < 7 ? [0, 1, 2, 9][below(4)] : below(Step.paths.count) }
        let path = pick(), slot = below(4)
        let fill = UInt8(truncatingIfNeeded: next())
        switch below(100) {
        case 0..<16:
            let writing = [3, 4, 5, 6, 10]  // RDWR|CREAT, WRONLY|CREAT|TRUNC, RDWR|CREAT|TRUNC, WRONLY|CREAT|APPEND, 0755
            return .open(path: path, mode: Step.OpenMode.all[below(5) == 0 ? below(Step.OpenMode.all.count) : writing[below(writing.count)]])
        case 16..<24: return .close(slot: slot)
        case 24..<33:
            return .stream(slot: slot, offset: below(3) == 0 ? largeOffset() : 0, megabytes: [17, 20, 34, 40][below(4)], fill: fill)
        case 33..<41: return .write(slot: slot, offset: largeOffset(), length: length(), fill: fill)
        case 41: return .mapWrite(slot: slot, offset: largeOffset(), length: length(), fill: fill, sync: below(2) == 0)
        case 42..<50: return .read(slot: slot, offset: largeOffset(), length: length())
        case 50..<55: return .ftruncate(slot: slot, size: below(3) == 0 ? Int64(below(10_000)) : largeOffset())
        case 55..<57: return .truncate(path: path, size: below(2) == 0 ? Int64(below(10_000)) : largeOffset())
        case 57..<60: return .fsync(slot: slot)
        case 60: return .fdatasync(slot: slot)
        case 61..<63: return .fstat(slot: slot)
        case 63..<70: return .rename(from: path, to: pick())
        case 70..<75: return .unlink(path: path)
        case 75..<77: return .mkdir(path: path)
        case 77: return .rmdir(path: path)
        case 78..<80: return .stat(path: path)
        case 80..<82: return .list(path: below(Step.paths.count + 1) - 1)
        case 82: return .copy(from: path, to: pick())
        case 83: return .chmod(path: path, mode: Step.chmodModes[below(Step.chmodModes.count)])
        case 84..<86: return .remoteWrite(path: path, length: length(), fill: fill)
        case 86: return .remoteDelete(path: path)
        case 87: return .remoteRename(from: path, to: pick())
        case 88..<92: return .settle
        default:
            switch below(7) {
            case 0, 1, 2:
                let up = below(2) == 0
                return .network(up: up, silent: !up && below(3) == 0)
            case 3, 4: return .crash
            default: return .forget
            }
        }
    }

    /// The many-files mix (`Mix.many`): bursts of small files into the folders (a few past
    /// the 1,000 files of a batch commit, one in fifty past the staging pool's 4,096), `rm -r`
    /// of them, and what meets them while their uploads wait or run: renames and removals of
    /// their folders, new files beside them, fsyncs, another client's changes, outages, kills
    /// and forgets.
    private mutating func manyFilesOperation() -> Step {
        let folders = [3, 6, 7, 8]  // d, e, e/f, d/e
        func folder() -> Int { below(5) == 0 ? below(Step.paths.count) : folders[below(folders.count)] }
        let fill = UInt8(truncatingIfNeeded: next())
        switch below(100) {
        case 0..<14: return .mkdir(path: folder())
        case 14..<30:
            let counts = [1, 37, 300, 999, 1000, 1001, 1500]
            let count = below(50) == 0 ? 4200 : counts[below(counts.count)]
            let size = [0, 1 + below(200), 4096, 1 + below(20_000)][below(4)]
            return .burst(path: folder(), count: count, size: size, fill: fill)
        case 30..<38: return .removeTree(path: below(4) == 0 ? below(Step.paths.count) : folder())
        case 38..<50: return .rename(from: below(Step.paths.count), to: below(Step.paths.count))
        case 50..<53: return .caseRename(path: folder())
        case 53..<56: return .rmdir(path: folder())
        case 56..<62: return .open(path: below(Step.paths.count), mode: Step.OpenMode.all[below(Step.OpenMode.all.count)])
        case 62..<66: return .write(slot: below(4), offset: offset(), length: length(), fill: fill)
        case 66..<70: return .close(slot: below(4))
        case 70..<73: return .unlink(path: below(Step.paths.count))
        case 73..<75: return .list(path: below(Step.paths.count + 1) - 1)
        case 75: return .openFolder(path: below(5) == 0 ? below(Step.paths.count + 1) - 1 : folder())
        case 76: return .listOpen(slot: below(4))
        case 77..<79: return .stat(path: folder())
        case 79: return .chmod(path: folder(), mode: Step.chmodModes[below(Step.chmodModes.count)])
        case 80..<82: return .remoteWrite(path: below(Step.paths.count), length: length(), fill: fill)
        case 82..<84: return .remoteDelete(path: folder())
        case 84..<86: return .remoteRename(from: folder(), to: below(Step.paths.count))
        case 86..<91: return .settle
        default:
            switch below(7) {
            case 0, 1, 2:
                let up = below(2) == 0
                return .network(up: up, silent: !up && below(3) == 0)
            case 3, 4: return .crash
            default: return .forget
            }
        }
    }

    public mutating func sequence(length range: ClosedRange<Int>) -> [Step] {
        (0..<(range.lowerBound + below(range.count))).map { _ in operation() }
    }
}
