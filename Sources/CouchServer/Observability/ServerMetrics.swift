import CoreMetrics
import CouchCore
import Foundation
import Prometheus

/// What the server counts: requests by method and status, request times, documents read,
/// feeds open. Every figure goes to swift-metrics handlers made by a per-server
/// swift-prometheus factory (so several servers in one process keep apart), which
/// `/_node/_local/_prometheus` prints; the same figures are kept here for `_stats`,
/// since a Prometheus registry is write-only.
final class ServerMetrics: @unchecked Sendable {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    let started = Date()

    private let lock = NSLock()
    private var methods: [String: Int] = [:]
    private var statuses: [Int: Int] = [:]
    private var requests = 0
    private var aborted = 0
    private var reads = 0
    private var feeds = 0
    /// The last request times in milliseconds (a ring), for `_stats`' histogram.
    private var samples: [Double] = []
    private var nextSample = 0
    private static let sampleCount = 1024
    private var counters: [String: CoreMetrics.Counter] = [:]
    // The counters every request touches, found without building their key each time.
    private lazy var requestCounter = counter("couchdb_httpd_requests_total")
    private lazy var readCounter = counter("couchdb_database_reads_total")
    private var methodCounters: [String: CoreMetrics.Counter] = [:]
    private var statusCounters: [Int: CoreMetrics.Counter] = [:]
    private let requestTimer: CoreMetrics.Timer
    private let feedGauge: CoreMetrics.Gauge

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [.milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(50),
                                                   .milliseconds(100), .milliseconds(500), .seconds(1), .seconds(5)]
        self.factory = factory
        requestTimer = CoreMetrics.Timer(label: "couchdb_request_time_seconds", dimensions: [], factory: factory)
        feedGauge = CoreMetrics.Gauge(label: "couchdb_httpd_clients_requesting_changes", dimensions: [], factory: factory)
    }

    private func counter(_ label: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Counter {
        let key = label + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        if let existing = counters[key] { return existing }
        let made = CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
        counters[key] = made
        return made
    }

    func recordRequest(method: String, status: Int, nanoseconds: UInt64) {
        let milliseconds = Double(nanoseconds) / 1_000_000
        let known = Self.methods.contains(method) ? method : "OTHER"
        lock.withLock {
            requests += 1
            methods[known, default: 0] += 1
            statuses[status, default: 0] += 1
            if samples.count < Self.sampleCount { samples.append(milliseconds) } else { samples[nextSample] = milliseconds }
            nextSample = (nextSample + 1) % Self.sampleCount
            requestCounter.increment()
            if let byMethod = methodCounters[known] {
                byMethod.increment()
            } else {
                let made = counter("couchdb_httpd_request_methods", [("method", known)])
                methodCounters[known] = made
                made.increment()
            }
            if let byStatus = statusCounters[status] {
                byStatus.increment()
            } else {
                let made = counter("couchdb_httpd_status_codes", [("code", String(status))])
                statusCounters[status] = made
                made.increment()
            }
        }
        requestTimer.recordNanoseconds(Int64(clamping: nanoseconds))
    }

    /// Requests handled since the start.
    var requestCount: Int { lock.withLock { requests } }

    /// A request whose work stopped because its client hung up (CouchDB's `aborted_requests`).
    func recordAbortedRequest() {
        lock.withLock {
            aborted += 1
            counter("couchdb_httpd_aborted_requests_total").increment()
        }
    }

    func recordRead() {
        lock.withLock {
            reads += 1
            readCounter.increment()
        }
    }

    func feedOpened() { feedGauge.record(lock.withLock { feeds += 1; return feeds }) }
    func feedClosed() { feedGauge.record(lock.withLock { feeds -= 1; return feeds }) }

    struct Snapshot {
        var requests: Int
        var aborted: Int
        var methods: [String: Int]
        var statuses: [Int: Int]
        var reads: Int
        var feeds: Int
        var samples: [Double]
    }

    var snapshot: Snapshot {
        lock.withLock { Snapshot(requests: requests, aborted: aborted, methods: methods, statuses: statuses, reads: reads, feeds: feeds, samples: samples) }
    }

    private var reportedWrites = 0

    /// Sets the figures read at scrape time (gauges, and the documents written since the
    /// last scrape), then writes the registry in Prometheus' text format.
    func prometheusText(gauges: [(name: String, value: Double)], documentWrites: Int) -> String {
        lock.withLock {
            counter("couchdb_database_writes_total").increment(by: max(0, documentWrites - reportedWrites))
            reportedWrites = max(reportedWrites, documentWrites)
        }
        for (name, value) in gauges {
            CoreMetrics.Gauge(label: name, dimensions: [], factory: factory).record(value)
        }
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    static let methods = ["COPY", "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"]
    static let statusCodes = [200, 201, 202, 204, 206, 301, 302, 304, 400, 401, 403, 404, 405, 406, 409, 412, 413, 414,
                              415, 416, 417, 500, 501, 503]
}

/// A response stream counted in `httpd.clients_requesting_changes` while it is open.
final class CountedStream: ResponseStream, @unchecked Sendable {
    private let inner: any ResponseStream
    private let metrics: ServerMetrics
    private let lock = NSLock()
    private var open = false

    init(_ inner: any ResponseStream, metrics: ServerMetrics) {
        self.inner = inner
        self.metrics = metrics
    }

    func start(wake: @escaping @Sendable () -> Void) {
        lock.withLock { open = true }
        metrics.feedOpened()
        inner.start(wake: wake)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamChunk { inner.read(into: buffer) }

    var waitsForEvents: Bool { inner.waitsForEvents }

    func close() {
        inner.close()
        let wasOpen = lock.withLock { () -> Bool in
            defer { open = false }
            return open
        }
        if wasOpen { metrics.feedClosed() }
    }
}
