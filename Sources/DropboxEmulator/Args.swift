/// A route's JSON argument, read field by field. Dropbox refuses unknown fields and wrong
/// types with 400, so every read checks the type and `finish()` rejects whatever was not read.
final class Args {
    let route: String
    private let context: String
    private var fields: [String: JSON]

    init(_ json: JSON, route: String, context: String = "request body") throws {
        self.route = route
        self.context = context
        guard case .object(let members) = json else {
            throw APIFailure.badInput("Error in call to API function \"\(route)\": \(context): expected an object")
        }
        fields = Dictionary(members, uniquingKeysWith: { _, last in last })
    }

    func failure(_ message: String) -> APIFailure {
        .badInput("Error in call to API function \"\(route)\": \(context): \(message)")
    }

    private func take(_ key: String) -> JSON? {
        let value = fields.removeValue(forKey: key)
        return value == .null ? nil : value
    }

    func string(_ key: String) throws -> String {
        guard let value = try optionalString(key) else { throw failure("missing required field '\(key)'") }
        return value
    }

    func optionalString(_ key: String) throws -> String? {
        guard let value = take(key) else { return nil }
        guard let s = value.stringValue else { throw failure("'\(key)': expected a string") }
        return s
    }

    func bool(_ key: String, default fallback: Bool = false) throws -> Bool {
        guard let value = take(key) else { return fallback }
        guard let b = value.boolValue else { throw failure("'\(key)': expected a boolean") }
        return b
    }

    func uint(_ key: String) throws -> Int64? {
        guard let value = take(key) else { return nil }
        guard let i = value.intValue, i >= 0 else { throw failure("'\(key)': expected a non-negative integer") }
        return i
    }

    func object(_ key: String) throws -> Args? {
        guard let value = take(key) else { return nil }
        return try Args(value, route: route, context: "\(context): '\(key)'")
    }

    func requiredObject(_ key: String) throws -> Args {
        guard let nested = try object(key) else { throw failure("missing required field '\(key)'") }
        return nested
    }

    func list(_ key: String) throws -> [JSON] {
        guard let items = try optionalList(key) else { throw failure("missing required field '\(key)'") }
        return items
    }

    func optionalList(_ key: String) throws -> [JSON]? {
        guard let value = take(key) else { return nil }
        guard let items = value.arrayValue else { throw failure("'\(key)': expected a list") }
        return items
    }

    /// A union value: `"tag"` or `{".tag": "tag", …}`; returns the tag and the member's fields.
    func union(_ key: String) throws -> (String, Args)? {
        guard let value = take(key) else { return nil }
        if let tag = value.stringValue { return (tag, try Args(.object([]), route: route, context: context)) }
        let members = try Args(value, route: route, context: "\(context): '\(key)'")
        return (try members.string(".tag"), members)
    }

    /// Accepts and ignores fields that only matter to features the emulator does not model.
    func ignore(_ keys: String...) { for key in keys { fields.removeValue(forKey: key) } }

    func finish() throws {
        if let unknown = fields.keys.sorted().first { throw failure("unknown field '\(unknown)'") }
    }
}
