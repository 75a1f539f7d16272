import ArgumentParser
import DropboxAPI
import Foundation

struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "List a Dropbox folder.")

    @Flag(name: .short, help: "Long format: size, modification time, kind.")
    var long = false

    @Flag(name: .customShort("R"), help: "List subfolders recursively.")
    var recursive = false

    @Argument(help: "Dropbox path (default: the root).")
    var path = "/"

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await reportingErrors("ls \(path)") {
            let client = try connection.client()
            let root = remotePath(path)
            let entries: [Metadata]
            do {
                entries = try await client.listAll(root, recursive: recursive)
            } catch let error as CallError<PathLookupError> {
                // `ls FILE` shows the file, as ls does.
                guard case .route(.path(.notFolder), _, _, _) = error,
                      case .file(let file) = try await client.rpc(Routes.getMetadata, GetMetadataArgument(path: root)) else { throw error }
                entries = [.file(file)]
            }
            for entry in entries.sorted(by: { ($0.pathLower ?? "") < ($1.pathLower ?? "") }) where entry.pathLower != root.lowercased() {
                let shown = recursive ? (entry.pathDisplay ?? entry.name) : entry.name
                guard long else { print(shown); continue }
                switch entry {
                case .file(let file):
                    print(String(format: "%12lld  %@  %@", file.size, file.serverModified, shown))
                case .folder:
                    print(String(format: "%12@  %@  %@/", "-", String(repeating: " ", count: 20), shown))
                case .deleted:
                    continue
                }
            }
        }
    }
}

struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get", abstract: "Copy a file or folder from Dropbox to this machine (content hashes checked).")

    @Argument(help: "Dropbox path of a file or folder.")
    var remote: String

    @Argument(help: "Local destination (a directory receives the item inside it).")
    var local: String

    @Option(help: "Files downloaded at once when copying a folder.")
    var parallel = 8

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await reportingErrors("get \(remote)") {
            let client = try connection.client()
            let source = remotePath(remote)
            var destination = local
            var isDirectory: ObjCBool = false
            let target = source.isEmpty ? nil : try await client.rpc(Routes.getMetadata, GetMetadataArgument(path: source))
            if FileManager.default.fileExists(atPath: local, isDirectory: &isDirectory), isDirectory.boolValue, let target {
                destination = (local as NSString).appendingPathComponent(target.name)
            }
            if case .file(let file)? = target {
                let bar = ProgressBar(file.name)
                try await client.downloadFile(source, to: destination) { done, total in bar.update(done, of: total) }
                bar.finish()
                return
            }
            try await getTree(client, source: source, destination: destination)
        }
    }

    private func getTree(_ client: DropboxClient, source: String, destination: String) async throws {
        let entries = try await client.listAll(source, recursive: true)
        let prefix = source.lowercased()
        func localPath(_ entry: Metadata) -> String {
            // Relative path from the entry's own lower-case path, cased by display where it matches.
            let display = entry.pathDisplay ?? entry.name
            let relative = String(display.dropFirst(prefix.count)).drop { $0 == "/" }
            return (destination as NSString).appendingPathComponent(String(relative))
        }
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        for case .folder(let folder) in entries where folder.pathLower != prefix {
            try FileManager.default.createDirectory(atPath: localPath(.folder(folder)), withIntermediateDirectories: true)
        }
        let files = entries.compactMap(\.fileMetadata)
        let total = files.reduce(Int64(0)) { $0 + $1.size }
        let bar = ProgressBar("\(files.count) files")
        let done = ByteCounter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            func launch() {
                let file = files[next]
                next += 1
                let target = localPath(.file(file))
                group.addTask {
                    try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                    try await client.downloadFile(file.pathLower ?? file.id, to: target)
                    bar.update(done.add(file.size), of: total)
                }
            }
            for _ in 0..<min(parallel, files.count) { launch() }
            while try await group.next() != nil { if next < files.count { launch() } }
        }
        bar.finish()
    }
}

struct PutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put", abstract: "Copy a file or folder from this machine to Dropbox (content hashes checked).")

    @Argument(help: "Local file or folder.")
    var local: String

    @Argument(help: "Dropbox destination path (an existing folder receives the item inside it).")
    var remote: String

    @Flag(help: "Replace files that already exist (default: fail on a different existing file).")
    var overwrite = false

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await reportingErrors("put \(local)") {
            let client = try connection.client()
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: local, isDirectory: &isDirectory) else {
                throw ClientError.local("\(local): no such file or directory")
            }
            var destination = remotePath(remote)
            if !destination.isEmpty, case .folder? = try? await client.rpc(Routes.getMetadata, GetMetadataArgument(path: destination)) {
                destination += "/" + (local as NSString).lastPathComponent
            } else if destination.isEmpty {
                destination = "/" + (local as NSString).lastPathComponent
            }
            let mode: WriteMode = overwrite ? .overwrite : .add
            if !isDirectory.boolValue {
                let bar = ProgressBar((local as NSString).lastPathComponent)
                let file = try await client.uploadFile(local, to: CommitInfo(path: destination, mode: mode)) { done, total in bar.update(done, of: total) }
                bar.finish()
                print("\(file.pathDisplay ?? destination)  \(ByteFormat.string(file.size))")
                return
            }
            try await putTree(client, destination: destination, mode: mode)
        }
    }

    private func putTree(_ client: DropboxClient, destination: String, mode: WriteMode) async throws {
        var items: [DropboxClient.BatchItem] = []
        var emptyFolders: [String] = [destination]
        let base = URL(fileURLWithPath: local).standardizedFileURL.path
        guard let walker = FileManager.default.enumerator(atPath: base) else { throw ClientError.local("cannot read \(local)") }
        while let relative = walker.nextObject() as? String {
            let full = (base as NSString).appendingPathComponent(relative)
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory)
            let target = destination + "/" + relative
            if isDirectory.boolValue {
                if (try? FileManager.default.contentsOfDirectory(atPath: full).isEmpty) == true { emptyFolders.append(target) }
            } else {
                items.append(.init(localPath: full, commit: CommitInfo(path: target, mode: mode)))
            }
        }
        if items.isEmpty == false { emptyFolders.removeFirst() }
        for folder in emptyFolders {
            do { _ = try await client.rpc(Routes.createFolder, CreateFolderArgument(path: folder)) } catch let error as CallError<PathWriteError> {
                guard case .route(.path(.conflict(.folder)), _, _, _) = error else { throw error }
            }
        }
        let bar = ProgressBar("\(items.count) files")
        let count = Int64(items.count)
        let results = try await client.uploadBatch(items) { done in bar.update(Int64(done), of: count) }
        bar.finish()
        let failures = zip(items, results).compactMap { item, result -> String? in
            if case .failure(let error) = result { return "\(item.commit.path): \(describe(error))" }
            return nil
        }
        for failure in failures.prefix(20) { FileHandle.standardError.write(Data("dropboxfs: put: \(failure)\n".utf8)) }
        if !failures.isEmpty { throw ClientError.local("\(failures.count) of \(items.count) files failed") }
        print("\(items.count) files uploaded to \(destination)")
    }
}

final class ByteCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var total: Int64 = 0
    func add(_ n: Int64) -> Int64 { lock.withLock { total += n; return total } }
}
