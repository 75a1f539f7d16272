import DropboxAPI
import Foundation
import Synchronization

/// The system calls a differential run makes on the filesystem it tests: the kernel's, on a
/// mounted folder (`Kernel`), or a model of the kernel driving the core in-process. Each
/// returns its value or the errno it failed with. Calls block: a side with state keeps it
/// in a class.
public protocol SystemCalls {
    func open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Sys.Outcome<Int32>
    func close(_ fd: Int32) -> Sys.Outcome<Int32>
    func pwrite(_ fd: Int32, _ bytes: [UInt8], at offset: Int64) -> Sys.Outcome<Int>
    func pread(_ fd: Int32, count: Int, at offset: Int64) -> Sys.Outcome<[UInt8]>
    func ftruncate(_ fd: Int32, _ size: Int64) -> Sys.Outcome<Int32>
    func fallocate(_ fd: Int32, _ mode: Int32, _ offset: Int64, _ length: Int64) -> Sys.Outcome<Int32>
    /// Stores through a shared mapping (`Sys.mapWrite`).
    func mapWrite(_ fd: Int32, _ bytes: [UInt8], at offset: Int64, sync: Bool) -> Sys.Outcome<Int>
    func fsync(_ fd: Int32) -> Sys.Outcome<Int32>
    func fdatasync(_ fd: Int32) -> Sys.Outcome<Int32>
    func fstat(_ fd: Int32) -> Sys.Outcome<Sys.Status>
    func truncate(_ path: String, _ size: Int64) -> Sys.Outcome<Int32>
    func rename(_ from: String, _ to: String) -> Sys.Outcome<Int32>
    func unlink(_ path: String) -> Sys.Outcome<Int32>
    func mkdir(_ path: String) -> Sys.Outcome<Int32>
    func rmdir(_ path: String) -> Sys.Outcome<Int32>
    func stat(_ path: String) -> Sys.Outcome<Sys.Status>
    func list(_ path: String) -> Sys.Outcome<[String]>
    /// The names of the folder open as `fd`, read from its start; `fd` stays open.
    func list(descriptor fd: Int32) -> Sys.Outcome<[String]>
    /// utimensat of a path: to `time`, or (nil) to now.
    func setTimes(_ path: String, _ time: timespec?) -> Sys.Outcome<Int32>
    func chmod(_ path: String, _ mode: mode_t) -> Sys.Outcome<Int32>
    /// chown of a path (nil: -1, unchanged).
    func chown(_ path: String, _ owner: UInt32?, _ group: UInt32?) -> Sys.Outcome<Int32>
    /// setxattr of a `user.` attribute, or (nil) removexattr (`Sys.setAttribute`).
    func setAttribute(_ path: String, _ name: String, _ value: [UInt8]?) -> Sys.Outcome<Int32>
    /// Every `user.` attribute listed, with its value (`Sys.attributes`).
    func attributes(_ path: String) -> Sys.Outcome<[String]>
    /// copy_file_range from `source` to `target` until it copies nothing (`Sys.copyAll`).
    func copyAll(_ source: Int32, to target: Int32) -> Sys.Outcome<Int64>
    /// Whether a name removed by another client is gone for every call, not only for stat.
    func isGone(_ path: String) -> Bool
}

extension SystemCalls {
    public func isGone(_ path: String) -> Bool { stat(path) == .failure(Sys.Errno(code: ENOENT)) }
    /// open(2) asking for mode 0644 if it creates the file.
    public func open(_ path: String, _ flags: Int32) -> Sys.Outcome<Int32> { open(path, flags, 0o644) }
}

extension SystemCalls {
    /// The whole content of a file (sized by fstat; a read past it shows any bytes beyond).
    func contents(_ path: String) -> Sys.Outcome<[UInt8]> {
        switch open(path, O_RDONLY) {
        case .failure(let error): return .failure(error)
        case .success(let fd):
            let read = fstat(fd).flatMap { pread(fd, count: Int($0.size) + 1, at: 0) }
            _ = close(fd)
            return read
        }
    }
}

/// The kernel's system calls (on a mount, or on local disk).
public struct Kernel: SystemCalls, Sendable {
    public init() {}
    public func open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Sys.Outcome<Int32> { Sys.open(path, flags, mode) }
    public func close(_ fd: Int32) -> Sys.Outcome<Int32> { Sys.close(fd) }
    public func pwrite(_ fd: Int32, _ bytes: [UInt8], at offset: Int64) -> Sys.Outcome<Int> { Sys.pwrite(fd, bytes, at: offset) }
    public func pread(_ fd: Int32, count: Int, at offset: Int64) -> Sys.Outcome<[UInt8]> { Sys.pread(fd, count: count, at: offset) }
    public func ftruncate(_ fd: Int32, _ size: Int64) -> Sys.Outcome<Int32> { Sys.ftruncate(fd, size) }
    public func fallocate(_ fd: Int32, _ mode: Int32, _ offset: Int64, _ length: Int64) -> Sys.Outcome<Int32> {
        Sys.fallocate(fd, mode, offset, length)
    }
    public func mapWrite(_ fd: Int32, _ bytes: [UInt8], at offset: Int64, sync: Bool) -> Sys.Outcome<Int> {
        Sys.mapWrite(fd, bytes, at: offset, sync: sync)
    }
    public func fsync(_ fd: Int32) -> Sys.Outcome<Int32> { Sys.fsync(fd) }
    public func fdatasync(_ fd: Int32) -> Sys.Outcome<Int32> { Sys.fdatasync(fd) }
    public func fstat(_ fd: Int32) -> Sys.Outcome<Sys.Status> { Sys.fstat(fd) }
    public func truncate(_ path: String, _ size: Int64) -> Sys.Outcome<Int32> { Sys.truncate(path, size) }
    public func rename(_ from: String, _ to: String) -> Sys.Outcome<Int32> { Sys.rename(from, to) }
    public func unlink(_ path: String) -> Sys.Outcome<Int32> { Sys.unlink(path) }
    public func mkdir(_ path: String) -> Sys.Outcome<Int32> { Sys.mkdir(path) }
    public func rmdir(_ path: String) -> Sys.Outcome<Int32> { Sys.rmdir(path) }
    public func stat(_ path: String) -> Sys.Outcome<Sys.Status> { Sys.stat(path) }
    public func setTimes(_ path: String, _ time: timespec?) -> Sys.Outcome<Int32> { Sys.setTimes(path, time) }
    public func list(_ path: String) -> Sys.Outcome<[String]> { Sys.list(path) }
    /// Read through a duplicate, rewound (they share the offset), as Python's
    /// `os.listdir(fd)` reads.
    public func list(descriptor fd: Int32) -> Sys.Outcome<[String]> {
        let copy = dup(fd)
        guard copy >= 0 else { return .failure(Sys.Errno(code: errno)) }
        lseek(copy, 0, SEEK_SET)
        return Sys.list(descriptor: copy)
    }
    public func chmod(_ path: String, _ mode: mode_t) -> Sys.Outcome<Int32> { Sys.chmod(path, mode) }
    public func chown(_ path: String, _ owner: UInt32?, _ group: UInt32?) -> Sys.Outcome<Int32> { Sys.chown(path, owner, group) }
    public func setAttribute(_ path: String, _ name: String, _ value: [UInt8]?) -> Sys.Outcome<Int32> { Sys.setAttribute(path, name, value) }
    public func attributes(_ path: String) -> Sys.Outcome<[String]> { Sys.attributes(path) }
    public func copyAll(_ source: Int32, to target: Int32) -> Sys.Outcome<Int64> { Sys.copyAll(source, to: target) }
    /// Also gone from the kernel's name cache: a stat asks the filesystem for the inode's
    /// attributes (and hears ENOENT) through a name the kernel still holds until the mount's
    /// notification of the change reaches it (or the name's second of validity ends); an
    /// open(O_CREAT) meanwhile found the cached folder and failed with EISDIR, asking nothing.
    /// An O_PATH open walks the name without asking the filesystem anything.
    public func isGone(_ path: String) -> Bool {
        guard stat(path) == .failure(Sys.Errno(code: ENOENT)) else { return false }
        guard case .success(let fd) = Sys.open(path, Sys.openPath) else { return true }
        _ = Sys.close(fd)
        return false
    }
}

/// Runs one sequence of operations side by side on a folder of the filesystem under test
/// (`tested`: dropboxfs, mounted or driven in-process) and on a local folder (the
/// reference: what any POSIX filesystem does) and compares every outcome: return values,
/// errnos, bytes read, sizes, listings. At the end it closes everything, compares the two
/// trees byte for byte, waits for the uploads and compares Dropbox with the local folder.
/// The first difference ends the run and is returned, with the steps so far. Blocking: run
/// it off Swift's cooperative threads (`offPool`).
/// `DROPBOXFS_DIFF_TRACE=1` prints what each step gave on both sides, as it runs: with
/// `DROPBOXFS_DIFF_SEED=N DROPBOXFS_DIFF_SEQUENCES=1` it shows which steps of a failing
/// sequence did anything (most fail alike on both sides), to pick them for
/// `DROPBOXFS_DIFF_DROP` or a kept sequence.
private let differentialTraced = ProcessInfo.processInfo.environment["DROPBOXFS_DIFF_TRACE"] != nil

public struct DifferentialRunner<Tested: SystemCalls> {
    let tested: Tested
    let testedRoot: String
    let local = Kernel()
    let localRoot: String
    /// The same folder as Dropbox sees it (for another client's writes and the final check).
    let remoteRoot: String
    let client: DropboxClient

    public struct Difference: Error, CustomStringConvertible {
        public var step: Int
        public var operation: String
        public var tested: String
        public var local: String
        public var description: String { "step \(step) \(operation): dropboxfs gave \(tested), local disk gave \(local)" }
    }

    /// Descriptors open on both sides, in the order they were opened.
    private var open: [(tested: Int32, local: Int32, path: Int)] = []

    /// Takes Dropbox out of reach (up `false`; `silent`: connections taken and never
    /// answered) or brings it back, for `.network` steps; without it they do nothing.
    public var network: (@Sendable (_ up: Bool, _ silent: Bool) throws -> Void)?
    /// Kills the tested side's process and mounts it again, for `.crash` steps (told whether
    /// Dropbox is in reach now); without it they do nothing.
    public var crash: (@Sendable (_ networkUp: Bool) throws -> Void)?
    /// Has the kernel forget what no descriptor holds, for `.forget` steps; without it they
    /// do nothing.
    public var forget: (@Sendable () throws -> Void)?
    /// Outages shared with sequences running at once on the same mount (their `network`
    /// steps, and this one's, go through it); nil: `network` alone.
    public var sharedNetwork: SharedNetwork?
    /// `sharedNetwork`'s outages begun when this sequence started.
    private var outagesAtStart = 0
    /// The network is down now.
    private var offline = false
    /// The network went down in this sequence: the tested side may answer ENETUNREACH until
    /// it has seen Dropbox back (its next probe), and what it queued meanwhile may not be
    /// on Dropbox yet: another client's change could then meet a pending upload, a conflict
    /// no local disk models, so those steps are skipped from here on.
    private var wentOffline = false
    /// `wentOffline`, or an outage of a sequence running at once began since this one started.
    private var outageSeen: Bool { wentOffline || (sharedNetwork.map { $0.outagesBegun > outagesAtStart } ?? false) }
    /// The step under way may need Dropbox (`Step.mayNeedDropbox`): only then is its
    /// ENETUNREACH taken for an answer.
    private var stepMayNeedDropbox = false
    /// The paths renames of this sequence took something away from (`Step.paths` entries):
    /// offline, the queue cannot keep a `mkdir` at such a name or an `rmdir` of a folder
    /// something was renamed out of, or a rename over it (doc/SEMANTICS.md, "Offline"), and
    /// those may fail with ENETUNREACH; any other mkdir, rmdir or rename may not.
    private var renamedAwayFrom: Set<String> = []
    /// Another client changed the tree, or the mount was killed, in this sequence: folders'
    /// times may differ from local disk's from then on, by design (Dropbox keeps none, and
    /// another client's change does not move them here; a kill loses those changed since
    /// they were last kept: doc/SEMANTICS.md, timestamps), and are no longer compared.
    private var folderTimesMayDiffer = false

    /// `testedRoot` and `localRoot` exist and are empty; `remoteRoot` is `testedRoot` as
    /// Dropbox names it.
    public init(tested: Tested, testedRoot: String, localRoot: String, remoteRoot: String, client: DropboxClient) {
        self.tested = tested
        self.testedRoot = testedRoot
        self.localRoot = localRoot
        self.remoteRoot = remoteRoot
        self.client = client
    }

    public mutating func run(_ operations: [Step]) throws {
        defer { closeAll() }
        // A sequence that fails in an outage leaves Dropbox reachable for the next one (left
        // out of reach, every later sequence, and each replay of the shrinking, failed too).
        // Shared outages end for the checks at the end of every sequence.
        defer { if offline && sharedNetwork == nil { try? setNetwork(up: true) } }
        if let sharedNetwork {
            outagesAtStart = sharedNetwork.outagesBegun
            if sharedNetwork.isDown { wentOffline = true }
        }
        for (index, operation) in operations.enumerated() {
            let (tested, local) = try perform(operation)
            if differentialTraced { print("step \(index): \(operation) -> dropboxfs \(tested) | local disk \(local)") }
            if tested != local { throw Difference(step: index, operation: operation.description, tested: tested, local: local) }
        }
        if let sharedNetwork {
            try sharedNetwork.holdingUp {
                wentOffline = outageSeen
                offline = false
                try compareAtTheEnd(of: operations)
            }
        } else {
            try compareAtTheEnd(of: operations)
        }
    }

    /// The end of a sequence: every descriptor closed on both sides, the trees compared, and
    /// once the uploads are done, Dropbox with the local folder.
    private mutating func compareAtTheEnd(of operations: [Step]) throws {
        let end = operations.count
        if offline { try setNetwork(up: true) }
        for descriptor in open {
            let (tested, local) = (describe(self.tested.close(descriptor.tested)), describe(self.local.close(descriptor.local)))
            if tested != local { throw Difference(step: end, operation: "close at the end", tested: tested, local: local) }
        }
        open = []
        let (testedTree, localTree) = (tree(testedRoot, on: tested), tree(localRoot, on: local))
        if testedTree != localTree { throw Difference(step: end, operation: "compare trees", tested: testedTree, local: localTree) }
        settle()
        var remote = remoteTree()
        // After an outage the mount may still take Dropbox for out of reach (settle then
        // returns once the files are on the local disk): its queue drains once it looks again.
        if wentOffline, remote != localFiles() {
            let expected = localFiles()
            _ = awaitShown({ settle(); remote = remoteTree(); return remote == expected }, { remote })
        }
        if remote != localFiles() { throw Difference(step: end, operation: "compare Dropbox after the uploads", tested: remote, local: localFiles()) }
    }

    private mutating func setNetwork(up: Bool, silent: Bool = false) throws {
        if let sharedNetwork {
            try sharedNetwork.set(up: up, silent: silent)
        } else {
            guard let network else { return }
            try network(up, silent)
        }
        offline = !up
        if !up { wentOffline = true }
    }

    /// Runs the tested side, then the local one, unless the tested call failed because
    /// Dropbox was out of reach: that call must have changed nothing, so neither does the
    /// local side.
    private func both<T>(_ tested: () -> Sys.Outcome<T>, _ local: () -> Sys.Outcome<T>) -> (Sys.Outcome<T>, Sys.Outcome<T>?) {
        let testedOutcome = tested()
        if outageSeen, stepMayNeedDropbox, case .failure(let error) = testedOutcome, error.code == ENETUNREACH { return (testedOutcome, nil) }
        return (testedOutcome, local())
    }

    /// `cp from to` on one side (`Step.copy`): what each call gave, in one line.
    private func copy(_ from: String, _ to: String, on calls: any SystemCalls) -> String {
        let source: Int32
        switch calls.open(from, O_RDONLY) {
        case .success(let fd): source = fd
        case .failure(let error): return "open source: \(error)"
        }
        defer { _ = calls.close(source) }
        let target: Int32
        switch calls.open(to, O_WRONLY | O_CREAT | O_TRUNC) {
        case .success(let fd): target = fd
        case .failure(let error): return "open target: \(error)"
        }
        let copied = calls.copyAll(source, to: target)
        return "copied: \(describe(copied)), closed: \(describe(calls.close(target)))"
    }

    /// A `stream` step: its writes of 1 MiB one after the other on both sides, each compared;
    /// the first that differs, or that the tested side could not make for want of Dropbox
    /// (then neither side made it), ends it.
    private func stream(_ d: (tested: Int32, local: Int32, path: Int), from offset: Int64, megabytes: Int, fill: UInt8) -> (String, String) {
        let mib = 1 << 20
        for index in 0..<megabytes {
            let at = offset + Int64(index * mib)
            let bytes = Self.bytes(mib, fill: fill &+ UInt8(truncatingIfNeeded: index), offset: at)
            let (t, l) = both({ self.tested.pwrite(d.tested, bytes, at: at) }, { self.local.pwrite(d.local, bytes, at: at) })
            guard let l else { return ("out of reach after \(index) MiB", "out of reach after \(index) MiB") }
            let (onTested, onLocal) = (describe(t), describe(l))
            // A difference ends it, and so does a failure alike (EBADF, EFBIG).
            guard onTested == onLocal, case .success = t else { return ("MiB \(index): \(onTested)", "MiB \(index): \(onLocal)") }
        }
        return ("wrote \(megabytes) MiB", "wrote \(megabytes) MiB")
    }

    /// `mkdir -p` of a relative path below `root` on one side: each folder missing made
    /// (only while `exists` finds the same folder on the other side, if given).
    private func makeFolders(_ relative: String, in root: String, on side: some SystemCalls,
                             while exists: ((String) -> Sys.Outcome<Sys.Status>)? = nil) -> String {
        var path = root
        for component in relative.split(separator: "/") {
            path += "/" + component
            if let exists, case .failure = exists(path) { break }
            switch side.mkdir(path) {
            case .success, .failure(Sys.Errno(code: EEXIST)): continue
            case .failure(let error): return "mkdir \(component): \(error)"
            }
        }
        return "folders there"
    }

    /// A `burst` step on one side: files `n0`, `n1`, ... made in `folder` one after the
    /// other (created, written, closed), each with bytes of its own; the first failure ends it.
    private func burst(in folder: String, count: Int, size: Int, fill: UInt8, on side: some SystemCalls) -> String {
        for index in 0..<count {
            let path = folder + "/n\(index)"
            let fd: Int32
            switch side.open(path, O_WRONLY | O_CREAT | O_TRUNC) {
            case .success(let opened): fd = opened
            case .failure(let error): return "file \(index): open: \(error)"
            }
            if size > 0 {
                let bytes = Self.bytes(size, fill: fill &+ UInt8(truncatingIfNeeded: index), offset: Int64(index))
                if case .failure(let error) = side.pwrite(fd, bytes, at: 0) {
                    _ = side.close(fd)
                    return "file \(index): write: \(error)"
                }
            }
            if case .failure(let error) = side.close(fd) { return "file \(index): close: \(error)" }
        }
        return "made \(count) files"
    }

    /// `rm -r` on one side: files unlinked and folders removed, deepest first, in listing
    /// order; the first failure ends it. Returns how many entries went, and the failure.
    private func removeTree(_ path: String, on side: some SystemCalls) -> String {
        var removed = 0
        func remove(_ path: String) -> String? {
            let status: Sys.Status
            switch side.stat(path) {
            case .success(let found): status = found
            case .failure(let error): return "stat: \(error)"
            }
            if !status.isDirectory {
                if case .failure(let error) = side.unlink(path) { return "unlink: \(error)" }
                removed += 1
                return nil
            }
            switch side.list(path) {
            case .failure(let error): return "list: \(error)"
            case .success(let names):
                for name in names.sorted() {
                    if let failure = remove(path + "/" + name) { return failure }
                }
            }
            if case .failure(let error) = side.rmdir(path) { return "rmdir: \(error)" }
            removed += 1
            return nil
        }
        let failure = remove(path)
        return "removed \(removed)" + (failure.map { ", then \($0)" } ?? "")
    }

    /// The local side of an `rm -r` the tested side could not finish for want of Dropbox:
    /// what the tested side removed before it failed goes here too.
    private func prune(_ local: String, like tested: String) {
        guard case .success(let status) = self.local.stat(local) else { return }
        guard case .success = self.tested.stat(tested) else {
            if status.isDirectory { _ = removeTree(local, on: self.local) } else { _ = self.local.unlink(local) }
            return
        }
        guard status.isDirectory else { return }
        for name in (try? self.local.list(local).get()) ?? [] { prune(local + "/" + name, like: tested + "/" + name) }
    }

    /// Whether a step of many calls on the tested side (`burst`, `removeTree`) ended with an
    /// ENETUNREACH it may give (`both`'s rule): the local side then goes only as far.
    private func endedForWantOfDropbox(_ outcome: String) -> Bool {
        outageSeen && stepMayNeedDropbox && outcome.hasSuffix(Sys.Errno(code: ENETUNREACH).description)
    }

    /// `both`, as the texts compared.
    private func compared<T>(_ tested: () -> Sys.Outcome<T>, _ local: () -> Sys.Outcome<T>) -> (String, String) {
        let (t, l) = both(tested, local)
        guard let l else { return ("out of reach: skipped", "out of reach: skipped") }
        return (describe(t), describe(l))
    }

    /// A stat's outcome as text; a folder's with the time set on it on purpose
    /// (`Sys.Status.setTime`), while folder times are compared.
    private func describeStat(_ outcome: Sys.Outcome<Sys.Status>) -> String {
        guard !folderTimesMayDiffer, case .success(let status) = outcome, status.isDirectory else { return describe(outcome) }
        return describe(outcome) + (status.setTime.map { ", mtime \($0.seconds).\($0.nanos)" } ?? ", mtime not set")
    }

    private mutating func closeAll() {
        for descriptor in open {
            _ = tested.close(descriptor.tested)
            _ = local.close(descriptor.local)
        }
        open = []
    }

    private func paths(_ index: Int) -> (tested: String, local: String) {
        let relative = index < 0 ? "" : "/" + Step.paths[index]
        return (testedRoot + relative, localRoot + relative)
    }

    /// open(2) on both sides; the descriptors are kept in a slot if both opened.
    private mutating func openOnBoth(_ path: Int, _ flags: Int32, _ mode: mode_t) -> (String, String) {
        let (t, l) = paths(path)
        let (tested, local) = both({ self.tested.open(t, flags, mode) }, { self.local.open(l, flags, mode) })
        guard let local else { return ("out of reach: skipped", "out of reach: skipped") }
        if case .success(let tfd) = tested, case .success(let lfd) = local {
            open.append((tfd, lfd, path))
        } else {
            if case .success(let fd) = tested { _ = self.tested.close(fd) }
            if case .success(let fd) = local { _ = self.local.close(fd) }
        }
        return (describe(tested.map { _ in 0 }), describe(local.map { _ in 0 }))
    }

    /// A listing through a held descriptor (`Step.listOpen`), then the stat of each name both
    /// sides listed, by path while the folder is where it was opened (local disk's word).
    private func listedThrough(_ d: (tested: Int32, local: Int32, path: Int)) -> (String, String) {
        let (onTested, onLocal) = (tested.list(descriptor: d.tested), local.list(descriptor: d.local))
        guard case .success(let testedNames) = onTested, case .success(let localNames) = onLocal else {
            return (describe(onTested.map { _ in 0 }), describe(onLocal.map { _ in 0 }))
        }
        let (t, l) = paths(d.path)
        guard case .success(let held) = local.fstat(d.local), case .success(let there) = local.stat(l), held.inode == there.inode else {
            return ("listed a folder moved since", "listed a folder moved since")
        }
        let both = Set(testedNames).intersection(localNames).sorted()
        return (both.map { "\($0): \(describeStat(tested.stat(t + "/" + $0)))" }.joined(separator: "; "),
                both.map { "\($0): \(describeStat(local.stat(l + "/" + $0)))" }.joined(separator: "; "))
    }

    /// The descriptor pair a slot picks, if any is open.
    private func descriptor(_ slot: Int) -> (tested: Int32, local: Int32, path: Int)? {
        open.isEmpty ? nil : open[slot % open.count]
    }

    /// Performs one operation on both sides; returns what each side gave, as text.
    private mutating func perform(_ operation: Step) throws -> (String, String) {
        stepMayNeedDropbox = operation.mayNeedDropbox
        switch operation {
        case .open(let path, let mode):
            return openOnBoth(path, mode.flags, mode.createMode)
        case .openFolder(let path):
            return openOnBoth(path, O_RDONLY | O_DIRECTORY, 0)
        case .listOpen(let slot):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return listedThrough(d)
        case .close(let slot):
            guard let index = open.isEmpty ? nil : slot % open.count else { return ("none open", "none open") }
            let descriptor = open.remove(at: index)
            return (describe(tested.close(descriptor.tested)), describe(local.close(descriptor.local)))
        case .write(let slot, let offset, let length, let fill):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            let bytes = Self.bytes(length, fill: fill, offset: offset)
            return compared({ tested.pwrite(d.tested, bytes, at: offset) }, { local.pwrite(d.local, bytes, at: offset) })
        case .stream(let slot, let offset, let megabytes, let fill):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return stream(d, from: offset, megabytes: megabytes, fill: fill)
        case .burst(let path, let count, let size, let fill):
            let (t, l) = paths(path)
            // Its folders first, as `tar x` and `mkdir -p` make them: a mkdir at a name some
            // rename took something away from may need Dropbox offline (as `.mkdir`).
            stepMayNeedDropbox = renamedAwayFrom.contains { Step.paths[path] == $0 || Step.paths[path].hasPrefix($0 + "/") }
            let madeTested = makeFolders(Step.paths[path], in: testedRoot, on: tested)
            if endedForWantOfDropbox(madeTested) {
                // The folders it made before it needed Dropbox are made here too; no file.
                let (testedSide, testedRoot, localRoot) = (tested, testedRoot, localRoot)
                _ = makeFolders(Step.paths[path], in: localRoot, on: local, while: { testedSide.stat(testedRoot + $0.dropFirst(localRoot.count)) })
                return (madeTested, madeTested)
            }
            let madeLocal = makeFolders(Step.paths[path], in: localRoot, on: local)
            return (madeTested + "; " + burst(in: t, count: count, size: size, fill: fill, on: tested),
                    madeLocal + "; " + burst(in: l, count: count, size: size, fill: fill, on: local))
        case .removeTree(let path):
            let (t, l) = paths(path)
            // Its folders' removals: as an rmdir's (below), offline after some renames.
            stepMayNeedDropbox = renamedAwayFrom.contains { $0.hasPrefix(Step.paths[path] + "/") }
            let onTested = removeTree(t, on: tested)
            if endedForWantOfDropbox(onTested) {
                // What it removed before it needed Dropbox stays removed; the rest stays.
                prune(l, like: t)
                return (onTested, onTested)
            }
            return (onTested, removeTree(l, on: local))
        case .read(let slot, let offset, let length):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return compared({ tested.pread(d.tested, count: length, at: offset) }, { local.pread(d.local, count: length, at: offset) })
        case .ftruncate(let slot, let size):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return compared({ tested.ftruncate(d.tested, size) }, { local.ftruncate(d.local, size) })
        case .fallocate(let slot, let mode, let offset, let length):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return compared({ tested.fallocate(d.tested, mode, offset, length) }, { local.fallocate(d.local, mode, offset, length) })
        case .mapWrite(let slot, let offset, let length, let fill, let sync):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            let bytes = Self.bytes(length, fill: fill, offset: offset)
            return compared({ tested.mapWrite(d.tested, bytes, at: offset, sync: sync) }, { local.mapWrite(d.local, bytes, at: offset, sync: sync) })
        case .fsync(let slot):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return compared({ tested.fsync(d.tested) }, { local.fsync(d.local) })
        case .fdatasync(let slot):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return compared({ tested.fdatasync(d.tested) }, { local.fdatasync(d.local) })
        case .fstat(let slot):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            return compared({ tested.fstat(d.tested) }, { local.fstat(d.local) })
        case .truncate(let path, let size):
            let (t, l) = paths(path)
            return compared({ tested.truncate(t, size) }, { local.truncate(l, size) })
        case .rename(let from, let to):
            let (tf, lf) = paths(from), (tt, lt) = paths(to)
            // Over a folder: its removal, as an rmdir's (below).
            stepMayNeedDropbox = to >= 0 && renamedAwayFrom.contains { $0.hasPrefix(Step.paths[to] + "/") }
            if from >= 0 { renamedAwayFrom.insert(Step.paths[from]) }
            return compared({ tested.rename(tf, tt) }, { local.rename(lf, lt) })
        case .caseRename(let path):
            let (t, l) = paths(path)
            if path >= 0 { renamedAwayFrom.insert(Step.paths[path]) }
            return (caseRename(t, on: self.tested), caseRename(l, on: local))
        case .unlink(let path):
            let (t, l) = paths(path)
            return compared({ tested.unlink(t) }, { local.unlink(l) })
        case .mkdir(let path):
            let (t, l) = paths(path)
            stepMayNeedDropbox = path >= 0 && renamedAwayFrom.contains { Step.paths[path] == $0 || Step.paths[path].hasPrefix($0 + "/") }
            return compared({ tested.mkdir(t) }, { local.mkdir(l) })
        case .rmdir(let path):
            let (t, l) = paths(path)
            stepMayNeedDropbox = path >= 0 && renamedAwayFrom.contains { $0.hasPrefix(Step.paths[path] + "/") }
            return compared({ tested.rmdir(t) }, { local.rmdir(l) })
        case .stat(let path):
            let (t, l) = paths(path)
            let (onTested, onLocal) = both({ tested.stat(t) }, { local.stat(l) })
            guard let onLocal else { return ("out of reach: skipped", "out of reach: skipped") }
            return (describeStat(onTested), describeStat(onLocal))
        case .touch(let path, let seconds, let nanos):
            let (t, l) = paths(path)
            let time = seconds.map { timespec(tv_sec: $0, tv_nsec: nanos) }
            return compared({ tested.setTimes(t, time) }, { local.setTimes(l, time) })
        case .list(let path):
            let (t, l) = paths(path)
            return compared({ tested.list(t) }, { local.list(l) })
        case .chmod(let path, let mode):
            let (t, l) = paths(path)
            return compared({ tested.chmod(t, mode) }, { local.chmod(l, mode) })
        case .chown(let path, let owner, let group):
            let (t, l) = paths(path)
            return compared({ tested.chown(t, owner, group) }, { local.chown(l, owner, group) })
        case .copy(let from, let to):
            let (tf, lf) = paths(from), (tt, lt) = paths(to)
            return (copy(tf, tt, on: tested), copy(lf, lt, on: local))
        case .setAttribute(let path, let name, let value):
            // Then every attribute the path has: those renames, moves and a crash carried along.
            let (t, l) = paths(path), attribute = Step.attributeNames[name], bytes = value.map { [$0] }
            let (onTested, onLocal) = both({ tested.setAttribute(t, attribute, bytes).flatMap { _ in tested.attributes(t) } },
                                           { local.setAttribute(l, attribute, bytes).flatMap { _ in local.attributes(l) } })
            guard let onLocal else { return ("out of reach: skipped", "out of reach: skipped") }
            // A local disk without user attributes (tmpfs before Linux 6.6) has nothing to compare.
            if case .failure(let error) = onLocal, error.code == EOPNOTSUPP { return ("no user.* on local disk", "no user.* on local disk") }
            return (describe(onTested), describe(onLocal))
        case .remoteWrite(let path, let length, let fill):
            folderTimesMayDiffer = true
            return try inReach { outageSeen ? ("skipped after an outage", "skipped after an outage") : try remoteWrite(path, length: length, fill: fill) }
        case .remoteWriteOpen(let slot, let length, let fill):
            guard let d = descriptor(slot) else { return ("none open", "none open") }
            folderTimesMayDiffer = true
            return try inReach { outageSeen ? ("skipped after an outage", "skipped after an outage") : try remoteWrite(d.path, length: length, fill: fill) }
        case .remoteDelete(let path):
            folderTimesMayDiffer = true
            return try inReach { outageSeen ? ("skipped after an outage", "skipped after an outage") : try remoteDelete(path) }
        case .remoteRename(let from, let to):
            folderTimesMayDiffer = true
            return try inReach { outageSeen ? ("skipped after an outage", "skipped after an outage") : try remoteRename(from, to) }
        case .settle:
            settle()
            return ("settled", "settled")
        case .forget:
            guard let forget else { return ("no forget here", "no forget here") }
            try forget()
            return ("forgotten", "forgotten")
        case .network(let up, let silent):
            try setNetwork(up: up, silent: silent)
            return ("network \(up ? "up" : "down")", "network \(up ? "up" : "down")")
        case .crash:
            guard let crash else { return ("no crash here", "no crash here") }
            folderTimesMayDiffer = true
            // What was written to a file still open may be lost: only closes are promised.
            let closed = open.map { (describe(tested.close($0.tested)), describe(local.close($0.local))) }
            open = []
            if let differing = closed.first(where: { $0.0 != $0.1 }) { return differing }
            try crash(!offline)
            return ("crashed", "crashed")
        }
    }

    /// Another client's change: no outage of a sequence running at once may begin meanwhile
    /// (its API calls would fail, and the mount could not show it). Whether one began since
    /// this sequence started is asked inside, where none can begin.
    private func inReach<T>(_ body: () throws -> T) throws -> T {
        guard let sharedNetwork else { return try body() }
        return try sharedNetwork.holdingUp(body)
    }

    /// `p` → `P`, the folder's listing, and back, as one outcome.
    private func caseRename<Side: SystemCalls>(_ path: String, on side: Side) -> String {
        let upper = PathText.parent(path) + "/" + PathText.last(path).uppercased()
        let there = describe(side.rename(path, upper)), listed = describe(side.list(PathText.parent(path)))
        return "\(there); \(listed); \(describe(side.rename(upper, path)))"
    }

    /// Whether the path holds a file that no descriptor has open: only such a file is
    /// deleted or moved by another client (a change elsewhere to a file open here is a
    /// conflict by design, which no local disk models; `isReplaceableFile` admits readers).
    /// Our own pending upload goes first, or it would race the other client's change (a
    /// conflict, by design too).
    private func isClosedFile(_ path: Int) -> Bool {
        let (t, l) = paths(path)
        guard descriptors(onFileAt: l)?.isEmpty == true else { return false }
        syncTested(t)
        return true
    }

    /// The descriptors open on the file at a local path, nil if no file is there. Open is
    /// judged by inode: a rename may have given an open file this name.
    private func descriptors(onFileAt l: String) -> [(tested: Int32, local: Int32, path: Int)]? {
        guard case .success(let status) = local.stat(l), !status.isDirectory else { return nil }
        return open.filter { (try? local.fstat($0.local).get())?.inode == status.inode }
    }

    /// `isClosedFile` for a folder too: one with no descriptor open on a file below it, whose
    /// tree goes to Dropbox first (each file, and each folder's removals and making).
    private func isClosedEntry(_ path: Int) -> Bool {
        let (t, l) = paths(path)
        guard case .success(let status) = local.stat(l) else { return false }
        guard status.isDirectory else { return isClosedFile(path) }
        let openInodes = Set(open.compactMap { (try? local.fstat($0.local).get())?.inode })
        var below: [UInt64] = []
        func walk(_ folder: String) {
            for name in (try? local.list(folder).get()) ?? [] {
                guard case .success(let entry) = local.stat(folder + "/" + name) else { continue }
                if entry.isDirectory { walk(folder + "/" + name) } else { below.append(entry.inode) }
            }
        }
        walk(l)
        guard !below.contains(where: openInodes.contains) else { return false }
        syncTree(t)
        return true
    }

    /// Awaits what another client's change must come to on the tested side: it travels
    /// through longpoll and a listing, which a loaded machine may take many seconds over
    /// (a bound against a hang, not a timing assertion). Returns what was last seen.
    private func awaitShown(_ shown: () -> Bool, _ seen: () -> String) -> String? {
        let deadline = Date().addingTimeInterval(300)
        while Date() < deadline {
            if shown() { return nil }
            usleep(20_000)
        }
        return seen()
    }

    /// Another client deletes a closed file, or a folder with everything in it, on Dropbox;
    /// dropboxfs must stop showing it.
    private func remoteDelete(_ path: Int) throws -> (String, String) {
        guard isClosedEntry(path) else { return ("skipped", "skipped") }
        let (t, l) = paths(path)
        let client = self.client, remote = remoteRoot + "/" + Step.paths[path]
        // Settled, as under a fault that loses answers (`drop`) the delete may be made unanswered.
        try blocking {
            try await client.settle(check: { try await client.metadataIfExists(remote) == nil ? () : nil }) {
                _ = try await client.rpc(Routes.delete, DeleteArgument(path: remote))
            }
        }
        try FileManager.default.removeItem(atPath: l)
        let stale = awaitShown({ tested.isGone(t) }, { describe(tested.stat(t)) })
        return (stale.map { "still shows the deleted file: \($0)" } ?? "gone", "gone")
    }

    /// Another client moves a closed file, or a folder with everything in it, on Dropbox to a
    /// name that is free, in a folder that exists (not the moved one); dropboxfs must show it
    /// there, with its bytes (the whole tree), and no longer where it was.
    private func remoteRename(_ from: Int, _ to: Int) throws -> (String, String) {
        let (tf, lf) = paths(from), (tt, lt) = paths(to)
        guard case .failure = local.stat(lt), case .success(let folder) = local.stat(PathText.parent(lt)), folder.isDirectory,
              !lt.hasPrefix(lf + "/"), isClosedEntry(from), case .success(let moved) = local.stat(lf) else {
            return ("skipped", "skipped")
        }
        if moved.isDirectory { return try remoteRenameFolder(tf, lf, to: tt, lt, remote: Step.paths[from], Step.paths[to]) }
        guard case .success(let bytes) = local.contents(lf) else { return ("skipped", "skipped") }
        // A removal here of the name taken goes first (fsync of its folder), as our own
        // pending upload does: the name is free here, but not on Dropbox until then.
        syncTested(PathText.parent(tt))
        let client = self.client, remote = (remoteRoot + "/" + Step.paths[from], remoteRoot + "/" + Step.paths[to])
        try blocking { try await Self.move(remote.0, to: remote.1, by: client) }
        _ = local.rename(lf, lt)
        // The mode kept here goes along (`stat` compares it).
        let stale = awaitShown({ tested.contents(tt) == .success(bytes) && tested.stat(tt) == local.stat(lt)
                                    && tested.isGone(tf) },
                               { "\(describe(tested.contents(tt))) at the new name, \(describe(tested.stat(tf))) at the old" })
        return (stale.map { "never showed the move: \($0)" } ?? "moved", "moved")
    }

    /// `remoteRename` of a folder: the tree at the new name must be the local one's.
    private func remoteRenameFolder(_ tf: String, _ lf: String, to tt: String, _ lt: String, remote from: String, _ to: String) throws -> (String, String) {
        syncTested(PathText.parent(tt))
        let client = self.client, remote = (remoteRoot + "/" + from, remoteRoot + "/" + to)
        try blocking { try await Self.move(remote.0, to: remote.1, by: client) }
        _ = local.rename(lf, lt)
        let expected = tree(lt, on: local)
        let stale = awaitShown({ tree(tt, on: tested) == expected && tested.isGone(tf) },
                               { "\(tree(tt, on: tested)) at the new name, \(describe(tested.stat(tf))) at the old" })
        return (stale.map { "never showed the move: \($0)" } ?? "moved", "moved")
    }

    /// The other client's move, settled: under a fault that loses answers it may be made
    /// unanswered (the source gone and the destination there).
    private static func move(_ from: String, to: String, by client: DropboxClient) async throws {
        try await client.settle(check: {
            guard try await client.metadataIfExists(from) == nil else { return nil }
            return try await client.metadataIfExists(to) != nil ? () : nil
        }) {
            _ = try await client.rpc(Routes.move, RelocationArgument(from: from, to: to))
        }
    }

    /// Another client replaces a file on Dropbox, closed or open here for reading only;
    /// dropboxfs must show the new bytes, and the local folder takes them too: written in
    /// place for a closed file, and for one open, as a new file renamed over it (with its mode,
    /// owner and attributes), whose descriptors keep the revision they opened, whole.
    private func remoteWrite(_ path: Int, length: Int, fill: UInt8) throws -> (String, String) {
        guard let readersOpen = isReplaceableFile(path) else { return ("skipped", "skipped") }
        let (t, l) = paths(path)
        let bytes = Self.bytes(length, fill: fill, offset: 0)
        let file = NSTemporaryDirectory() + "remote-" + UUID().uuidString
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        defer { unlink(file) }
        let client = self.client, remote = remoteRoot + "/" + Step.paths[path]
        try blocking { _ = try await client.uploadFile(file, to: CommitInfo(path: remote, mode: .overwrite)) }
        if readersOpen { try Self.replace(l, with: bytes) } else { try Data(bytes).write(to: URL(fileURLWithPath: l)) }
        let stale = awaitShown({ tested.contents(t) == .success(bytes) }, { describe(tested.contents(t)) })
        return (stale.map { "never showed the remote change: \($0)" } ?? "seen", "seen")
    }

    /// Whether a path is a file no descriptor may write: false when none is open on it, true
    /// when some read it (its upload is done either way, as in `isClosedFile`); nil for
    /// anything else.
    private func isReplaceableFile(_ path: Int) -> Bool? {
        let (t, l) = paths(path)
        guard let onIt = descriptors(onFileAt: l), onIt.allSatisfy({ fcntl($0.local, F_GETFL) & O_ACCMODE == O_RDONLY }) else { return nil }
        syncTested(t)
        return !onIt.isEmpty
    }

    /// `bytes` as a new file renamed over `path` on the local disk, with what the old one had
    /// of its own (mode, owner, user attributes), as the mount keeps them for the new revision.
    private static func replace(_ path: String, with bytes: [UInt8]) throws {
        let temporary = PathText.parent(path) + "/.replacing-" + UUID().uuidString
        var old = Glibc.stat()
        guard lstat(path, &old) == 0 else { throw POSIXError.current }
        try Data(bytes).write(to: URL(fileURLWithPath: temporary))
        // The mode again after the chown, which clears set-ID bits.
        guard Glibc.chown(temporary, old.st_uid, old.st_gid) == 0, Glibc.chmod(temporary, old.st_mode & 0o7777) == 0 else {
            throw POSIXError.current
        }
        for attribute in (try? Sys.userAttributes(path).get()) ?? [] { _ = Sys.setAttribute(temporary, attribute.name, attribute.value) }
        guard Glibc.rename(temporary, path) == 0 else { throw POSIXError.current }
    }

    /// Waits until Dropbox has every file under the tested folder (fsync of each, found by
    /// walking the tree: renames put files at paths no operation names), and every removal
    /// (fsync of the folder, as on a disk).
    private func settle() { syncTree(testedRoot) }

    /// fsync of every file below a folder of the tested side, then of each folder (its
    /// removals, and its own making), deepest first.
    private func syncTree(_ root: String) {
        for name in (try? tested.list(root).get()) ?? [] {
            let child = root + "/" + name
            if (try? tested.stat(child).get())?.isDirectory == true { syncTree(child); continue }
            syncTested(child)
        }
        syncTested(root)
    }

    /// fsync of a file or folder on the tested side (a folder: its removals), if it opens.
    private func syncTested(_ path: String) {
        guard case .success(let fd) = tested.open(path, O_RDONLY) else { return }
        _ = tested.fsync(fd)
        _ = tested.close(fd)
    }

    /// Every entry below a root: name, type, permission bits, size, and a hash of each file's bytes.
    private func tree<Side: SystemCalls>(_ root: String, on side: Side) -> String {
        var lines: [String] = []
        func walk(_ relative: String) {
            let listed = side.list(root + relative)
            guard case .success(let names) = listed else { return lines.append("\(relative): unlistable (\(describe(listed)))") }
            for name in names {
                let path = relative + "/" + name
                switch side.stat(root + path) {
                case .success(let status) where status.isDirectory:
                    lines.append("\(path)/ \(String(status.permissions, radix: 8)) \(status.owner):\(status.group)")
                    walk(path)
                case .success(let status):
                    lines.append("\(path) \(status.size) \(String(status.permissions, radix: 8)) \(status.owner):\(status.group) \(describe(side.contents(root + path)))")
                case .failure(let error):
                    lines.append("\(path) \(error)")
                }
            }
        }
        walk("")
        return lines.joined(separator: "\n")
    }

    /// The local folder's files as Dropbox names them (lower-case paths) with content hashes,
    /// and its folders (a path ending in "/"): a folder Dropbox holds that the local side
    /// does not (a conflicted copy, a folder removed here that a misordered change kept
    /// there) is a difference too.
    private func localFiles() -> String {
        var lines: [String] = []
        func walk(_ relative: String) {
            for name in (try? Sys.list(localRoot + relative).get()) ?? [] {
                let path = relative + "/" + name
                if (try? Sys.stat(localRoot + path).get())?.isDirectory == true {
                    lines.append(path.lowercased() + "/")
                    walk(path)
                } else {
                    lines.append("\(path.lowercased()) \((try? ContentHasher.hash(file: localRoot + path)) ?? "?")")
                }
            }
        }
        walk("")
        return lines.sorted().joined(separator: "\n")
    }

    /// Dropbox's files and folders below the remote root, listed the same way.
    private func remoteTree() -> String {
        let client = self.client, root = remoteRoot
        let entries = (try? blocking { try await client.listAll(root, recursive: true) }) ?? []
        var lines: [String] = []
        for entry in entries {
            switch entry {
            case .file(let file):
                lines.append("\(file.pathLower!.dropFirst(root.count)) \(file.contentHash ?? "?")")
            case .folder(let folder) where folder.pathLower!.count > root.count:
                lines.append(folder.pathLower!.dropFirst(root.count) + "/")
            default:
                break
            }
        }
        return lines.sorted().joined(separator: "\n")
    }

    /// Bytes a write puts: each tells its own offset, so a byte in the wrong place shows.
    /// The pattern repeats every 256 bytes: built once, then copied (a stream's MiBs).
    public static func bytes(_ count: Int, fill: UInt8, offset: Int64) -> [UInt8] {
        let period = (0..<min(count, 256)).map { UInt8(truncatingIfNeeded: (Int64($0) + offset) &* 31 &+ Int64(fill)) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count { bytes.append(contentsOf: period.prefix(count - bytes.count)) }
        return bytes
    }
}

extension DifferentialRunner: Sendable where Tested: Sendable {}

/// An outcome as text: the errno, or what succeeded (bytes by length and hash).
private func describe<T>(_ outcome: Sys.Outcome<T>) -> String {
    switch outcome {
    case .failure(let error): return error.description
    case .success(let value):
        // By type, not by cast: an empty array casts to any array type.
        if T.self == [UInt8].self, let bytes = value as? [UInt8] { return "\(bytes.count) bytes \(ContentHasher.hash(bytes).prefix(12))" }
        if T.self == [String].self, let names = value as? [String] { return names.isEmpty ? "no entries" : names.joined(separator: ",") }
        return "ok \(value)"
    }
}

/// Path helpers for the runner (plain strings, no Foundation path semantics).
public enum PathText {
    public static func parent(_ path: String) -> String { String(path[..<path.lastIndex(of: "/")!]) }
    public static func last(_ path: String) -> String { String(path[path.index(after: path.lastIndex(of: "/")!)...]) }
}

/// Awaits async work from a blocking thread (the runner's), never from a cooperative one.
public func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let result = Mutex<Result<T, any Error>?>(nil)
    Task {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0! }.get()
}
