import Foundation

/// `sharing/create_shared_link_with_settings`, `sharing/list_shared_links` and
/// `sharing/revoke_shared_link`.
extension Emulator {
    func createSharedLink(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let raw = try args.string("path")
        var expires: Int64?
        if let settings = try args.object("settings") {
            if let text = try settings.optionalString("expires") {
                guard let time = Timestamp.parse(text) else { throw settings.failure("'expires': not a timestamp") }
                expires = time
            }
            settings.ignore("require_password", "link_password", "audience", "access", "requested_visibility", "allow_download")
            try settings.finish()
        }
        try args.finish()
        let argument = try PathArgument.parse(raw, field: "path", allowRoot: false)
        do {
            let path = try RouteErrors.lookup("path") { try namespace.resolve(argument) }
            return try RouteErrors.lookup("path") { try namespace.createSharedLink(path, expires: expires) }.metadata()
        } catch SharedLinkFailure.alreadyExists(let link) {
            throw APIFailure.route(.tagged("shared_link_already_exists", [
                ("shared_link_already_exists", .tagged("metadata", [("metadata", link.metadata())])),
            ]))
        } catch SharedLinkFailure.expiryInThePast {
            throw APIFailure.route(.tagged("settings_error", [("settings_error", .tagged("invalid_settings"))]))
        }
    }

    func listSharedLinks(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let raw = try args.optionalString("path")
        let cursor = try args.optionalString("cursor")
        let directOnly = try args.bool("direct_only")
        try args.finish()
        // Every link fits on one page here: a cursor can only be one we never hand out.
        if cursor != nil { throw APIFailure.route(.tagged("reset")) }
        let links = try RouteErrors.lookup("path") { () -> [SharedLink] in
            guard let raw, !raw.isEmpty else { return try namespace.sharedLinks(of: nil, directOnly: directOnly) }
            let argument = try PathArgument.parse(raw, field: "path", allowRoot: false)
            return try namespace.sharedLinks(of: try namespace.resolve(argument), directOnly: directOnly)
        }
        return .object([("links", .array(links.map { $0.metadata() })), ("has_more", .bool(false))])
    }

    func revokeSharedLink(_ call: RouteCall) throws -> JSON {
        let args = try call.args()
        let url = try args.string("url")
        try args.finish()
        guard url.hasPrefix("https://") || url.hasPrefix("http://") else { throw APIFailure.route(.tagged("shared_link_malformed")) }
        do {
            try namespace.revokeSharedLink(url)
        } catch SharedLinkFailure.notFound {
            throw APIFailure.route(.tagged("shared_link_not_found"))
        }
        return .null
    }
}
