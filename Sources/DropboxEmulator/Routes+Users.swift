/// `users/*` and `auth/token/revoke`: the one emulated account.
extension Emulator {
    static let accountID = "dbid:AAEmulatedDropboxFSAccount000000000"  // 40 characters, as Dropbox's

    func getCurrentAccount(_ call: RouteCall) throws -> JSON {
        try call.requireNoArgument()
        return .object([
            ("account_id", .string(Self.accountID)),
            ("name", .object([
                ("given_name", .string("Emma")),
                ("surname", .string("Ulator")),
                ("familiar_name", .string("Emma")),
                ("display_name", .string("Emma Ulator")),
                ("abbreviated_name", .string("EU")),
            ])),
            ("email", .string("emma@dropboxfs-emulator.invalid")),
            ("email_verified", .bool(true)),
            ("disabled", .bool(false)),
            ("country", .string("US")),
            ("locale", .string("en")),
            ("referral_link", .string("http://127.0.0.1/referrals/emulator")),
            ("is_paired", .bool(false)),
            ("account_type", .tagged(configuration.team ? "business" : "basic")),
            ("root_info", TeamSpace.rootInfo(team: configuration.team)),
        ])
    }

    func getSpaceUsage(_ call: RouteCall) throws -> JSON {
        try call.requireNoArgument()
        return .object([
            ("used", .int(namespace.spaceUsed)),
            ("allocation", .tagged("individual", [("allocated", .int(namespace.quota))])),
        ])
    }

    func revokeToken(_ call: RouteCall) throws -> JSON {
        try call.requireNoArgument()
        if let token = call.token { try namespace.revoke(token) }
        return .null
    }
}
