import CouchCore
import CouchStore
import Foundation

/// `GET /_db_updates` in every feed type, written as CouchDB's `global_changes_httpd`
/// writes it. Waiting feeds suspend their connection like `_changes` feeds do: the log's
/// notifier, a heartbeat or the timeout wakes them, no thread waits.
final class DatabaseUpdatesFeed: ResponseStream, @unchecked Sendable {
    struct Options: Sendable {
        var feed = ChangesOptions.Feed.normal
        var since = 0
        var sinceNow = false
        var limit: Int?
        var descending = false
        var heartbeat: Int?
        var timeout = 60_000

        init(_ context: RouteContext) throws(CouchError) {
            let request = context.request
            if let raw = request.queryValue("feed") {
                guard let parsed = ChangesOptions.Feed(rawValue: raw) else {
                    throw CouchError.badRequest("Supported `feed` types: normal, continuous, longpoll, eventsource")
                }
                feed = parsed
            }
            if let raw = request.queryValue("since") {
                if raw == "now" { sinceNow = true } else { since = try ChangesOptions.sequence(from: raw) }
            }
            descending = request.queryValue("descending") == "true"
            limit = try Self.nonNegative(request.queryValue("limit"))
            switch request.queryValue("heartbeat") {
            case nil, "false": heartbeat = nil
            case "true": heartbeat = ChangesOptions.defaultHeartbeat
            case let raw: heartbeat = max(10, try Self.nonNegative(raw) ?? 0)
            }
            if let value = try Self.nonNegative(request.queryValue("timeout")) { timeout = value }
        }

        /// CouchDB's `to_non_neg_int`: anything else is `bad_request`/`invalid_integer`,
        /// and values are clamped below timer overflow.
        private static func nonNegative(_ raw: String?) throws(CouchError) -> Int? {
            guard let raw else { return nil }
            guard let value = Int(raw), value >= 0 else { throw CouchError.badRequest("invalid_integer") }
            return min(value, ChangesOptions.longestWait)
        }
    }

    private let log: DatabaseUpdateLog
    private let options: Options
    private static let batchSize = 500

    // Touched only by `read`, which the listener calls on one thread at a time.
    private var position: Int
    private var emitted = 0
    private var output = StreamOutput()
    private var preludeSent = false
    private var finished = false

    // Set by timers and the log's notifier.
    private let lock = NSLock()
    private var heartbeatDue = false
    private var idleSince = DispatchTime.now()
    private var timedOut = false
    private var observerToken: Int?
    private var timer: FeedTimer?

    init(log: DatabaseUpdateLog, options: Options) {
        self.log = log
        self.options = options
        position = options.sinceNow ? log.lastSequence : options.since
    }

    var contentType: String { options.feed == .eventsource ? "text/event-stream" : "application/json" }

    func start(wake: @escaping @Sendable () -> Void) {
        guard options.feed != .normal else { return }
        observerToken = log.notifier.observe { _ in wake() }
        let timer: FeedTimer
        if let heartbeat = options.heartbeat {
            timer = FeedTimer(every: heartbeat) { [weak self] in
                self?.setFlag { $0.heartbeatDue = true }
                wake()
            }
        } else {
            let timeout = options.timeout
            if timeout == 0 { setFlag { $0.timedOut = true } }
            timer = FeedTimer(every: max(10, timeout / 4)) { [weak self] in
                if self?.checkTimeout(timeout) == true { wake() }
            }
        }
        lock.withLock { self.timer = timer }
    }

    private func setFlag(_ change: (DatabaseUpdatesFeed) -> Void) {
        lock.lock()
        change(self)
        lock.unlock()
    }

    private func checkTimeout(_ timeout: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let idle = (DispatchTime.now().uptimeNanoseconds - idleSince.uptimeNanoseconds) / 1_000_000
        if idle >= UInt64(timeout) { timedOut = true }
        return timedOut
    }

    func close() {
        if let token = observerToken { log.notifier.remove(token) }
        let cancelled = lock.withLock { () -> FeedTimer? in
            defer { timer = nil }
            return timer
        }
        cancelled?.cancel()
    }

    var waitsForEvents: Bool { options.feed != .normal }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamChunk {
        if output.isDrained {
            output.reset()
            if finished { return .end }
            produce()
        }
        guard !output.isDrained else { return finished ? .end : .waiting }
        return .data(output.copy(into: buffer))
    }

    private var reachedLimit: Bool { options.limit.map { emitted >= $0 } ?? false }

    /// Fills `output` with what the feed has to say now; leaves it empty to wait.
    private func produce() {
        let (heartbeat, timedOut) = lock.withLock { () -> (Bool, Bool) in
            defer { heartbeatDue = false }
            return (heartbeatDue, self.timedOut)
        }
        switch options.feed {
        case .normal:
            while appendBatch() {}
            endResults()
        case .longpoll:
            while appendBatch() {}
            if emitted > 0 || reachedLimit || timedOut {
                endResults()
            } else if heartbeat {
                beginResults()
                output.bytes.append(UInt8(ascii: "\n"))
            }
        case .continuous, .eventsource:
            while appendBatch() { if output.bytes.count > 256 * 1024 { return } }
            if !output.bytes.isEmpty { return }
            if reachedLimit || timedOut {
                if options.feed == .continuous {
                    output.bytes.append(contentsOf: #"{"last_seq":\#(UpdateSequence(position).json.serializedString())}"#.utf8)
                    output.bytes.append(UInt8(ascii: "\n"))
                }
                finished = true
            } else if heartbeat {
                output.bytes.append(contentsOf: options.feed == .continuous ? "\n".utf8 : "event: heartbeat\ndata: \n\n".utf8)
            }
        }
    }

    private func beginResults() {
        guard !preludeSent else { return }
        output.bytes.append(contentsOf: "{\"results\":[\n".utf8)
        preludeSent = true
    }

    private func endResults() {
        beginResults()
        output.bytes.append(contentsOf: "\n],\n\"last_seq\":\(UpdateSequence(position).json.serializedString())}\n".utf8)
        finished = true
    }

    /// Appends one batch of events after `position`; false when there were none.
    private func appendBatch() -> Bool {
        guard !reachedLimit else { return false }
        let batch = log.events(since: position, limit: options.descending ? Int.max : Self.batchSize,
                               descending: options.descending)
        guard !batch.isEmpty else { return false }
        for event in batch {
            if reachedLimit { break }
            position = event.sequence
            append(event)
        }
        lock.withLock { idleSince = DispatchTime.now() }
        // A descending feed is read in one query.
        return !options.descending
    }

    private func append(_ event: DatabaseUpdateLog.Event) {
        let sequence = UpdateSequence(event.sequence).json
        let row: JSONValue = ["db_name": JSONValue(event.database), "type": JSONValue(event.type.rawValue), "seq": sequence]
        switch options.feed {
        case .normal, .longpoll:
            beginResults()
            if emitted > 0 { output.bytes.append(contentsOf: ",\r\n".utf8) }
            output.bytes.append(contentsOf: row.serialized())
        case .continuous:
            output.bytes.append(contentsOf: row.serialized())
            output.bytes.append(UInt8(ascii: "\n"))
        case .eventsource:
            output.bytes.append(contentsOf: "data: ".utf8)
            output.bytes.append(contentsOf: row.serialized())
            output.bytes.append(contentsOf: "\nid: ".utf8)
            output.bytes.append(contentsOf: sequence.serialized())
            output.bytes.append(contentsOf: "\n\n".utf8)
        }
        emitted += 1
    }
}
