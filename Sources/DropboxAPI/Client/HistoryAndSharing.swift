extension DropboxClient {
    /// Every match of a name search, following `has_more` pages, up to `limit` matches.
    public func searchAll(_ query: String, under path: String? = nil, deleted: Bool = false, limit: Int = 1000) async throws -> [Metadata] {
        let options = SearchOptions(path: path, maxResults: min(1000, max(1, limit)), fileStatus: deleted ? .deleted : .active,
                                    filenameOnly: true)
        var page = try await rpc(Routes.search, SearchArgument(query: query, options: options))
        var found = page.matches.compactMap(\.metadata)
        while page.hasMore, found.count < limit, let cursor = page.cursor {
            page = try await rpc(Routes.searchContinue, CursorArgument(cursor: cursor))
            found += page.matches.compactMap(\.metadata)
        }
        return Array(found.prefix(limit))
    }

    /// The file's shared link: the one it has, or a new one (`created` says which). Asking
    /// again never makes a second link, and `expires` is only used for a new one.
    public func sharedLink(for path: String, expires: String? = nil) async throws -> (link: SharedLink, created: Bool) {
        if let existing = try await existingSharedLink(for: path) { return (existing, false) }
        do {
            let settings = expires.map { SharedLinkSettings(expires: $0) }
            return (try await rpc(Routes.createSharedLink, CreateSharedLinkArgument(path: path, settings: settings)), true)
        } catch let error as CallError<CreateSharedLinkError> {
            // Made meanwhile (by us, if an earlier try's answer was lost): that one is the link.
            guard case .route(.sharedLinkAlreadyExists(let link), _, _, _) = error else { throw error }
            if let link { return (link, false) }
            if let existing = try await existingSharedLink(for: path) { return (existing, false) }
            throw error
        }
    }

    /// The link made for this very item, if it has one (links of folders above it do not count).
    public func existingSharedLink(for path: String) async throws -> SharedLink? {
        try await rpc(Routes.listSharedLinks, ListSharedLinksArgument(path: path, directOnly: true)).links.first
    }
}
