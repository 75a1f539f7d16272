import DropboxAPI
import DropboxFS
import SQLiteStore

/// The cache's three SQLite stores, and what a user loses if a damaged one is set aside: said
/// when one cannot be read as a database (a disk error, a file overwritten), instead of
/// SQLite's bare "file is not a database". The mount refuses to start and leaves the file as
/// it is: a queue of changes not yet on Dropbox, or what only this machine keeps, is the
/// user's to recover, not the mount's to throw away.
enum CacheStoreFile {
    case metadata, blocks, uploads

    var file: String {
        switch self {
        case .metadata: "metadata.sqlite"
        case .blocks: BlockCache.storeFile
        case .uploads: "uploads.sqlite"
        }
    }

    /// What the store held, and what moving the cache directory aside means for it.
    private var held: String {
        switch self {
        case .metadata:
            "it holds the view of Dropbox, which a new cache lists again, and the modes, owners, extended attributes and folder times kept only on this machine"
        case .blocks:
            "it indexes the cached blocks, copies of what Dropbox holds, and which files are pinned"
        case .uploads:
            "it queues the changes not yet on Dropbox, whose bytes wait in the staging folder beside it"
        }
    }

    /// Opens the store with `open`; a file SQLite finds is not a database, or is corrupt,
    /// becomes one clear line.
    static func opening<T>(_ store: CacheStoreFile, in cacheRoot: String, _ open: () async throws -> T) async throws -> T {
        do {
            return try await open()
        } catch let failure as SQLiteDatabase.Failure where failure.code == 26 || failure.code == 11 {  // SQLITE_NOTADB, SQLITE_CORRUPT
            throw ClientError.local("""
                the cache store \(cacheRoot)/\(store.file) is damaged (\(failure.message)): \(store.held); \
                to start afresh, move the cache directory \(cacheRoot) aside and mount again
                """)
        }
    }
}
