/// What `dropboxfs status` and the status file say of the uploads.
extension WriteBack {
    public struct PendingUpload: Sendable {
        public var path: String
        public var size: Int64
        public var sent: Int64
        public var state: String
        /// Its bytes have reached the local disk: a power cut cannot lose them.
        public var onDisk: Bool
        public var failure: String?
    }

    public var uploadedFiles: Int { state.withLock { $0.uploaded } }

    /// Uploads queued or under way.
    public var pendingCount: Int {
        state.withLock { state in state.versions.values.count { $0.isInQueue } }
    }

    /// How many uploads are pending and their bytes, with the first `limit` of them listed
    /// (those uploading first, then the oldest): the status file is rewritten every 2 s, and
    /// listing 5,000 queued files each time cost 3 % of the daemon's CPU in a burst of creates.
    public func pendingSummary(listing limit: Int) -> (count: Int, bytes: Int64, left: Int64, listed: [PendingUpload]) {
        state.withLock { state in
            let pending = state.versions.values.filter { $0.isInQueue }
            let bytes = pending.reduce(Int64(0)) { $0 + $1.file.size }
            let left = pending.reduce(Int64(0)) { $0 + max(0, $1.file.size - $1.sentBytes) }
            // Uploading first, then oldest first: sorted as plain integers (the status is
            // written every 2 s, and sorting 30,000 queued versions by a closure over their
            // references took 4 % of a core in an outage, with nothing else to do).
            let queuedBit: Int64 = 1 << 62
            let order = pending.map { $0.id | ($0.phase == .uploading ? 0 : queuedBit) }.sorted()
            let shown = order.prefix(limit).compactMap { state.versions[$0 & ~queuedBit] }
            return (pending.count, bytes, left, shown.map {
                PendingUpload(path: $0.path, size: $0.file.size, sent: $0.sentBytes,
                              state: $0.phase == .uploading ? "uploading" : ($0.failureText == nil ? "queued" : "waiting to retry"),
                              onDisk: $0.flushed,
                              failure: $0.failureText)
            })
        }
    }
}
