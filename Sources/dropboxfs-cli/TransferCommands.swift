import ArgumentParser
import DropboxAPI
import DropboxFS
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
            var entries: [Metadata]
            do {
                entries = try await client.listAll(root, recursive: recursive)
                // A recursive listing names the folder itself too: not one of its entries.
                entries.removeAll { $0.pathLower == CaseFolding.fold(root) }
            } catch let error as CallError<PathLookupError> {
                // `ls FILE` shows the file, as ls does.
                guard case .route(.path(.notFolder), _, _, _) = error,
                      case .file(let file) = try await client.rpc(Routes.getMetadata, GetMetadataArgument(path: root)) else { throw error }
                entries = [.file(file)]
            }
            for entry in entries.sorted(by: { ($0.pathLower ?? "") < ($1.pathLower ?? "") }) {
                let shown = recursive ? (entry.pathDisplay ?? entry.name) : entry.name
                guard long else { print(shown); continue }
                switch entry {
                case .file(let file):
                    print(Self.column(String(file.size), 12) + "  " + file.serverModified + "  " + shown)
                case .folder:
                    print(Self.column("-", 12) + "  " + String(repeating: " ", count: 20) + "  " + shown + "/")
                case .deleted:
                    continue
                }
            }
        }
    }
}

extension ListCommand {
    static func column(_ text: String, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - text.count)) + text
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
        let bar = ProgressBar("files")
        let report = try await client.downloadTree(source, to: destination, parallelism: parallel) { done, total in
            bar.update(done, of: total)
        }
        bar.finish()
        try finishTreeReport(report, verb: "downloaded", place: destination)
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
            // The item's own name, also for "." or "dir/..": resolved, like cp does.
            let name = URL(fileURLWithPath: local).standardizedFileURL.resolvingSymlinksInPath().lastPathComponent
            var destination = remotePath(remote)
            if destination.isEmpty {
                destination = "/" + name
            } else {
                do {
                    if case .folder = try await client.rpc(Routes.getMetadata, GetMetadataArgument(path: destination)) {
                        destination += "/" + name
                    }
                } catch let error as CallError<PathLookupError> {
                    guard case .route(.path(.notFound), _, _, _) = error else { throw error }
                }
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
        let bar = ProgressBar("files")
        let report = try await client.uploadTree(local, to: destination, mode: mode) { done, total in
            bar.update(Int64(done), of: Int64(total))
        }
        bar.finish()
        try finishTreeReport(report, verb: "uploaded", place: destination)
    }
}

/// Prints a tree transfer's outcome; failures (the first 20) on stderr and a non-zero exit.
func finishTreeReport(_ report: DropboxClient.TreeReport, verb: String, place: String) throws {
    for (path, why) in report.failures.prefix(20) {
        FuseLog.write("dropboxfs: \(path): \(why)\n")
    }
    let files = report.files == 1 ? "1 file" : "\(report.files) files"
    if !report.failures.isEmpty { throw ClientError.local("\(report.failures.count) of \(files) failed") }
    print("\(files) (\(ByteFormat.string(report.bytes))) \(verb): \(place)")
}
