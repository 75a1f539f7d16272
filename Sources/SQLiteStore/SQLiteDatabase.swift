import CSQLite
import Foundation

/// A minimal SQLite connection: prepared statements cached by SQL text, typed binds and
/// column reads. Not thread-safe by itself: each owner keeps its one connection behind a lock
/// (the emulator's `Namespace`, the filesystem's `MetadataStore` and `BlockCache`).
public final class SQLiteDatabase {
    private var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]

    public struct Failure: Error, CustomStringConvertible {
        public let code: Int32
        public let message: String
        public var description: String { "SQLite error \(code): \(message)" }
    }

    /// `exclusive`: this connection is the file's only user for as long as it is open (no
    /// other process reads it meanwhile, not even the sqlite3 shell): SQLite then keeps its
    /// lock and the WAL index in memory instead of taking two `fcntl` locks on a shared
    /// index per transaction (7 % of the daemon's CPU in `rm -r`).
    public init(path: String, exclusive: Bool = false) throws {
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(handle)
            throw Failure(code: rc, message: "\(path): \(message)")
        }
        sqlite3_busy_timeout(handle, 5000)
        // Before the first access in WAL mode, or SQLite makes the shared index anyway.
        if exclusive { try execute("PRAGMA locking_mode=EXCLUSIVE") }
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=NORMAL")
        try execute("PRAGMA foreign_keys=ON")
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close(handle)
    }

    public func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? "unknown"
            sqlite3_free(error)
            throw Failure(code: rc, message: message)
        }
    }

    /// Runs `body` inside an open transaction as a savepoint: kept if it returns, undone
    /// (and nothing else) if it throws.
    /// (Prepared once, like every statement `run` takes: parsed again each time by `execute`,
    /// the two statements were a tenth of a `finish_batch` of 1,000 files in the emulator.)
    public func savepoint<T>(_ body: () throws -> T) throws -> T {
        try run("SAVEPOINT one_part")
        do {
            let result = try body()
            try run("RELEASE one_part")
            return result
        } catch {
            try? run("ROLLBACK TO one_part")
            try? run("RELEASE one_part")
            throw error
        }
    }

    /// Runs `body` in one transaction: committed if it returns, rolled back if it throws.
    /// (Its statements prepared once, as `savepoint`'s: parsed again by `execute` at each
    /// transaction, they were a tenth of the time a `close` spent recording its upload.)
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try run("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try run("COMMIT")
            return result
        } catch {
            try? run("ROLLBACK")
            throw error
        }
    }

    /// Runs a statement that returns no rows.
    public func run(_ sql: String, _ values: [SQLValue] = []) throws {
        try query(sql, values) { _ in }
    }

    /// Runs a statement and calls `row` for each result row.
    public func query(_ sql: String, _ values: [SQLValue] = [], row: (SQLiteRow) throws -> Void) throws {
        let statement = try prepare(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (i, value) in values.enumerated() {
            let index = Int32(i + 1)
            switch value {
            case .null: sqlite3_bind_null(statement, index)
            case .int(let v): sqlite3_bind_int64(statement, index, v)
            case .text(let s):
                // The string's own bytes with their length where it has them in one piece:
                // passed as a C string, a short one was copied into a new array first.
                let bound = s.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
                    guard let base = bytes.baseAddress, !bytes.isEmpty else { return false }
                    base.withMemoryRebound(to: CChar.self, capacity: bytes.count) { _ = csqlite_bind_text(statement, index, $0, Int32(bytes.count)) }
                    return true
                } ?? false
                if !bound { csqlite_bind_text(statement, index, s, -1) }
            case .blob(let bytes):
                bytes.withUnsafeBytes { _ = csqlite_bind_blob(statement, index, $0.baseAddress, Int32($0.count)) }
            }
        }
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else { throw failure(rc) }
            try row(SQLiteRow(statement: statement))
        }
    }

    /// The first row mapped by `map`, or nil.
    public func first<T>(_ sql: String, _ values: [SQLValue] = [], map: (SQLiteRow) throws -> T) throws -> T? {
        var result: T?
        try query(sql, values) { row in if result == nil { result = try map(row) } }
        return result
    }

    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// Rows inserted, updated or deleted through this connection since it was opened: equal
    /// at two moments, nothing was written between them.
    public var totalChanges: Int64 { sqlite3_total_changes64(handle) }

    /// Steps SQLite's virtual machine has taken in every statement run so far: what a query
    /// read grows with it, so a test can check that a query reads only what it needs,
    /// however much the tables hold.
    public var steps: Int {
        statements.values.reduce(0) { $0 + Int(sqlite3_stmt_status($1, Int32(SQLITE_STMTSTATUS_VM_STEP), 0)) }
    }

    private func prepare(_ sql: String) throws -> OpaquePointer {
        if let cached = statements[sql] { return cached }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw failure(rc) }
        statements[sql] = statement
        return statement
    }

    private func failure(_ rc: Int32) -> Failure {
        Failure(code: rc, message: String(cString: sqlite3_errmsg(handle)))
    }
}

public enum SQLValue {
    case null
    case int(Int64)
    case text(String)
    case blob([UInt8])

    public static func optional(_ s: String?) -> SQLValue { s.map { .text($0) } ?? .null }
}

public struct SQLiteRow {
    let statement: OpaquePointer

    public func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    public func bool(_ column: Int32) -> Bool { int(column) != 0 }
    public func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }

    /// The column's text, its length asked of SQLite (which has it) rather than found by
    /// scanning for the NUL: the scan was 2.5 % of the daemon's time in a `find` over a
    /// listed tree (300,000 entries), which reads every child's name and path.
    public func text(_ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(statement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    public func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }

    public func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let base = sqlite3_column_blob(statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: base, count: count))
    }
}
