import CouchCore
import CouchStore
import Foundation
import Logging

/// A `_changes` response of any feed type, produced as the client reads it. While
/// caught up, a longpoll, continuous or eventsource feed waits without a thread: the
/// listener suspends its connection, and a commit, heartbeat or timeout wakes it.
/// A feed whose filter runs client code (a filter function, a selector) produces its rows
/// on the long-requests queue instead of the listener's thread, which serves many other
/// connections: the connection waits meanwhile, and the rows wake it.
///
/// A normal feed whose rows need no client code is sent as a listing (`stream`): its next
/// batches are written on another thread while the connection sends the one before.
final class ChangesFeed: ResponseStream, ListingPages, @unchecked Sendable {
    private let database: Database
    private let options: ChangesOptions
    /// Where rows are produced when the filter runs client code (nil: on the listener).
    private let offThread: FairQueue?
    /// Set when the client is gone: stops the filter's work.
    private let cancellation = RequestCancellation()
    private let rows: ChangeRowWriter
    private static let batchSize = 500
    private let logger = Logger(label: "couchette.changes")

    // Touched only by `read` (or, for a listing, `nextPage`), called on one thread at a time.
    private var position: Int
    private var emitted = 0
    private var output = StreamOutput()
    private var preludeSent = false
    private var finished = false
    /// A filter function's error: ends the feed (or, before any output, the request).
    private var failure: CouchError?

    // Set by timers and the change notifier, and by the production off the listener.
    private let lock = NSLock()
    private var wake: (@Sendable () -> Void)?
    /// Rows are being produced off the listener: `read` waits for them.
    private var producing = false
    private var heartbeatDue = false
    private var idleSince = DispatchTime.now()
    private var timedOut = false
    private var databaseGone = false
    private var observerToken: Int?
    private var timers: [FeedTimer] = []

    init(database: Database, options: ChangesOptions, offThread: FairQueue? = nil) {
        self.database = database
        self.options = options
        self.offThread = options.filter?.runsClientCode == true ? offThread : nil
        rows = ChangeRowWriter(allLeaves: options.allLeaves, includeDocs: options.includeDocs, conflicts: options.conflicts,
                               attachments: options.attachments, reader: options.reader)
        position = options.sinceNow ? database.updateSequence : options.since
    }

    var contentType: String {
        options.feed == .eventsource ? "text/event-stream" : "application/json"
    }

    /// What the connection reads: the feed itself, or a normal feed's batches as a listing.
    var stream: ResponseStream {
        options.feed == .normal && offThread == nil ? ListingStream(self, owner: database.name.rawValue) : self
    }

    /// A normal feed's next batch, as a listing's page (`produce` writes to `output.bytes`: the
    /// page's buffer is lent to it). What `prepare` wrote is the first page.
    func nextPage(into page: inout [UInt8]) -> Bool {
        if output.bytes.isEmpty && !finished {
            swap(&output.bytes, &page)
            produce()
        }
        swap(&output.bytes, &page)
        return finished
    }

    private var waits: Bool { options.feed != .normal }
    var waitsForEvents: Bool { waits }

    func start(wake: @escaping @Sendable () -> Void) {
        lock.withLock { self.wake = wake }
        guard waits else { return }
        observerToken = database.notifier.observe { [weak self] event in
            if case .databaseDeleted = event { self?.databaseWasDeleted() }
            wake()
        }
        let timer: FeedTimer
        if let heartbeat = options.heartbeat {
            timer = FeedTimer(every: heartbeat) { [weak self] in
                self?.heartbeatIsDue()
                wake()
            }
        } else {
            let timeout = options.timeout
            // timeout=0: end as soon as the feed has caught up.
            if timeout == 0 { lock.withLock { timedOut = true } }
            timer = FeedTimer(every: max(10, timeout / 4)) { [weak self] in
                if self?.checkTimeout(timeout) == true { wake() }
            }
        }
        lock.lock()
        timers.append(timer)
        lock.unlock()
    }

    private func heartbeatIsDue() {
        lock.lock()
        heartbeatDue = true
        lock.unlock()
    }

    private func databaseWasDeleted() {
        lock.lock()
        databaseGone = true
        lock.unlock()
    }

    /// Whether the feed has been idle for `timeout` milliseconds.
    private func checkTimeout(_ timeout: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let idle = (DispatchTime.now().uptimeNanoseconds - idleSince.uptimeNanoseconds) / 1_000_000
        if idle >= UInt64(timeout) { timedOut = true }
        return timedOut
    }

    func close() {
        cancellation.cancel()
        if let token = observerToken { database.notifier.remove(token) }
        lock.lock()
        let cancelled = timers
        timers = []
        lock.unlock()
        cancelled.forEach { $0.cancel() }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamChunk {
        if lock.withLock({ producing }) { return .waiting }
        if output.isDrained {
            output.reset()
            if finished { return .end }
            if let offThread {
                lock.withLock { producing = true }
                offThread.submit(owner: database.name.rawValue) { [self] in
                    RequestCancellation.withCurrent(cancellation) { produce() }
                    let wake = lock.withLock {
                        producing = false
                        return self.wake
                    }
                    wake?()
                }
                return .waiting
            }
            produce()
        }
        guard !output.isDrained else { return finished ? .end : .waiting }
        return .data(output.copy(into: buffer))
    }

    /// Fills `output` with what the feed has to say now; leaves it empty to wait.
    private func produce() {
        lock.lock()
        let (heartbeat, timedOut, gone) = (heartbeatDue, self.timedOut, databaseGone)
        heartbeatDue = false
        lock.unlock()
        switch options.feed {
        case .normal:
            if !preludeSent { beginResults() }
            drain()
        case .longpoll:
            guard emitted == 0 else {
                drain()
                return
            }
            appendAvailable()
            if emitted > 0 || finished { return }
            if reachedLimit || gone || timedOut {
                if !preludeSent { beginResults() }
                endResults()
            } else if heartbeat {
                if !preludeSent { beginResults() }
                output.bytes.append(UInt8(ascii: "\n"))
            }
        case .continuous, .eventsource:
            appendAvailable()
            if !output.bytes.isEmpty { return }
            if reachedLimit || timedOut || gone {
                if options.feed == .continuous {
                    output.bytes.append(contentsOf: #"{"last_seq":\#(UpdateSequence(position).json.serializedString()),"pending":\#(pending())}"#.utf8)
                    output.bytes.append(UInt8(ascii: "\n"))
                }
                finished = true
            } else if heartbeat {
                output.bytes.append(contentsOf: options.feed == .continuous ? "\n".utf8 : "event: heartbeat\ndata: \n\n".utf8)
            }
        }
    }

    /// Appends the next rows of a normal (or answering longpoll) feed, ending it when none are left.
    private func drain() {
        while output.bytes.isEmpty && !finished {
            if !appendBatch() && !finished { endResults() }
        }
    }

    /// For a normal feed: produces its first output now, so that a filter function that
    /// fails at once answers its error with its status instead of a broken stream.
    func prepare() throws(CouchError) {
        guard options.feed == .normal, options.filter != nil else { return }
        if !preludeSent { beginResults() }
        while emitted == 0 && !finished {
            if !appendBatch() && !finished { endResults() }
        }
        if let failure, emitted == 0 { throw failure }
    }

    /// Ends the feed after what was sent with the error on a line of its own.
    private func endWithFailure(_ error: CouchError) {
        // The reason may quote the request (headers, cookies): only the error name is logged.
        if error != .clientGone {
            logger.error("changes feed of \(database.name) stopped by its filter function: \(error.error)")
        }
        output.bytes.append(UInt8(ascii: "\n"))
        output.bytes.append(contentsOf: error.json.serialized())
        output.bytes.append(UInt8(ascii: "\n"))
        finished = true
    }

    private var reachedLimit: Bool { options.limit.map { emitted >= $0 } ?? false }

    private func beginResults() {
        output.bytes.append(contentsOf: "{\"results\":[\n".utf8)
        preludeSent = true
    }

    private func endResults() {
        output.bytes.append(contentsOf: (emitted > 0 ? "\n" : "").utf8)
        output.bytes.append(literal: #"],"#)
        output.bytes.append(literal: "\n")
        output.bytes.append(contentsOf: #""last_seq":\#(UpdateSequence(position).json.serializedString()),"pending":\#(pending())}"#.utf8)
        output.bytes.append(UInt8(ascii: "\n"))
        finished = true
    }

    private func pending() -> Int {
        options.descending ? 0 : ((try? database.pendingChanges(after: position)) ?? 0)
    }

    /// Appends rows until caught up, the limit, or enough output for now; a longpoll
    /// stops after the first batch that has rows.
    private func appendAvailable() {
        while appendBatch() {
            if reachedLimit || (options.feed == .longpoll && emitted > 0) || output.bytes.count > 256 * 1024 { break }
        }
    }

    /// Appends one batch of rows after `position`; false when there were none.
    private func appendBatch() -> Bool {
        guard !reachedLimit else { return false }
        let filter = options.filter
        if filter == nil && !options.descending && options.attachments.mode == .stubs {
            return appendBatchFromStatement()
        }
        let query = ChangesQuery(
            since: options.descending ? options.since : position, limit: options.descending ? nil : Self.batchSize,
            descending: options.descending, includeTree: options.allLeaves || options.conflicts,
            includeBodies: options.includeDocs || (filter?.needsDocument ?? false))
        guard failure == nil, let batch = try? database.changes(query), !batch.isEmpty else { return false }
        if cancellation.isCancelled {
            finished = true
            return false
        }
        // Filters judge what the reader may see of each document (nil: nothing), never more.
        let reader = options.reader
        let shown: [ChangeRow?] = reader.isRestricted ? batch.map { reader.readable($0) } : batch.map { $0 }
        var passes = shown.map { $0 != nil }
        if let filter {
            let visible = shown.indices.filter { passes[$0] }
            do {
                for (index, passed) in zip(visible, try filter.accepts(visible.map { shown[$0]! })) {
                    passes[index] = passed
                }
            } catch {
                failure = error
                endWithFailure(error)
                return false
            }
        }
        if options.descending { position = batch.first?.sequence ?? position }
        for (index, row) in batch.enumerated() {
            if reachedLimit { break }
            if !options.descending { position = row.sequence }
            if !passes[index] { continue }
            if options.descending { position = row.sequence }
            appendRow(row)
        }
        lock.lock()
        idleSince = DispatchTime.now()
        lock.unlock()
        // A descending feed is read in one query.
        return !options.descending
    }

    /// A batch no filter needs whole: rows go from the statement into the output, each body
    /// copied once. (Inline attachments read the attachment store, so they take the row path.)
    private func appendBatchFromStatement() -> Bool {
        let left = options.limit.map { $0 - emitted } ?? Self.batchSize
        let query = ChangesQuery(since: position, limit: min(Self.batchSize, left), descending: false,
                                 includeTree: options.allLeaves || options.conflicts, includeBodies: options.includeDocs)
        guard failure == nil else { return false }
        var count = 0
        do {
            try database.forEachChange(query) { listed in
                position = listed.sequence
                if rows.writesStoredBytes(of: listed) {
                    beginRow()
                    rows.appendStored(listed, to: &output.bytes)
                    endRow(sequence: listed.sequence)
                } else {
                    appendRow(try listed.change(), body: options.includeDocs ? listed.body : nil)
                }
                count += 1
            }
        } catch {
            return false
        }
        guard count > 0 else { return false }
        lock.lock()
        idleSince = DispatchTime.now()
        lock.unlock()
        return true
    }

    private func appendRow(_ row: ChangeRow, body: UnsafeRawBufferPointer? = nil) {
        beginRow()
        // Written straight into the output: no buffer per row.
        let start = output.bytes.count
        do {
            try rows.append(row, body: body, to: &output.bytes)
        } catch {
            // A row that cannot be written as asked (attachment bodies that cannot be had are
            // already sent as stubs, see DocumentJSON.renderListed): it goes out with stubs.
            logger.error("cannot render the change of \(row.id): \(error)")
            output.bytes.removeSubrange(start...)
            try? ChangeRowWriter(allLeaves: options.allLeaves, includeDocs: options.includeDocs,
                                 conflicts: options.conflicts, attachments: AttachmentRenderOptions(), reader: options.reader)
                .append(row, body: body, to: &output.bytes)
        }
        endRow(sequence: row.sequence)
    }

    /// What goes before a row in the feed's format.
    private func beginRow() {
        switch options.feed {
        case .normal, .longpoll:
            if !preludeSent { beginResults() }
            if emitted > 0 { output.bytes.append(literal: ",\n") }
        case .continuous:
            break
        case .eventsource:
            output.bytes.append(literal: "data: ")
        }
    }

    /// What goes after a row in the feed's format; counts the row.
    private func endRow(sequence: Int) {
        switch options.feed {
        case .normal, .longpoll:
            break
        case .continuous:
            output.bytes.append(UInt8(ascii: "\n"))
        case .eventsource:
            output.bytes.append(contentsOf: "\nid: \(UpdateSequence(sequence))\n\n".utf8)
        }
        emitted += 1
    }
}
