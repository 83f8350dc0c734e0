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

    // Every request adds to these without a lock (`AtomicCounters`); `_stats` reads them, and a
    // Prometheus scrape brings the registry's counters up to them.
    private enum Figure: Int, CaseIterable { case requests, aborted, reads, feeds, samplesTaken }
    private let figures = AtomicCounters(count: Figure.allCases.count)
    /// By index in `methods`, then one for any other method.
    private let methodCounts = AtomicCounters(count: methods.count + 1)
    /// By status code minus 100.
    private let statusCounts = AtomicCounters(count: 500)
    /// The last request times in milliseconds (a ring of `Double` bit patterns), for `_stats`' histogram.
    private let samples = AtomicCounters(count: sampleCount)
    private static let sampleCount = 1024  // a power of two: the ring's index is a mask, never negative

    /// Guards what only a scrape touches: the registry's counters and what each was last brought up to.
    private let lock = NSLock()
    private var counters: [String: CoreMetrics.Counter] = [:]
    private var reported: [String: Int] = [:]
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

    func recordRequest(method: String, status: Int, nanoseconds: UInt64) {
        figures.add(at: Figure.requests.rawValue)
        methodCounts.add(at: Self.methods.firstIndex(of: method) ?? Self.methods.count)
        if (100..<600).contains(status) { statusCounts.add(at: status - 100) }
        let milliseconds = Double(nanoseconds) / 1_000_000
        let taken = figures.add(at: Figure.samplesTaken.rawValue)
        samples.store(Int(bitPattern: UInt(milliseconds.bitPattern)), at: taken & (Self.sampleCount - 1))
        requestTimer.recordNanoseconds(Int64(clamping: nanoseconds))
    }

    /// Requests handled since the start.
    var requestCount: Int { figures[Figure.requests.rawValue] }

    /// A request whose work stopped because its client hung up (CouchDB's `aborted_requests`).
    func recordAbortedRequest() { figures.add(at: Figure.aborted.rawValue) }

    func recordRead() { figures.add(at: Figure.reads.rawValue) }

    func feedOpened() { figures.add(at: Figure.feeds.rawValue) }
    func feedClosed() { figures.add(-1, at: Figure.feeds.rawValue) }

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
        let sampled = min(figures[Figure.samplesTaken.rawValue], Self.sampleCount)
        return Snapshot(requests: figures[Figure.requests.rawValue], aborted: figures[Figure.aborted.rawValue],
                        methods: methodTotals, statuses: statusTotals, reads: figures[Figure.reads.rawValue],
                        feeds: figures[Figure.feeds.rawValue],
                        samples: (0..<sampled).map { Double(bitPattern: UInt64(UInt(bitPattern: samples[$0]))) })
    }

    /// Requests by method, "OTHER" for the rest; methods not seen yet are left out.
    private var methodTotals: [String: Int] {
        var totals: [String: Int] = [:]
        for index in 0..<methodCounts.count where methodCounts[index] > 0 {
            totals[index < Self.methods.count ? Self.methods[index] : "OTHER"] = methodCounts[index]
        }
        return totals
    }

    /// Answers by status code; codes not answered yet are left out.
    private var statusTotals: [Int: Int] {
        var totals: [Int: Int] = [:]
        for index in 0..<statusCounts.count where statusCounts[index] > 0 { totals[index + 100] = statusCounts[index] }
        return totals
    }

    /// Sets the figures read at scrape time (gauges, the documents written, the request
    /// counts), then writes the registry in Prometheus' text format.
    func prometheusText(gauges: [(name: String, value: Double)], documentWrites: Int) -> String {
        let taken = snapshot
        lock.withLock {
            bringUp("couchdb_database_writes_total", to: documentWrites)
            bringUp("couchdb_database_reads_total", to: taken.reads)
            bringUp("couchdb_httpd_requests_total", to: taken.requests)
            bringUp("couchdb_httpd_aborted_requests_total", to: taken.aborted)
            for (method, count) in taken.methods { bringUp("couchdb_httpd_request_methods", [("method", method)], to: count) }
            for (code, count) in taken.statuses { bringUp("couchdb_httpd_status_codes", [("code", String(code))], to: count) }
        }
        feedGauge.record(taken.feeds)
        for (name, value) in gauges {
            CoreMetrics.Gauge(label: name, dimensions: [], factory: factory).record(value)
        }
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// Adds to a registry counter what `total` gained since the last scrape (the counter is
    /// made at the first). Called under `lock`.
    private func bringUp(_ label: String, _ dimensions: [(String, String)] = [], to total: Int) {
        let key = label + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        let counter = counters[key] ?? CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
        counters[key] = counter
        let gained = total - reported[key, default: 0]
        if gained > 0 { counter.increment(by: gained) }
        reported[key] = max(total, reported[key, default: 0])
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
