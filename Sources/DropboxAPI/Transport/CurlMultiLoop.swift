import CCurlShim
import Foundation
import Synchronization

/// Small transfers on one thread: curl's multi interface waits on all their connections at
/// once. A request then costs no blocking thread of its own to wake and come back from, and
/// answers that arrive together are taken in one wake-up. The fsync of 1,000 small files (32
/// uploads at once, each of which held a thread in `curl_easy_perform`) took 11-15 ticks of the
/// daemon's CPU on the loop against 13-17 before.
///
/// Only transfers whose callbacks never wait for a disk come here (`CurlTransport.runsOnLoop`):
/// a callback holds up every other transfer on the loop.
final class CurlMultiLoop: @unchecked Sendable {
    static let shared = CurlMultiLoop()

    private struct Job: @unchecked Sendable {  // its handle belongs to the job alone
        let transfer: Transfer
        let handle: UnsafeMutableRawPointer
        let userAgent: String
        let finish: @Sendable (Result<HTTPResponse, any Error>) -> Void
    }

    private struct Running {
        let job: Job
        let headers: UnsafeMutablePointer<curl_slist>?
    }

    private let multi: UnsafeMutableRawPointer
    /// Jobs handed over, not yet added to the multi handle.
    private let arrivals = Mutex<[Job]>([])
    /// Easy handles free for the next job (their connections live in the multi handle).
    private let idleHandles = Mutex<[HandleBox]>([])
    /// Loop thread only.
    private var running: [UnsafeMutableRawPointer: Running] = [:]

    /// The idle connections the multi handle keeps. curl's default is four per easy handle
    /// in it at the moment, and a transfer's handle leaves as it ends: between bursts the
    /// cache shrank and closed connections a burst then opened again (74 connections opened
    /// in an fsync of 1,000 small files, each a connect, an accept and a channel set up by
    /// the server).
    static let keptConnections = 64

    private init() {
        multi = curl_multi_init()
        ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, Self.keptConnections)
        let thread = Thread { [self] in loop() }
        thread.name = "dropboxfs-transfers"
        thread.start()
    }

    /// Starts `transfer`; `finish` is called on the loop thread with its outcome.
    func start(_ transfer: Transfer, userAgent: String, finish: @escaping @Sendable (Result<HTTPResponse, any Error>) -> Void) {
        let handle = idleHandles.withLock { $0.popLast() }?.handle ?? curl_easy_init()!
        arrivals.withLock { $0.append(Job(transfer: transfer, handle: handle, userAgent: userAgent, finish: finish)) }
        if waiting.load(ordering: .sequentiallyConsistent) { curl_multi_wakeup(multi) }
    }

    /// The loop is in (or about to enter) `curl_multi_poll`. A job handed over while it works
    /// is taken at its next turn without a wake-up: a wake-up per job was a send on a socket
    /// pair and a turn of the loop each, 1,000 of them in an fsync of 1,000 small files.
    /// The loop sets this, then looks for arrivals once more before it waits; `start` adds its
    /// job, then reads this: one of the two always sees the other.
    private let waiting = Atomic<Bool>(false)

    /// A transfer was cancelled: the loop looks at once, not at curl's next progress call.
    func wake() { curl_multi_wakeup(multi) }

    private func loop() {
        var stillRunning: Int32 = 0
        while true {
            let arrived = arrivals.withLock { jobs -> [Job] in
                let taken = jobs
                jobs = []
                return taken
            }
            for job in arrived {
                let headers = job.transfer.prepare(job.handle, userAgent: job.userAgent)
                running[job.handle] = Running(job: job, headers: headers)
                curl_multi_add_handle(multi, job.handle)
            }
            for (handle, transfer) in running where transfer.job.transfer.isCancelled {
                end(handle, with: .failure(CancellationError()))
            }
            curl_multi_perform(multi, &stillRunning)
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                      let transfer = running[handle] else { continue }
                let code = message.pointee.data.result
                end(handle, with: Result { try transfer.job.transfer.outcome(code, handle: handle) })
            }
            // curl shortens the wait to its own next timer (timeouts, stall checks).
            waiting.store(true, ordering: .sequentiallyConsistent)
            if arrivals.withLock({ $0.isEmpty }) { curl_multi_poll(multi, nil, 0, 60_000, nil) }
            waiting.store(false, ordering: .sequentiallyConsistent)
        }
    }

    private func end(_ handle: UnsafeMutableRawPointer, with result: Result<HTTPResponse, any Error>) {
        guard let transfer = running.removeValue(forKey: handle) else { return }
        curl_multi_remove_handle(multi, handle)
        curl_slist_free_all(transfer.headers)
        curl_easy_reset(handle)
        idleHandles.withLock { $0.append(HandleBox(handle: handle)) }
        transfer.job.finish(result)
    }
}
