import Foundation

/// `files/move_batch_v2`: up to 1,000 moves in one call, done by Dropbox as a job polled
/// with `files/move_batch/check_v2`. Each entry succeeds or fails on its own.
public struct MoveBatchArgument: Encodable, Sendable {
    public struct Entry: Encodable, Sendable {
        public var fromPath: String
        public var toPath: String
        public init(from: String, to: String) {
            fromPath = from
            toPath = to
        }
    }

    public var entries: [Entry]
    public var autorename = false
    public init(entries: [Entry]) { self.entries = entries }
}

public typealias MoveBatchLaunch = BatchJobLaunch<MoveBatchResultEntry>
public typealias MoveBatchJobStatus = BatchJobStatus<MoveBatchResultEntry>

/// `RelocationBatchResultEntry`: the moved entry, or why this one failed
/// (`RelocationBatchErrorEntry`: a `RelocationError`, or a transient failure of its own).
public enum MoveBatchResultEntry: Decodable, Sendable {
    case success(Metadata)
    case failure(RelocationError)
    /// `too_many_write_operations`, `internal_error`: nothing was done, it may be sent again.
    case transient(String)

    public init(from decoder: any Decoder) throws {
        let union = try UnionReader(from: decoder)
        switch union.tag {
        case "success": self = .success(try union.field("success", Metadata.self))
        case "failure":
            let entry = try union.field("failure", MoveBatchErrorEntry.self)
            self = entry.relocation.map { .failure($0) } ?? .transient(entry.tag)
        case let tag: self = .transient(tag)
        }
    }

    private struct MoveBatchErrorEntry: Decodable {
        var tag: String
        var relocation: RelocationError?
        init(from decoder: any Decoder) throws {
            let union = try UnionReader(from: decoder)
            tag = union.tag
            relocation = tag == "relocation_error" ? try union.field("relocation_error", RelocationError.self) : nil
        }
    }
}
