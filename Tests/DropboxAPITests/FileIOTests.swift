@testable import DropboxAPI
import Foundation
import Testing

@Suite("client: reading files to send")
struct FileIOTests {
    /// A file that shrank since its length was taken (truncated while it uploads) is told as
    /// such: its hashing reads nothing past the end, and said "read failed: Success" (the
    /// errno of an earlier call), which sent whoever read the log after a disk fault.
    @Test func aFileShorterThanItsLengthSaysSo() throws {
        let path = NSTemporaryDirectory() + "/fileio-\(UUID().uuidString)"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 7, count: 10)))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY)
        #expect(fd >= 0)
        defer { close(fd) }
        errno = 0
        #expect { try FileIO.blockDigests(fd, offset: 0, length: 100) } throws: { error in
            "\(error)".contains("the file is shorter")
        }
        #expect(try FileIO.blockDigests(fd, offset: 0, length: 10).count == 32)  // one 4 MiB block's SHA-256
    }
}
