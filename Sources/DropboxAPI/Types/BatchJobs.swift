import Foundation

/// What a batch route that may run as a job answers (`upload_session/finish_batch` v1,
/// `delete_batch`): the entries at once, or a job to poll through its `/check` route.
public enum BatchJobLaunch<Entry: Decodable & Sendable>: Decodable, Sendable {
    case complete([Entry])
    case asyncJobID(String)
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "complete": self = .complete(try union.field("entries", [Entry].self))
        case "async_job_id": self = .asyncJobID(try union.nested(String.self))
        case let tag: self = .other(tag)
        }
    }
}

/// What a batch job's `/check` answers: still running, the entries (one per entry asked, in
/// order), or the job failed as a whole (`too_many_write_operations`: try again later).
public enum BatchJobStatus<Entry: Decodable & Sendable>: Decodable, Sendable {
    case inProgress
    case complete([Entry])
    case failed(String)
    case other(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "in_progress": self = .inProgress
        case "complete": self = .complete(try union.field("entries", [Entry].self))
        case "failed": self = .failed((try? union.nested(UnionTag.self))?.tag ?? "other")
        case let tag: self = .other(tag)
        }
    }
}

/// Just the tag of a union whose members are not needed.
struct UnionTag: Decodable {
    let tag: String
    init(from decoder: any Decoder) throws { tag = try UnionReader(from: decoder).tag }
}
