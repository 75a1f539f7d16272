extension DropboxClient {
    /// Every entry of a folder (recursively if asked), following `has_more` pages.
    public func listAll(_ path: String, recursive: Bool = false) async throws -> [Metadata] {
        var page = try await rpc(Routes.listFolder, ListFolderArgument(path: path, recursive: recursive))
        var entries = page.entries
        while page.hasMore {
            page = try await rpc(Routes.listFolderContinue, CursorArgument(cursor: page.cursor))
            entries += page.entries
        }
        return entries
    }
}
