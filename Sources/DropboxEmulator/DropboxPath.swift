/// A Dropbox path as the namespace stores it: `display` keeps the caller's casing, `lower` is
/// the case-folded key. The root is the empty string.
struct DropboxPath: Hashable, Sendable {
    let display: String
    let lower: String

    static let root = DropboxPath(display: "", lower: "")

    init(display: String) {
        self.display = display
        self.lower = Self.fold(display)
    }

    /// Dropbox's case folding, as this emulator models it: each character alone, by its
    /// one-character (Unicode "simple") lowercase mapping. Dropbox does not document its
    /// folding; this model differs from Swift's `lowercased()` (the full mapping) where the
    /// full mapping makes more than one character — U+0130 "İ" folds to a plain "i", not to
    /// "i" + U+0307 — so a client that folds with `lowercased()` is caught disagreeing
    /// (doc/SEMANTICS.md, "which names are the same"). Written apart from the client's
    /// `CaseFolding` on purpose: it models the server, and a test compares the two.
    static func fold(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return text.lowercased() }
        var folded = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            folded.append(scalar.properties.lowercaseMapping.unicodeScalars.first ?? scalar)
        }
        return String(folded)
    }

    private init(display: String, lower: String) {
        self.display = display
        self.lower = lower
    }

    var isRoot: Bool { display.isEmpty }

    var name: String {
        guard let slash = display.lastIndex(of: "/") else { return display }
        return String(display[display.index(after: slash)...])
    }

    var parent: DropboxPath {
        guard let slash = display.lastIndex(of: "/"), slash != display.startIndex else { return .root }
        return DropboxPath(display: String(display[..<slash]))
    }

    /// Every ancestor from the top down, excluding the root and the path itself.
    var ancestors: [DropboxPath] {
        var result: [DropboxPath] = []
        var current = parent
        while !current.isRoot {
            result.append(current)
            current = current.parent
        }
        return result.reversed()
    }

    func appending(_ name: String) -> DropboxPath { DropboxPath(display: display + "/" + name) }

    /// True when `self` lies strictly inside `folder`.
    func isInside(_ folder: DropboxPath) -> Bool {
        folder.isRoot ? !isRoot : lower.hasPrefix(folder.lower + "/")
    }

    /// `self` moved from under `old` to under `new`.
    func rebased(from old: DropboxPath, to new: DropboxPath) -> DropboxPath {
        DropboxPath(display: new.display + String(display.dropFirst(old.display.count)))
    }

    /// Names Dropbox refuses to store (`disallowed_name`): system files it never syncs.
    static let disallowedNames: Set<String> = [
        "desktop.ini", "thumbs.db", ".ds_store", "icon\r", ".dropbox", ".dropbox.attr",
    ]

    func hasDisallowedName(refusing extra: Set<String>) -> Bool {
        let folded = Self.fold(name)
        return DropboxPath.disallowedNames.contains(folded) || extra.contains(folded)
    }
}

/// A path argument as sent: a plain path or an `id:` reference (optionally followed by a
/// relative path), not yet resolved against the namespace.
enum PathArgument {
    /// A plain path, checked for malformed components only when resolved, so that the
    /// failure lands in the route's own error union.
    case path(String)
    case id(String, rest: String)
    /// `rev:…`: the file at that revision (read routes only).
    case rev(String)

    /// Parses and validates syntax. `allowRoot` is for routes whose pattern admits "" (listing).
    /// Shapes the route pattern rejects are bad input (400); components such as "." are a
    /// `malformed_path` route error, as on Dropbox.
    static func parse(_ raw: String, field: String, allowRoot: Bool, allowID: Bool = true, allowRev: Bool = false) throws -> PathArgument {
        if raw.isEmpty {
            guard allowRoot else {
                throw APIFailure.badInput("Error in call: \(field): the root folder is not allowed here")
            }
            return .path("")
        }
        if allowRev, raw.hasPrefix("rev:") {
            let rev = String(raw.dropFirst(4))
            guard rev.count >= 9, rev.allSatisfy(\.isHexDigit) else {
                throw APIFailure.badInput("Error in call: \(field): '\(raw)' is not a valid revision")
            }
            return .rev(rev)
        }
        if raw == "/" {
            throw APIFailure.badInput(
                "Error in call: \(field): Specify the root folder as an empty string rather than as \"/\".")
        }
        if raw.hasPrefix("id:") {
            guard allowID else { throw APIFailure.badInput("Error in call: \(field): 'id:' paths are not allowed here") }
            let body = raw.dropFirst(3)
            guard let slash = body.firstIndex(of: "/") else { return .id(String(body), rest: "") }
            return .id(String(body[..<slash]), rest: String(body[slash...]))
        }
        guard raw.hasPrefix("/") else {
            throw APIFailure.badInput("Error in call: \(field): '\(raw)' did not match pattern '(/(.|[\\r\\n])*)|(id:.*)'")
        }
        return .path(raw)
    }

    /// A path of the form `/a/b`: no empty, "." or ".." components, no trailing slash.
    static func validated(_ raw: String) throws -> DropboxPath {
        let components = raw.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        for component in components where component.isEmpty || component == "." || component == ".." {
            throw NamespaceFailure.lookup(.malformedPath)
        }
        return DropboxPath(display: raw)
    }
}
