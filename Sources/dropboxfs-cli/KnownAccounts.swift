import DropboxAPI
import Foundation

/// Which Dropbox account a mount's credentials belong to, remembered from the last mount
/// that could ask (`users/get_current_account`), so a mount started while Dropbox is out of
/// reach finds that account's cache. Kept in `known-accounts.json` in the cache directory
/// (0600); keyed by the server and the credentials' name (a saved account's) or a
/// fingerprint (a token from the environment: SHA-256 based, never the token).
struct KnownAccounts {
    struct Known: Codable, Equatable {
        var accountID: String
        var email: String
        /// The account's namespaces (absent in files written before team spaces were known):
        /// a mount started offline picks the same root, and so the same cache.
        var rootInfo: RootInfo?
    }

    let file: String

    init(cacheBase: String) { file = cacheBase + "/known-accounts.json" }

    /// The key for the credentials `AccountStore.client` would use.
    static func key(api: String, accountName: String?) -> String {
        api + " " + AccountStore().credentialsName(account: accountName)
    }

    func lookup(_ key: String) -> Known? {
        guard let data = FileManager.default.contents(atPath: file) else { return nil }
        return (try? JSONDecoder().decode([String: Known].self, from: data))?[key]
    }

    func record(_ key: String, _ known: Known) throws {
        var all: [String: Known] = [:]
        if let data = FileManager.default.contents(atPath: file) {
            all = (try? JSONDecoder().decode([String: Known].self, from: data)) ?? [:]
        }
        guard all[key] != known else { return }
        all[key] = known
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let temporary = file + ".\(getpid()).tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: try encoder.encode(all), attributes: [.posixPermissions: 0o600]),
              rename(temporary, file) == 0 else {
            unlink(temporary)
            throw ClientError.local("cannot write \(file)")
        }
    }
}
