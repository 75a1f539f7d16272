import Foundation

/// `files/create_folder_batch`: up to 10,000 folders in one call, each made or failing on
/// its own. Dropbox answers at once or, for a large batch, with a job polled through
/// `files/create_folder_batch/check`.
public struct CreateFolderBatchArgument: Encodable, Sendable {
    public var paths: [String]
    public var autorename = false
    public var forceAsync = false
    public init(paths: [String], forceAsync: Bool = false) {
        self.paths = paths
        self.forceAsync = forceAsync
    }
}

public typealias CreateFolderBatchLaunch = BatchJobLaunch<CreateFolderBatchResultEntry>
public typealias CreateFolderBatchJobStatus = BatchJobStatus<CreateFolderBatchResultEntry>

public enum CreateFolderBatchResultEntry: Decodable, Sendable {
    case success(FolderMetadata)
    /// `CreateFolderEntryError`: its one member, `path`, carries the `WriteError`.
    case failure(PathWriteError)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        if union.tag == "success" { self = .success(try union.field("metadata", FolderMetadata.self)) }
        else { self = .failure(try union.nested(PathWriteError.self)) }
    }
}
