extension DropboxClient {
    /// Every entry of a folder (recursively if asked), following `has_more` pages.
    public func listAll(_ path: String, recursive: Bool = false) async throws -> [Metadata] {
        var entries: [Metadata] = []
        _ = try await listPages(path, recursive: recursive) { entries += $0 }
        return entries
    }

    /// The listing a page at a time, each handed to `each` as it arrives (a folder of 100,000
    /// entries need not be held whole); returns the cursor at the end of the listing. The
    /// next page is asked for before `each` takes this one: its fetch and decoding overlap
    /// what `each` does.
    public func listPages(_ path: String, recursive: Bool = false, _ each: ([Metadata]) throws -> Void) async throws -> String {
        var page = try await rpc(Routes.listFolder, ListFolderArgument(path: path, recursive: recursive))
        while page.hasMore {
            let cursor = CursorArgument(cursor: page.cursor)
            async let next = rpc(Routes.listFolderContinue, cursor)
            try each(page.entries)
            page = try await next
        }
        try each(page.entries)
        return page.cursor
    }
}
