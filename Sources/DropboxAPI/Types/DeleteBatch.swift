import Foundation

/// `files/delete_batch`: up to 1,000 deletes in one call, done by Dropbox as a job polled
/// with `files/delete_batch/check`. Each entry may carry a `parent_rev`.
public struct DeleteBatchArgument: Encodable, Sendable {
    public var entries: [DeleteArgument]
    public init(entries: [DeleteArgument]) { self.entries = entries }
}

/// What `delete_batch` answers: a job to poll, or (small batches) the results at once.
public enum DeleteBatchLaunch: Decodable, Sendable {
    case asyncJobID(String)
    case complete([DeleteBatchResultEntry])
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "async_job_id": self = .asyncJobID(try union.nested(String.self))
        case "complete": self = .complete(try union.field("entries", [DeleteBatchResultEntry].self))
        case let tag: self = .other(tag)
        }
    }
}

/// `delete_batch/check`: still running, the results (one per entry, in order), or the
/// whole job failed (`too_many_write_operations`: try again later).
public enum DeleteBatchJobStatus: Decodable, Sendable {
    case inProgress
    case complete([DeleteBatchResultEntry])
    case failed(String)
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "in_progress": self = .inProgress
        case "complete": self = .complete(try union.field("entries", [DeleteBatchResultEntry].self))
        case "failed": self = .failed((try? union.nested(UnionTag.self))?.tag ?? "other")
        case let tag: self = .other(tag)
        }
    }
}

public enum DeleteBatchResultEntry: Decodable, Sendable {
    case success(Metadata)
    case failure(DeleteError)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        if union.tag == "success" { self = .success(try union.field("metadata", Metadata.self)) }
        else { self = .failure(try union.nested(DeleteError.self)) }
    }
}

/// Just the tag of a union whose members are not needed.
struct UnionTag: Decodable {
    let tag: String
    init(from decoder: any Decoder) throws { tag = try UnionReader(from: decoder).tag }
}
