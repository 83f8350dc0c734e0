import CouchCore
import CouchReplication
import Foundation

/// `GET /_scheduler/jobs?feed=continuous|eventsource`: every job's changes as they happen
/// (added, started, crashed, stopped, completed, failed, removed), each event a job as
/// `_scheduler/jobs` shows it plus its `state`, beginning with the jobs that exist. The
/// connection waits without a thread between events, as change feeds do.
enum SchedulerEventsRoute {
    static func follow(_ context: RouteContext, feed: String) throws -> HTTPResponse {
        let eventSource: Bool
        switch feed {
        case "continuous": eventSource = false
        case "eventsource": eventSource = true
        default: throw CouchError.badRequest("Supported `feed` types: normal, continuous, eventsource")
        }
        let heartbeat = min(try context.nonNegativeIntOption("heartbeat") ?? 60_000, ChangesOptions.longestWait)
        let stream = SchedulerEventStream(scheduler: context.server.scheduler, eventSource: eventSource,
                                          heartbeatMilliseconds: heartbeat)
        let contentType = eventSource ? "text/event-stream" : HTTPResponse.jsonContentType
        return HTTPResponse(status: 200, headers: [("Content-Type", contentType)], body: .stream(stream))
    }
}

final class SchedulerEventStream: ResponseStream, @unchecked Sendable {
    private let scheduler: ReplicationScheduler
    private let eventSource: Bool
    private let heartbeatMilliseconds: Int
    private let lock = NSLock()
    private var pending: [UInt8] = []
    private var token: Int?
    private var wake: (@Sendable () -> Void)?
    private var heartbeat: Task<Void, Never>?
    private var closed = false

    init(scheduler: ReplicationScheduler, eventSource: Bool, heartbeatMilliseconds: Int) {
        self.scheduler = scheduler
        self.eventSource = eventSource
        self.heartbeatMilliseconds = heartbeatMilliseconds
    }

    func start(wake: @escaping @Sendable () -> Void) {
        lock.withLock { self.wake = wake }
        let token = scheduler.follow { [weak self] event in self?.append(event) }
        lock.withLock { self.token = token }
        scheduler.currentEvents.forEach(append)
        if heartbeatMilliseconds > 0 {
            let interval = UInt64(heartbeatMilliseconds) * 1_000_000
            heartbeat = ReplicationTasks.task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: interval)
                    if Task.isCancelled { return }
                    self?.appendBytes(Array((self?.eventSource ?? false ? ":\n\n" : "\n").utf8))
                }
            }
        }
    }

    private func append(_ event: JSONValue) {
        var bytes: [UInt8] = eventSource ? Array("data: ".utf8) : []
        bytes += event.serialized()
        bytes += Array((eventSource ? "\n\n" : "\n").utf8)
        appendBytes(bytes)
    }

    private func appendBytes(_ bytes: [UInt8]) {
        lock.lock()
        guard !closed else {
            lock.unlock()
            return
        }
        pending += bytes
        let wake = self.wake
        lock.unlock()
        wake?()
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamChunk {
        lock.lock()
        defer { lock.unlock() }
        if closed { return .end }
        guard !pending.isEmpty else { return .waiting }
        let count = min(buffer.count, pending.count)
        pending.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: count) }
        pending.removeFirst(count)
        return .data(count)
    }

    func close() {
        lock.lock()
        closed = true
        let token = self.token
        lock.unlock()
        heartbeat?.cancel()
        if let token { scheduler.unfollow(token) }
    }
}
