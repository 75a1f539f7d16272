import Foundation

/// Fills a new data directory with sample files (`--seed`). A spec is either `demo` (a small
/// tree to browse: documents, photos, unicode names, a few MiB of binary data) or a list of
/// `key=value` settings for tests and benchmarks:
///
/// - `files=N`: N text files spread over a folder tree (default 0);
/// - `dirs=D`, `depth=K`: D folders per level, K levels (defaults 4 and 2);
/// - `size=BYTES`: size of each file (suffixes K, M, G; default 1K);
/// - `unicode`: every tenth name uses non-ASCII characters;
/// - `big=BYTES`: one pseudo-random file of that size, `big.bin`;
/// - `root=/path`: where the tree goes (default: the account's root).
///
/// Everything is inserted in one transaction; files with identical content share one blob,
/// so a 100,000-entry tree seeds in seconds.
struct Seeder {
    var files = 0
    var dirs = 4
    var depth = 2
    var size: Int64 = 1024
    var unicode = false
    var big: Int64?
    var root = DropboxPath.root
    var demo = false

    struct SpecError: Error, CustomStringConvertible {
        var description: String
    }

    init(spec: String) throws {
        if spec == "demo" { demo = true; return }
        for item in spec.split(separator: ",") {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            let key = parts[0]
            let value = parts.count > 1 ? parts[1] : ""
            func count() throws -> Int {
                guard let n = Int(value), n >= 0 else { throw SpecError(description: "seed: \(key)=\(value) is not a count") }
                return n
            }
            func bytes() throws -> Int64 {
                guard let n = ByteCount.parse(value) else { throw SpecError(description: "seed: \(key)=\(value) is not a size") }
                return n
            }
            switch key {
            case "files": files = try count()
            case "dirs": dirs = max(1, try count())
            case "depth": depth = try count()
            case "size": size = try bytes()
            case "unicode": unicode = true
            case "big": big = try bytes()
            case "root":
                guard value.hasPrefix("/") else { throw SpecError(description: "seed: root must start with /") }
                root = DropboxPath(display: value)
            default: throw SpecError(description: "seed: unknown setting '\(key)' (files, dirs, depth, size, unicode, big, root; or 'demo')")
            }
        }
    }

    /// Writes the sample files, every path under `base` (a team member's home folder).
    func seed(_ namespace: Namespace, under base: DropboxPath = .root) throws {
        var plan = SeedPlan(namespace: namespace, base: base)
        if demo {
            plan.demoTree()
        } else {
            plan.tree(under: root, files: files, dirs: dirs, depth: depth, size: size, unicode: unicode)
            if let big { plan.randomFile(root.appending("big.bin"), size: big, seed: 42) }
        }
        try plan.commit()
    }
}

/// Sizes on the command line: `1024`, `4K`, `16M`, `1G` (powers of 1024).
public enum ByteCount {
    public static func parse(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var digits = text.uppercased()
        if digits.hasSuffix("IB") { digits.removeLast(2) } else if digits.hasSuffix("B") { digits.removeLast() }
        var multiplier: Int64 = 1
        if let last = digits.last, let unit = units[last] {
            multiplier = unit
            digits.removeLast()
        }
        guard let value = Int64(digits), value >= 0 else { return nil }
        return value * multiplier
    }
}

/// Collects folders and files, writes their blobs, then inserts all rows at once.
private struct SeedPlan {
    let namespace: Namespace
    /// Put in front of every path at `commit`.
    let base: DropboxPath
    var folders: [DropboxPath] = []
    var files: [(DropboxPath, blob: String?, size: Int64, hash: String)] = []
    var blobsByKey: [String: (String, String)] = [:]
    var failure: (any Error)?

    init(namespace: Namespace, base: DropboxPath) {
        self.namespace = namespace
        self.base = base
    }

    private func based(_ path: DropboxPath) -> DropboxPath {
        base.isRoot ? path : path.isRoot ? base : DropboxPath(display: base.display + path.display)
    }

    mutating func tree(under root: DropboxPath, files count: Int, dirs: Int, depth: Int, size: Int64, unicode: Bool) {
        var level = [root]
        var all: [DropboxPath] = [root]
        for _ in 0..<depth {
            var next: [DropboxPath] = []
            for parent in level {
                for d in 0..<dirs { next.append(parent.appending(String(format: "dir-%03d", d))) }
            }
            folders += next
            all += next
            level = next
        }
        for i in 0..<count {
            let folder = all[i % all.count]
            let name = unicode && i % 10 == 3
                ? String(format: "Ünïcødé-文件-%06d.txt", i)
                : String(format: "file-%06d.txt", i)
            textFile(folder.appending(name), size: size, variant: i % 61)
        }
    }

    mutating func demoTree() {
        let readme = """
            Welcome to dropboxfs!

            This folder is served by dropbox-emulator, a local stand-in for a Dropbox account.
            Everything here behaves as it would on Dropbox: try ls, cat, cp, grep -r, find, du.

            """
        literalFile(DropboxPath(display: "/README.txt"), readme)
        literalFile(DropboxPath(display: "/Documents/notes.md"), "# Notes\n\n- buy milk\n- ship dropboxfs\n")
        literalFile(DropboxPath(display: "/Documents/Reports/2026-q3.csv"),
                    "month,revenue,costs\n2026-07,1200,800\n2026-08,1350,820\n2026-09,1500,900\n")
        literalFile(DropboxPath(display: "/Ünïcødé — 文件/héllo wörld.txt"), "Grüße, 世界! 👋\n")
        literalFile(DropboxPath(display: "/Projects/dropboxfs/src/main.swift"), "print(\"Hello from the mount\")\n")
        for (i, size) in [256 << 10, 1 << 20, 3 << 20].enumerated() {
            randomFile(DropboxPath(display: "/Photos/IMG_\(1000 + i).jpg"), size: Int64(size), seed: UInt64(i + 1))
        }
        randomFile(DropboxPath(display: "/Large/sample-8MiB.bin"), size: 8 << 20, seed: 99)
        folders.append(DropboxPath(display: "/Music"))
        tree(under: DropboxPath(display: "/Archive"), files: 200, dirs: 3, depth: 2, size: 2048, unicode: true)
    }

    mutating func literalFile(_ path: DropboxPath, _ text: String) {
        let bytes = Array(text.utf8)
        addFile(path, key: "literal:" + text, size: Int64(bytes.count)) { write in write(bytes) }
    }

    /// Readable lines, so that `grep` has something to find; `variant` picks one of a few
    /// contents per size, shared between files.
    mutating func textFile(_ path: DropboxPath, size: Int64, variant: Int) {
        addFile(path, key: "text:\(size):\(variant)", size: size) { write in
            var produced: Int64 = 0
            var line = 0
            var chunk: [UInt8] = []
            while produced < size {
                chunk += Array("line \(line) of sample \(variant): the quick brown fox jumps over the lazy dog\n".utf8)
                line += 1
                if chunk.count >= 1 << 16 || produced + Int64(chunk.count) >= size {
                    let take = Int(min(Int64(chunk.count), size - produced))
                    write(Array(chunk[..<take]))
                    produced += Int64(take)
                    chunk.removeAll(keepingCapacity: true)
                }
            }
        }
    }

    mutating func randomFile(_ path: DropboxPath, size: Int64, seed: UInt64) {
        addFile(path, key: "random:\(size):\(seed)", size: size) { write in
            var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
            var buffer = [UInt64](repeating: 0, count: 1 << 17)  // 1 MiB
            var remaining = size
            while remaining > 0 {
                for i in buffer.indices {
                    state ^= state << 13; state ^= state >> 7; state ^= state << 17  // xorshift64
                    buffer[i] = state
                }
                let take = Int(min(Int64(buffer.count * 8), remaining))
                buffer.withUnsafeBytes { write(Array($0[..<take])) }
                remaining -= Int64(take)
            }
        }
    }

    /// Writes the content once per `key` (through `produce`) and records the file.
    private mutating func addFile(_ path: DropboxPath, key: String, size: Int64, produce: (([UInt8]) -> Void) -> Void) {
        if failure != nil { return }  // the seeding fails at commit
        if let (blob, hash) = blobsByKey[key] {
            files.append((path, blob: size > 0 ? blob : nil, size: size, hash: hash))
            return
        }
        let blob = "b" + Identifiers.random(20)
        let blobPath = namespace.blobFile(blob)
        let hasher = ContentHasher()
        guard let handle = FileHandle(forWritingAtPath: blobPath) ?? {
            _ = FileManager.default.createFile(atPath: blobPath, contents: nil)
            return FileHandle(forWritingAtPath: blobPath)
        }() else {
            failure = Seeder.SpecError(description: "seed: cannot write \(blobPath)")
            return
        }
        var writeError: (any Error)?
        produce { bytes in
            hasher.update(bytes)
            if writeError == nil {
                do { try handle.write(contentsOf: bytes) } catch { writeError = error }  // a full disk, say
            }
        }
        try? handle.close()
        if let writeError {
            failure = Seeder.SpecError(description: "seed: cannot write \(blobPath): \(writeError.localizedDescription)")
            return
        }
        let hash = hasher.finishHex()
        blobsByKey[key] = (blob, hash)
        files.append((path, blob: size > 0 ? blob : nil, size: size, hash: hash))
    }

    func commit() throws {
        if let failure { throw failure }
        let now = Timestamp.now()
        try namespace.locked {
            try namespace.writeTransactionLocked {
                let seq = namespace.nextSeqLocked()
                var created = Set<String>()
                func folder(_ path: DropboxPath) throws {
                    guard !path.isRoot, created.insert(path.lower).inserted else { return }
                    for ancestor in path.ancestors where created.insert(ancestor.lower).inserted {
                        _ = try namespace.insertFolderLocked(ancestor, seq: seq)
                    }
                    _ = try namespace.insertFolderLocked(path, seq: seq)
                }
                for path in folders { try folder(based(path)) }
                for file in files {
                    let path = based(file.0)
                    try folder(path.parent)
                    var entry = Entry(path: path, id: Identifiers.fileID(), isFolder: false)
                    entry.size = file.size
                    entry.contentHash = file.hash
                    entry.blob = file.blob
                    entry.rev = namespace.nextRevLocked(seq: seq)
                    entry.clientModified = now
                    entry.serverModified = now
                    entry.changeSeq = seq
                    try namespace.upsertLocked(entry)
                    try namespace.recordRevisionLocked(entry)
                    namespace.adjustUsedLocked(by: file.size)
                }
            }
        }
    }
}
