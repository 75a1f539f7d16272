import Foundation

/// Files the kernel makes up as they are read (`/proc`, `/sys`), read whole.
///
/// Foundation's `String(contentsOfFile:)` returns only the first page of such a file (its
/// size reads as 0): on a machine with many mounts, `/proc/self/mounts` lost its last entries,
/// which are the newest mounts, and `dropboxfs unmount` said "not a dropboxfs mount".
public enum KernelText {
    /// The file's whole content, read until end of file; nil if it cannot be opened or read.
    public static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
            if count == 0 { return String(decoding: bytes, as: UTF8.self) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            bytes += chunk[..<count]
        }
    }
}
