import CFuseShim
import Foundation
import Testing

/// The reading and answering functions the FUSE session runs through (`CFuseShim/setid.c`),
/// fed kernel messages through pipes: the INIT answer takes the clearing of set-ID bits
/// from the kernel only if the kernel offered it, and each request's mark is seen by the
/// operation that follows on the thread. (The mount's behaviour: `ModeTests`.)
@Suite("set-ID clearing taken from the kernel", .serialized)
struct SetIDClearingTests {
    static let initOpcode: UInt32 = 26, writeOpcode: UInt32 = 16, setattrOpcode: UInt32 = 4, openOpcode: UInt32 = 14
    static let killprivV2: UInt32 = 1 << 28  // FUSE_HANDLE_KILLPRIV_V2, in fuse_init_in/out.flags
    static let writeKillsSetID: UInt32 = 1 << 2  // FUSE_WRITE_KILL_SUIDGID
    static let setattrKillsSetID: UInt32 = 1 << 11  // FATTR_KILL_SUIDGID
    static let openKillsSetID: UInt32 = 1 << 0  // FUSE_OPEN_KILL_SUIDGID

    /// A request as the kernel writes it: fuse_in_header (40 bytes), then the body.
    static func request(_ opcode: UInt32, unique: UInt64, body: [UInt8]) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 40) + body
        put(UInt32(bytes.count), at: 0, in: &bytes)
        put(opcode, at: 4, in: &bytes)
        put(unique, at: 8, in: &bytes)
        return bytes
    }

    static func put<T: FixedWidthInteger>(_ value: T, at offset: Int, in bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { for (i, byte) in $0.enumerated() { bytes[offset + i] = byte } }
    }

    static func word(at offset: Int, in bytes: [UInt8]) -> UInt32 {
        bytes[offset..<offset + 4].enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * $1.offset) }
    }

    /// A body of `size` zero bytes with one 32-bit field set.
    static func body(size: Int, field offset: Int, _ value: UInt32) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        put(value, at: offset, in: &bytes)
        return bytes
    }

    /// Passes `message` through `cfuse_setid_read`; returns what it read.
    static func read(_ message: [UInt8]) throws -> Int {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        try #require(write(ends[1], message, message.count) == message.count)
        var buffer = [UInt8](repeating: 0, count: 4096)
        return cfuse_setid_read(ends[0], &buffer, buffer.count, nil)
    }

    /// Passes an INIT answer (fuse_out_header, then a fuse_init_out of 64 bytes whose flags
    /// are `flags`) through `cfuse_setid_writev`; returns the flags that came out.
    static func answerInit(unique: UInt64, flags: UInt32) throws -> UInt32 {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        var header = [UInt8](repeating: 0, count: 16)
        var initOut = body(size: 64, field: 12, flags)
        put(UInt32(16 + 64), at: 0, in: &header)
        put(unique, at: 8, in: &header)
        let written = header.withUnsafeMutableBytes { head in
            initOut.withUnsafeMutableBytes { out in
                var parts = [iovec(iov_base: head.baseAddress, iov_len: 16), iovec(iov_base: out.baseAddress, iov_len: 64)]
                return cfuse_setid_writev(ends[1], &parts, 2, nil)
            }
        }
        try #require(written == 80)
        var back = [UInt8](repeating: 0, count: 80)
        try #require(Glibc.read(ends[0], &back, 80) == 80)
        return word(at: 16 + 12, in: back)
    }

    @Test func theInitAnswerTakesTheClearingOnlyWhenTheKernelOffersIt() throws {
        // Not offered: the answer goes out as libfuse made it.
        _ = try Self.read(Self.request(Self.initOpcode, unique: 1, body: Self.body(size: 64, field: 12, 1 << 3)))
        #expect(try Self.answerInit(unique: 1, flags: 1 << 3) == 1 << 3)
        // Offered: added to that answer, and to no other message.
        _ = try Self.read(Self.request(Self.initOpcode, unique: 7, body: Self.body(size: 64, field: 12, Self.killprivV2 | 1)))
        #expect(try Self.answerInit(unique: 6, flags: 1) == 1)
        #expect(try Self.answerInit(unique: 7, flags: 1) == 1 | Self.killprivV2)
        #expect(cfuse_setid_clearing_taken() == 1)
        #expect(try Self.answerInit(unique: 7, flags: 1) == 1)
    }

    @Test func eachRequestsMarkIsSeenByTheOperationAfterIt() throws {
        let marked: [(UInt32, [UInt8])] = [
            (Self.writeOpcode, Self.body(size: 40, field: 20, Self.writeKillsSetID)),  // fuse_write_in.write_flags
            (Self.setattrOpcode, Self.body(size: 88, field: 0, Self.setattrKillsSetID | 1)),  // fuse_setattr_in.valid
            (Self.openOpcode, Self.body(size: 8, field: 4, Self.openKillsSetID)),  // fuse_open_in.open_flags
        ]
        for (opcode, body) in marked {
            _ = try Self.read(Self.request(opcode, unique: 9, body: body))
            #expect(cfuse_request_clears_setid() == 1, "opcode \(opcode)")
            // The next request, unmarked, is not taken for it.
            _ = try Self.read(Self.request(opcode, unique: 10, body: [UInt8](repeating: 0, count: body.count)))
            #expect(cfuse_request_clears_setid() == 0, "opcode \(opcode)")
        }
        // A write's other flags are not the mark; a truncated body is no mark.
        _ = try Self.read(Self.request(Self.writeOpcode, unique: 11, body: Self.body(size: 40, field: 20, 1 << 0 | 1 << 1)))
        #expect(cfuse_request_clears_setid() == 0)
        _ = try Self.read(Self.request(Self.writeOpcode, unique: 12, body: [UInt8](repeating: 0xff, count: 20)))
        #expect(cfuse_request_clears_setid() == 0)
    }
}
