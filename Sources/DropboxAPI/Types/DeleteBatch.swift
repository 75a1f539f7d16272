import Foundation

/// `files/delete_batch`: up to 1,000 deletes in one call, done by Dropbox as a job polled
/// with `files/delete_batch/check`. Each entry may carry a `parent_rev`.
public struct DeleteBatchArgument: Encodable, Sendable {
    public var entries: [DeleteArgument]
    public init(entries: [DeleteArgument]) { self.entries = entries }
}

public typealias DeleteBatchLaunch = BatchJobLaunch<DeleteBatchResultEntry>
public typealias DeleteBatchJobStatus = BatchJobStatus<DeleteBatchResultEntry>

public enum DeleteBatchResultEntry: Decodable, Sendable {
    case success(Metadata)
    case failure(DeleteError)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        if union.tag == "success" { self = .success(try union.field("metadata", Metadata.self)) }
        else { self = .failure(try union.nested(DeleteError.self)) }
    }
}
