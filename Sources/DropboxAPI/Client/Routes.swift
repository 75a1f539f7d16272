/// Every route the client uses, typed by argument, result and error.
public enum Routes {
    // users, auth
    public static let getCurrentAccount = Route<NoArgument, FullAccount, NoRouteError>("users/get_current_account")
    public static let getSpaceUsage = Route<NoArgument, SpaceUsage, NoRouteError>("users/get_space_usage")
    public static let revokeToken = Route<NoArgument, NoResult, NoRouteError>("auth/token/revoke", retry: .notProcessed)

    // metadata and listing
    public static let getMetadata = Route<GetMetadataArgument, Metadata, PathLookupError>("files/get_metadata")
    public static let listFolder = Route<ListFolderArgument, ListFolderResult, PathLookupError>("files/list_folder")
    public static let listFolderContinue = Route<CursorArgument, ListFolderResult, PathLookupError>("files/list_folder/continue")
    public static let getLatestCursor = Route<ListFolderArgument, CursorResult, PathLookupError>("files/list_folder/get_latest_cursor")
    public static let longpoll = Route<LongpollArgument, LongpollResult, PathLookupError>(
        "files/list_folder/longpoll", host: .notify, authenticated: false)

    // content
    public static let download = Route<DownloadArgument, FileMetadata, PathLookupError>(
        "files/download", host: .content, style: .download)
    /// Re-sending the same bytes to the same path changes nothing, so uploads are idempotent
    /// (autorename aside: callers that set it must not retry blindly).
    public static let upload = Route<UploadArgument, FileMetadata, PathWriteError>("files/upload", host: .content, style: .upload)
    /// With autorename a repeated upload would land beside the first as "name (1)".
    public static let uploadAutorenaming = Route<UploadArgument, FileMetadata, PathWriteError>(
        "files/upload", host: .content, style: .upload, retry: .notProcessed)
    /// Repeating a start after an unknown outcome only leaves an unused session behind
    /// (sessions expire on their own), so starts are retried like reads.
    public static let uploadSessionStart = Route<UploadSessionStartArgument, UploadSessionStartResult, UploadSessionLookupError>(
        "files/upload_session/start", host: .content, style: .upload)
    /// Idempotent at a fixed offset: a repeated append is refused with `incorrect_offset`
    /// pointing past it, which the uploader takes as success.
    public static let uploadSessionAppend = Route<UploadSessionAppendArgument, NoResult, UploadSessionLookupError>(
        "files/upload_session/append_v2", host: .content, style: .upload)
    public static let uploadSessionFinish = Route<UploadSessionFinishArgument, FileMetadata, UploadSessionFinishError>(
        "files/upload_session/finish", host: .content, style: .upload, retry: .notProcessed)
    public static let uploadSessionFinishBatch = Route<UploadSessionFinishBatchArgument, UploadSessionFinishBatchResult, NoRouteError>(
        "files/upload_session/finish_batch_v2", retry: .notProcessed)
    /// The older batch commit: answers with a job to poll through `finishBatchCheck`.
    public static let uploadSessionFinishBatchV1 = Route<UploadSessionFinishBatchArgument, UploadSessionFinishBatchLaunch, NoRouteError>(
        "files/upload_session/finish_batch", retry: .notProcessed)
    public static let uploadSessionFinishBatchCheck = Route<AsyncJobArgument, UploadSessionFinishBatchJobStatus, NoRouteError>(
        "files/upload_session/finish_batch/check")

    // tree operations: not repeatable blindly (a second delete fails with not_found)
    public static let createFolder = Route<CreateFolderArgument, FolderResult, PathWriteError>("files/create_folder_v2", retry: .notProcessed)
    public static let delete = Route<DeleteArgument, MetadataResult, DeleteError>("files/delete_v2", retry: .notProcessed)
    public static let move = Route<RelocationArgument, MetadataResult, RelocationError>("files/move_v2", retry: .notProcessed)
    /// Sent again after an unknown outcome: each entry carries its `parent_rev` (or is known to
    /// be gone), so a delete already done answers `not_found`, never deletes something newer.
    public static let deleteBatch = Route<DeleteBatchArgument, DeleteBatchLaunch, NoRouteError>("files/delete_batch")
    public static let deleteBatchCheck = Route<AsyncJobArgument, DeleteBatchJobStatus, NoRouteError>("files/delete_batch/check")
    /// Sent again after an unknown outcome: a folder made by the first try answers
    /// `conflict/folder`, which the caller takes as made.
    public static let createFolderBatch = Route<CreateFolderBatchArgument, CreateFolderBatchLaunch, NoRouteError>("files/create_folder_batch")
    public static let createFolderBatchCheck = Route<AsyncJobArgument, CreateFolderBatchJobStatus, NoRouteError>(
        "files/create_folder_batch/check")
    public static let copy = Route<RelocationArgument, MetadataResult, RelocationError>("files/copy_v2", retry: .notProcessed)
    /// Not sent again after an unknown outcome (a move done answers `from_lookup/not_found`):
    /// the caller settles each move by looking, as it does a `move_v2`'s.
    public static let moveBatch = Route<MoveBatchArgument, MoveBatchLaunch, NoRouteError>("files/move_batch_v2", retry: .notProcessed)
    public static let moveBatchCheck = Route<AsyncJobArgument, MoveBatchJobStatus, NoRouteError>("files/move_batch/check_v2")

    // history and search
    public static let listRevisions = Route<ListRevisionsArgument, ListRevisionsResult, ListRevisionsError>("files/list_revisions")
    /// A repeated restore finds the content in place: nothing changes twice.
    public static let restore = Route<RestoreArgument, FileMetadata, RestoreError>("files/restore")
    public static let search = Route<SearchArgument, SearchResult, SearchError>("files/search_v2")
    public static let searchContinue = Route<CursorArgument, SearchResult, SearchError>("files/search/continue_v2")

    // shared links
    /// Repeated after an unknown outcome, it answers `shared_link_already_exists` with the link.
    public static let createSharedLink = Route<CreateSharedLinkArgument, SharedLink, CreateSharedLinkError>(
        "sharing/create_shared_link_with_settings")
    public static let listSharedLinks = Route<ListSharedLinksArgument, ListSharedLinksResult, ListSharedLinksError>(
        "sharing/list_shared_links")
    public static let revokeSharedLink = Route<RevokeSharedLinkArgument, NoResult, RevokeSharedLinkError>(
        "sharing/revoke_shared_link", retry: .notProcessed)
}
