import Foundation

/// One API route: how its argument travels and whether it needs a user token.
struct RouteSpec: Sendable {
    typealias Handler = @Sendable (RouteCall) async throws -> JSON
    typealias DownloadHandler = @Sendable (RouteCall) async throws -> Download

    enum Style: Sendable {
        /// JSON argument in the body, JSON result in the body.
        case rpc(Handler)
        /// Argument in `Dropbox-API-Arg`, content in the body, JSON result in the body.
        case upload(Handler)
        /// Argument in `Dropbox-API-Arg`, content in the response, result in `Dropbox-API-Result`.
        case download(DownloadHandler)

        var isDownload: Bool { if case .download = self { return true }; return false }
    }

    var style: Style
    var needsAuth = true
}

/// What a download route answers: the result and the open file whose bytes follow (closed
/// by the emulator once sent; nil for empty content).
struct Download {
    var result: JSON
    var fd: Int32?
    var size: Int64
}

/// The state of one API call while its handler runs.
final class RouteCall: @unchecked Sendable {
    let emulator: Emulator
    let route: String
    let token: String?
    let exchange: Exchange
    var argument: JSON = .null

    init(emulator: Emulator, route: String, token: String?, exchange: Exchange) {
        self.emulator = emulator
        self.route = route
        self.token = token
        self.exchange = exchange
    }

    var namespace: Namespace { emulator.namespace }
    var body: RequestBody { exchange.body }

    func args() throws -> Args { try Args(argument, route: route) }

    /// For routes that take no argument: the body must be empty or `null`.
    func requireNoArgument() throws {
        guard argument == .null else {
            throw APIFailure.badInput("Error in call to API function \"\(route)\": request body: expected null, got a value")
        }
    }
}

enum Routes {
    static let table: [String: RouteSpec] = [
        "users/get_current_account": RouteSpec(style: .rpc { try $0.emulator.getCurrentAccount($0) }),
        "users/get_space_usage": RouteSpec(style: .rpc { try $0.emulator.getSpaceUsage($0) }),
        "auth/token/revoke": RouteSpec(style: .rpc { try $0.emulator.revokeToken($0) }),
        "files/get_metadata": RouteSpec(style: .rpc { try $0.emulator.getMetadata($0) }),
        "files/list_folder": RouteSpec(style: .rpc { try $0.emulator.listFolder($0) }),
        "files/list_folder/continue": RouteSpec(style: .rpc { try $0.emulator.listFolderContinue($0) }),
        "files/list_folder/get_latest_cursor": RouteSpec(style: .rpc { try $0.emulator.getLatestCursor($0) }),
        "files/list_folder/longpoll": RouteSpec(style: .rpc { try await $0.emulator.longpoll($0) }, needsAuth: false),
        "files/create_folder_v2": RouteSpec(style: .rpc { try $0.emulator.createFolder($0) }),
        "files/delete_v2": RouteSpec(style: .rpc { try $0.emulator.delete($0) }),
        "files/create_folder_batch": RouteSpec(style: .rpc { try $0.emulator.createFolderBatch($0) }),
        "files/create_folder_batch/check": RouteSpec(style: .rpc { try $0.emulator.checkBatchJob($0) }),
        "files/delete_batch": RouteSpec(style: .rpc { try $0.emulator.deleteBatch($0) }),
        "files/delete_batch/check": RouteSpec(style: .rpc { try $0.emulator.checkBatchJob($0) }),
        "files/move_batch_v2": RouteSpec(style: .rpc { try $0.emulator.moveBatch($0) }),
        "files/move_batch/check_v2": RouteSpec(style: .rpc { try $0.emulator.checkBatchJob($0) }),
        "files/move_v2": RouteSpec(style: .rpc { try $0.emulator.relocate($0, copy: false) }),
        "files/copy_v2": RouteSpec(style: .rpc { try $0.emulator.relocate($0, copy: true) }),
        "files/download": RouteSpec(style: .download { try $0.emulator.download($0) }),
        "files/upload": RouteSpec(style: .upload { try await $0.emulator.upload($0) }),
        "files/upload_session/start": RouteSpec(style: .upload { try await $0.emulator.startSession($0) }),
        "files/upload_session/append_v2": RouteSpec(style: .upload { try await $0.emulator.appendSession($0) }),
        "files/upload_session/finish": RouteSpec(style: .upload { try await $0.emulator.finishSession($0) }),
        "files/upload_session/finish_batch_v2": RouteSpec(style: .rpc { try $0.emulator.finishBatch($0, async: false) }),
        "files/upload_session/finish_batch": RouteSpec(style: .rpc { try $0.emulator.finishBatch($0, async: true) }),
        "files/upload_session/finish_batch/check": RouteSpec(style: .rpc { try $0.emulator.checkBatchJob($0) }),
        "files/list_revisions": RouteSpec(style: .rpc { try $0.emulator.listRevisions($0) }),
        "files/restore": RouteSpec(style: .rpc { try $0.emulator.restore($0) }),
        "files/search_v2": RouteSpec(style: .rpc { try $0.emulator.searchV2($0) }),
        "files/search/continue_v2": RouteSpec(style: .rpc { try $0.emulator.searchContinueV2($0) }),
        "sharing/create_shared_link_with_settings": RouteSpec(style: .rpc { try $0.emulator.createSharedLink($0) }),
        "sharing/list_shared_links": RouteSpec(style: .rpc { try $0.emulator.listSharedLinks($0) }),
        "sharing/revoke_shared_link": RouteSpec(style: .rpc { try $0.emulator.revokeSharedLink($0) }),
    ]
}

/// Turns namespace failures into the route's own error union.
enum RouteErrors {
    /// `member` wraps a `LookupError`: `{".tag": member, member: {...}}`.
    static func lookup<T>(_ member: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let failure as NamespaceFailure {
            throw APIFailure.route(.tagged(member, [(member, lookupJSON(failure))]))
        }
    }

    /// `member` wraps a `WriteError`.
    static func write<T>(_ member: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let failure as NamespaceFailure {
            throw APIFailure.route(.tagged(member, [(member, writeJSON(failure))]))
        }
    }

    static func lookupJSON(_ failure: NamespaceFailure) -> JSON {
        switch failure {
        case .lookup(let lookup): return lookup.json
        case .write(.malformedPath): return LookupFailure.malformedPath.json
        case .write, .folderIntoItself: return LookupFailure.notFound.json
        }
    }

    static func writeJSON(_ failure: NamespaceFailure) -> JSON {
        switch failure {
        case .write(let write): return write.json
        case .lookup(.notFolder): return WriteFailure.conflict("file_ancestor").json
        case .lookup, .folderIntoItself: return WriteFailure.malformedPath.json
        }
    }
}
