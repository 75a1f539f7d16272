@testable import DropboxFS
import Foundation
import Synchronization
import Testing
import TestSupport

/// An open for writing while the file's last version is being committed. Found with three
/// `sqlite3` processes inserting into one WAL database on the mount: now and then rows that
/// had been committed (every process exited 0) were gone. One process checkpointed the WAL
/// into the database file (`pwrite`, `fdatasync`); another opened the file `O_RDWR` as that
/// upload finished and read the database as it was before the checkpoint, and the writers
/// after it built on those old pages. The open had read the Dropbox file a new local version
/// starts from before the commit reached the store, and made that version after the one being
/// committed had finished: it started from the revision before the commit.
@Suite("core: an open for writing as the file's commit finishes", .serialized, .timeLimit(.minutes(5)))
struct OpenDuringCommitTests {
    /// The open is held between its read of the base and its look at the versions, while a
    /// descriptor kept open writes new bytes and fsyncs them (neither waits for the open: a
    /// write through a descriptor needs no name). The open must read the committed bytes.
    @Test func anOpenForWritingAsACommitFinishesReadsTheCommittedBytes() async throws {
        try await Scratch.with { scratch in
            let fs = try scratch.filesystem()
            try await fs.watcher.catchUp()
            scratch.startUploader(fs)
            let kernel = CoreKernel(fs: fs)
            let (old, new) = (Array("before the checkpoint".utf8), Array("after the checkpoint, longer".utf8))
            let writer = try await offPool {
                let fd = try kernel.open("/db", O_RDWR | O_CREAT, 0o644).value("create /db")
                _ = try kernel.pwrite(fd, old, at: 0).value("pwrite the old bytes")
                _ = try kernel.fsync(fd).value("fsync the old bytes")
                return fd
            }
            let pause = Pause()
            fs.writeBack.pauseAfterBaseRead.withLock { $0 = { _ in pause.holdFirst() } }
            let opener = Task {
                try await offPool {
                    let fd = try kernel.open("/db", O_RDWR, 0).value("open /db as the commit finishes")
                    defer { _ = kernel.close(fd) }
                    return try kernel.pread(fd, count: 100, at: 0).value("pread /db")
                }
            }
            await pause.reached()
            try await offPool {
                _ = try kernel.pwrite(writer, new, at: 0).value("pwrite the new bytes")
                _ = try kernel.fsync(writer).value("fsync the new bytes")
            }
            pause.release()
            let read = try await opener.value
            _ = try await offPool { try kernel.close(writer).value("close the writer") }
            #expect(read == new, "read \(String(decoding: read, as: UTF8.self))")
        }
    }

    /// Holds the first caller until released; later ones pass.
    private final class Pause: Sendable {
        private let state = Mutex<(calls: Int, released: Bool)>((0, false))

        func holdFirst() {
            let first = state.withLock { state in
                state.calls += 1
                return state.calls == 1
            }
            guard first else { return }
            while !state.withLock({ $0.released }) { usleep(1_000) }
        }

        func reached() async {
            while state.withLock({ $0.calls }) == 0 { try? await Task.sleep(for: .milliseconds(1)) }
        }

        func release() { state.withLock { $0.released = true } }
    }
}
