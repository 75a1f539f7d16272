import DropboxFS
import Foundation

enum ByteFormat {
    static func string(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }
}

/// A one-line progress bar on stderr when it is a terminal; silent otherwise.
final class ProgressBar: @unchecked Sendable {
    private let lock = NSLock()
    private let label: String
    private let enabled = isatty(STDERR_FILENO) == 1
    private var lastDraw = Date.distantPast
    private let started = Date()

    init(_ label: String) { self.label = label }

    func update(_ done: Int64, of total: Int64) {
        guard enabled else { return }
        lock.withLock {
            guard Date().timeIntervalSince(lastDraw) > 0.1 || done == total else { return }
            lastDraw = Date()
            let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 0
            let width = 30
            let filled = Int(fraction * Double(width))
            let rate = Double(done) / max(0.001, Date().timeIntervalSince(started))
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            let line = "\r\(label) [\(bar)] \(Int(fraction * 100))% \(ByteFormat.string(done)) \(ByteFormat.string(Int64(rate)))/s"
            FuseLog.write(line)
        }
    }

    func finish() {
        guard enabled else { return }
        FuseLog.write("\n")
    }
}
