extension DropboxClient {
    /// Every entry of a folder (recursively if asked), following `has_more` pages.
    public func listAll(_ path: String, recursive: Bool = false) async throws -> [Metadata] {
        try await listAllWithCursor(path, recursive: recursive).entries
    }

    /// Every entry, and the cursor at the end of the listing: following it with
    /// `list_folder/continue` gives what changed since the listing was taken.
    public func listAllWithCursor(_ path: String, recursive: Bool = false) async throws -> (entries: [Metadata], cursor: String) {
        var page = try await rpc(Routes.listFolder, ListFolderArgument(path: path, recursive: recursive))
        var entries = page.entries
        while page.hasMore {
            page = try await rpc(Routes.listFolderContinue, CursorArgument(cursor: page.cursor))
            entries += page.entries
        }
        return (entries, page.cursor)
    }
}
