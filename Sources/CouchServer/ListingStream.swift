import CouchCore
import Foundation

/// The pages of a listing (`_all_docs`, a view, a normal `_changes` feed), in order: called
/// from one thread at a time, though not always the same thread.
protocol ListingPages: AnyObject {
    /// Appends the next page to `page`; answers true once the listing is complete.
    func nextPage(into page: inout [UInt8]) throws -> Bool
}

/// A listing sent a page at a time, so a listing of any size never sits in memory whole. The
/// first page is written on the connection's thread as it asks (a short listing costs no
/// other thread); the next ones are written on a thread of `producers` while the connection
/// sends the pages before them, at most `ahead` pages ahead: a long listing keeps two cores
/// busy, one reading and rendering rows, the other copying and sending them, and a slow client
/// holds two pages (the one it reads and the next). The threads are
/// shared fairly among databases: one database's listings hold at most half of them.
final class ListingStream: ResponseStream, @unchecked Sendable {
    private static let producers = FairQueue(pool: ThreadPool.shared(name: "listing-pages", threads: 16), share: 8)
    private static let ahead = 1

    private let pages: ListingPages
    private let owner: String
    private var output = StreamOutput()     // the connection's thread only
    private let lock = NSLock()
    private var ready: [[UInt8]] = []       // pages written, not yet sent
    private var spare: [[UInt8]] = []       // sent pages' buffers, for the producer to reuse
    private var producing = false
    private var complete = false            // the last page is written (or writing one failed)
    private var closed = false
    private var waiting = false             // the connection waits for `ready` to fill
    private var wake: (@Sendable () -> Void)?
    private var started = false             // the connection's thread only

    /// `owner`: the database listed, whose listings share the producing threads.
    init(_ pages: ListingPages, owner: String) {
        self.pages = pages
        self.owner = owner
    }

    func start(wake: @escaping @Sendable () -> Void) {
        lock.withLock { self.wake = wake }
    }

    func close() {
        lock.withLock {
            closed = true
            wake = nil
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamChunk {
        while true {
            let count = output.copy(into: buffer)
            if count > 0 { return .data(count) }
            switch takeNextPage() {
            case .taken: continue
            case .waiting: return .waiting
            case .end: return .end
            }
        }
    }

    private enum Supply { case taken, waiting, end }

    /// Moves the next page into `output` (writing the first one here and now).
    private func takeNextPage() -> Supply {
        if !started {
            started = true
            var first: [UInt8] = []
            // The status line is gone already: a listing that fails ends where it stands.
            let finished = (try? pages.nextPage(into: &first)) ?? true
            _ = output.replace(with: first)
            lock.withLock {
                complete = finished
                produceIfIdle()
            }
            return .taken
        }
        return lock.withLock {
            guard !ready.isEmpty else {
                if complete { return .end }
                waiting = true
                return .waiting
            }
            var sent = output.replace(with: ready.removeFirst())
            sent.removeAll(keepingCapacity: true)
            spare.append(sent)
            produceIfIdle()
            return .taken
        }
    }

    /// Under `lock`: sets a producer going unless one is, the listing is complete or enough is written.
    private func produceIfIdle() {
        guard !producing, !complete, !closed, ready.count < Self.ahead else { return }
        producing = true
        Self.producers.submit(owner: owner) { self.produce() }
    }

    private func produce() {
        var goesOn = true
        while goesOn {
            var page = lock.withLock { spare.popLast() ?? [] }
            let finished = (try? pages.nextPage(into: &page)) ?? true
            let wakeConnection: (@Sendable () -> Void)?
            (wakeConnection, goesOn) = lock.withLock {
                if !page.isEmpty { ready.append(page) }
                page = []
                complete = finished
                // A waiting connection takes this page at once: the next one is not ahead yet.
                let taken = waiting ? 1 : 0
                let wakes = waiting ? wake : nil
                waiting = false
                producing = !complete && !closed && ready.count - taken < Self.ahead
                // A client slower than the pages holds only what it has not read yet.
                if !producing { spare.removeAll() }
                return (wakes, producing)
            }
            wakeConnection?()
        }
    }
}
