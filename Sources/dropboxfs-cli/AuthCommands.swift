import ArgumentParser
import DropboxAPI
import DropboxFS
import Foundation

struct AuthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth",
        abstract: "Sign in to Dropbox accounts and manage the saved ones.",
        subcommands: [Login.self, AddToken.self, List.self, Logout.self]
    )

    struct Login: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign in with OAuth 2 (PKCE): open the printed URL, approve, paste the code.")

        @Option(help: "Name to save the account under.")
        var account = "default"

        @Option(help: "Your Dropbox app's key (App Console).")
        var appKey: String = ProcessInfo.processInfo.environment["DROPBOXFS_APP_KEY"] ?? "dropboxfs"

        @Option(help: "API base URL (default: Dropbox).")
        var apiURL: String?

        func run() async throws {
            try await reportingErrors("auth login") {
                let endpoints = try Endpoints.fromEnvironment(apiURL)
                let oauth = OAuthClient(endpoints: endpoints, transport: CurlTransport(userAgent: DropboxClient.userAgent))
                let flow = oauth.startPKCE(appKey: appKey)
                print("1. Open this URL in a browser and approve dropboxfs:\n   \(flow.authorizeURL)")
                print("2. Paste the code Dropbox shows you: ", terminator: "")
                guard let code = readLine(), !code.trimmingCharacters(in: .whitespaces).isEmpty else {
                    throw ClientError.local("no code entered")
                }
                let grant = try await oauth.finish(flow, code: code)
                var saved = AccountStore.Account(apiURL: apiURL, accessToken: grant.accessToken, refreshToken: grant.refreshToken,
                                                 appKey: appKey, expiresAt: grant.expiresIn.map { Date().addingTimeInterval(TimeInterval($0)) })
                let client = DropboxClient(endpoints: endpoints, tokens: StaticAccessToken(grant.accessToken))
                saved.email = try await client.rpc(Routes.getCurrentAccount, NoArgument()).email
                try AccountStore().save(account, saved)
                print("Signed in as \(saved.email ?? "?"); saved as account '\(account)'.")
            }
        }
    }

    struct AddToken: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-token",
            abstract: "Save an account from a token (for scripts): an access token, or a refresh token with its app key.")

        @Option(help: "Name to save the account under.")
        var account: String

        @Option(help: "A long-lived access token (App Console), or - to read it from standard input (keeps it out of ps and shell history).")
        var accessToken: String?

        @Option(help: "A refresh token (needs --app-key), or - to read it from standard input.")
        var refreshToken: String?

        @Option(help: "The app key the refresh token belongs to.")
        var appKey: String?

        @Option(help: "The app secret, if the app has one and PKCE was not used.")
        var appSecret: String?

        @Option(help: "API base URL (default: Dropbox).")
        var apiURL: String?

        @Option(help: "For a team-wide token (a team admin's, with member file access): the member to act for (dbmid:…), sent as Dropbox-API-Select-User.")
        var member: String?

        func validate() throws {
            if (accessToken == nil) == (refreshToken == nil) {
                throw ValidationError("give exactly one of --access-token or --refresh-token")
            }
            if refreshToken != nil && appKey == nil { throw ValidationError("--refresh-token needs --app-key") }
        }

        func run() async throws {
            try await reportingErrors("auth add-token") {
                func token(_ given: String?) throws -> String? {
                    guard let given else { return nil }
                    return try AccountStore.cleanToken(given == "-" ? (readLine() ?? "") : given)
                }
                let accessToken = try token(self.accessToken)
                let refreshToken = try token(self.refreshToken)
                let endpoints = try Endpoints.fromEnvironment(apiURL)
                var saved = AccountStore.Account(apiURL: apiURL, accessToken: accessToken, refreshToken: refreshToken,
                                                 appKey: appKey, appSecret: appSecret, member: member)
                let transport = CurlTransport(userAgent: DropboxClient.userAgent)
                let tokens: any AccessTokenProvider = refreshToken.map {
                    RefreshingAccessToken(state: .init(accessToken: nil, expiresAt: nil, refreshToken: $0, appKey: appKey!, appSecret: appSecret),
                                          oauth: OAuthClient(endpoints: endpoints, transport: transport))
                } ?? StaticAccessToken(accessToken!)
                // Check the token before saving it.
                let client = DropboxClient(endpoints: endpoints, tokens: tokens, transport: transport, selectUser: member)
                do {
                    saved.email = try await client.rpc(Routes.getCurrentAccount, NoArgument()).email
                } catch let error as CallError<NoRouteError> {
                    // Dropbox's long answer to a team-wide token that names no member.
                    guard member == nil, case .badInput(let message, _) = error, message.contains("Dropbox-API-Select-User") else { throw error }
                    throw ClientError.local("this is a team-wide token: give --member dbmid:… (the team member whose files to use)")
                }
                try AccountStore().save(account, saved)
                print("Saved account '\(account)' (\(saved.email ?? "?")).")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List saved accounts (never their tokens).")

        func run() async throws {
            try await reportingErrors("auth list") {
                let (defaultAccount, accounts) = try AccountStore().list()
                if accounts.isEmpty { print("No accounts. Sign in with 'dropboxfs auth login'."); return }
                for name in accounts.keys.sorted() {
                    let account = accounts[name]!
                    let marker = name == defaultAccount ? "*" : " "
                    print("\(marker) \(name)\t\(account.email ?? "-")\t\(account.kind)\t\(account.apiURL ?? "dropbox")")
                }
            }
        }
    }

    struct Logout: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke an account's token and forget it.")

        @Option(help: "Account to sign out (default: the default account).")
        var account: String?

        func run() async throws {
            try await reportingErrors("auth logout") {
                let store = AccountStore()
                let (name, _) = try store.account(account)
                do {
                    _ = try await store.client(account: name, apiURL: nil, savedOnly: true).rpc(Routes.revokeToken, NoArgument())
                } catch {
                    FuseLog.write("dropboxfs: warning: could not revoke the token (\(describe(error))); forgetting it anyway\n")
                }
                try store.remove(name)
                print("Signed out of '\(name)'.")
            }
        }
    }
}

struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "account", abstract: "Show who is signed in and the space used.")

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await reportingErrors("account") {
            let client = try connection.client()
            async let who = client.rpc(Routes.getCurrentAccount, NoArgument())
            async let space = client.rpc(Routes.getSpaceUsage, NoArgument())
            let (account, usage) = try await (who, space)
            print("\(account.name.displayName) <\(account.email)>")
            let allocated = usage.allocation.allocated.map { ByteFormat.string($0) } ?? "?"
            print("Space: \(ByteFormat.string(usage.used)) used of \(allocated)")
        }
    }
}
