import CouchCore
import CouchStore
import Foundation

/// `/_node/{node}/_stats`, `_system`, `_versions` and `_prometheus`, in CouchDB's shapes,
/// for the figures Couchette has (see `ServerMetrics`).
enum NodeStatisticsRoutes {
    private static func stat(_ value: JSONValue, _ type: String, _ description: String) -> JSONValue {
        ["value": value, "type": JSONValue(type), "desc": JSONValue(description)]
    }

    private static func counter(_ value: Int, _ description: String) -> JSONValue {
        stat(JSONValue(value), "counter", description)
    }

    static func getStats(_ context: RouteContext) throws -> HTTPResponse {
        try ConfigurationRoutes.checkNode(context)
        guard case .node(_, .stats(let path)) = context.endpoint else { throw CouchError.notFound() }
        let server = context.server
        let snapshot = server.metrics.snapshot
        var methods = JSONObject()
        for method in ServerMetrics.methods {
            methods[method] = counter(snapshot.methods[method] ?? 0, "number of HTTP \(method) requests")
        }
        var statuses = JSONObject()
        for code in Set(ServerMetrics.statusCodes).union(snapshot.statuses.keys).sorted() {
            statuses[String(code)] = counter(snapshot.statuses[code] ?? 0, "number of HTTP \(code) responses")
        }
        let jobs = server.scheduler.jobsJSON
        let running = jobs.filter { $0["state"]?.stringValue == "running" }.count
        let pending = jobs.filter { $0["state"]?.stringValue == "pending" }.count
        let crashed = jobs.filter { $0["state"]?.stringValue == "crashing" || $0["state"]?.stringValue == "crashed" }.count
        let stats: JSONValue = [
            "couchdb": [
                "database_reads": counter(snapshot.reads, "number of times a document was read from a database"),
                "database_writes": counter(server.databases.documentWrites, "number of times a database was changed"),
                "open_databases": counter(server.databases.openCount, "number of open databases"),
                "open_os_files": counter(SystemFacts.openFileCount, "number of file descriptors CouchDB has open"),
                "request_time": stat(histogram(snapshot.samples), "histogram",
                                     "length of a request inside CouchDB without MochiWeb"),
                "httpd_request_methods": .object(methods),
                "httpd_status_codes": .object(statuses),
                "httpd": [
                    "aborted_requests": counter(snapshot.aborted, "number of aborted requests"),
                    "requests": counter(snapshot.requests, "number of HTTP requests"),
                    "clients_requesting_changes": counter(snapshot.feeds, "number of clients for continuous _changes"),
                ],
            ],
            "couch_replicator": [
                "jobs": [
                    "running": stat(JSONValue(running), "gauge", "replicator scheduler running jobs"),
                    "pending": stat(JSONValue(pending), "gauge", "replicator scheduler pending jobs"),
                    "crashed": stat(JSONValue(crashed), "gauge", "replicator scheduler crashed jobs"),
                    "total": stat(JSONValue(jobs.count), "gauge", "total number of replicator scheduler jobs"),
                ],
            ],
        ]
        var extracted = stats
        for part in path {
            guard let next = extracted[part] else { return .json(200, .null) }
            extracted = next
        }
        return .json(200, extracted)
    }

    /// CouchDB's histogram statistics of the recent request times, in milliseconds.
    static func histogram(_ samples: [Double]) -> JSONValue {
        let sorted = samples.sorted()
        let count = sorted.count
        guard count > 0 else {
            return ["min": 0, "max": 0, "arithmetic_mean": 0, "geometric_mean": 0, "harmonic_mean": 0, "median": 0,
                    "variance": 0, "standard_deviation": 0, "skewness": 0, "kurtosis": 0,
                    "percentile": [[50, 0], [75, 0], [90, 0], [95, 0], [99, 0], [999, 0]], "histogram": [[0, 0]], "n": 0]
        }
        let n = Double(count)
        let mean = sorted.reduce(0, +) / n
        let variance = sorted.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / n
        let deviation = variance.squareRoot()
        let positive = sorted.map { max($0, 0.001) }
        let geometric = exp(positive.reduce(0) { $0 + log($1) } / n)
        let harmonic = n / positive.reduce(0) { $0 + 1 / $1 }
        let skewness = deviation > 0 ? sorted.reduce(0) { $0 + pow(($1 - mean) / deviation, 3) } / n : 0
        let kurtosis = deviation > 0 ? sorted.reduce(0) { $0 + pow(($1 - mean) / deviation, 4) } / n - 3 : 0
        func percentile(_ p: Double) -> Double { sorted[min(count - 1, Int((p * n).rounded(.down)))] }
        func rounded(_ value: Double) -> JSONValue { JSONValue(floatLiteral: (value * 1000).rounded() / 1000) }
        let width = max((sorted[count - 1] - sorted[0]) / 10, 0.001)
        var bins = [Int](repeating: 0, count: 10)
        for value in sorted { bins[min(9, Int((value - sorted[0]) / width))] += 1 }
        let histogram = bins.enumerated().map { index, bin -> JSONValue in
            [rounded(sorted[0] + Double(index + 1) * width), JSONValue(bin)]
        }
        return [
            "min": rounded(sorted[0]), "max": rounded(sorted[count - 1]), "arithmetic_mean": rounded(mean),
            "geometric_mean": rounded(geometric), "harmonic_mean": rounded(harmonic), "median": rounded(percentile(0.5)),
            "variance": rounded(variance), "standard_deviation": rounded(deviation), "skewness": rounded(skewness),
            "kurtosis": rounded(kurtosis),
            "percentile": .array([(50, 0.5), (75, 0.75), (90, 0.9), (95, 0.95), (99, 0.99), (999, 0.999)].map {
                [JSONValue($0.0), rounded(percentile($0.1))]
            }),
            "histogram": .array(histogram), "n": JSONValue(count),
        ]
    }

    static func getSystem(_ context: RouteContext) throws -> HTTPResponse {
        try ConfigurationRoutes.checkNode(context)
        let memory = SystemFacts.memory
        return .json(200, [
            "uptime": JSONValue(Int(Date().timeIntervalSince(context.server.metrics.started))),
            "memory": ["resident": JSONValue(memory.resident), "virtual": JSONValue(memory.virtual),
                       "other": 0, "atom": 0, "atom_used": 0, "processes": 0, "processes_used": 0, "binary": 0,
                       "code": 0, "ets": 0],
            "run_queue": JSONValue(SystemFacts.runQueue),
            "run_queue_dirty_cpu": 0,
            "ets_table_count": 0,
            "context_switches": JSONValue(SystemFacts.contextSwitches),
            "reductions": 0,
            "garbage_collection_count": 0,
            "words_reclaimed": 0,
            "io_input": JSONValue(SystemFacts.io.read),
            "io_output": JSONValue(SystemFacts.io.written),
            "os_proc_count": 0,
            "stale_proc_count": 0,
            "process_count": JSONValue(SystemFacts.threadCount),
            "process_limit": JSONValue(SystemFacts.threadLimit),
            "message_queues": [:],
            "internal_replication_jobs": 0,
            "distribution": [:],
            "open_os_files": JSONValue(SystemFacts.openFileCount),
            "open_databases": JSONValue(context.server.databases.openCount),
        ])
    }

    static func getVersions(_ context: RouteContext) throws -> HTTPResponse {
        try ConfigurationRoutes.checkNode(context)
        return .json(200, [
            "couchette": ["version": JSONValue(ServerInfo.version), "couchdb_api": JSONValue(ServerInfo.couchDBVersion)],
            "sqlite": ["version": JSONValue(DatabaseManager.sqliteVersion)],
            "collation_driver": ["name": "libicu", "library_version": JSONValue(Collation.icuVersion)],
            "javascript_engine": ["name": "javascriptcore"],
        ])
    }

    static func getPrometheus(_ context: RouteContext) throws -> HTTPResponse {
        try ConfigurationRoutes.checkNode(context)
        let server = context.server
        let memory = SystemFacts.memory
        let text = server.metrics.prometheusText(gauges: [
            ("couchdb_uptime_seconds", Date().timeIntervalSince(server.metrics.started).rounded(.down)),
            ("couchdb_open_databases", Double(server.databases.openCount)),
            ("couchdb_open_os_files", Double(SystemFacts.openFileCount)),
            ("couchdb_resident_memory_bytes", Double(memory.resident)),
            ("couchdb_replicator_jobs_total", Double(server.scheduler.jobsJSON.count)),
        ], documentWrites: server.databases.documentWrites)
        return HTTPResponse(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                            body: .bytes(Array(text.utf8)))
    }
}

/// What Linux says about this process (`/proc/self`), 0 where it cannot tell.
enum SystemFacts {
    private static func read(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    private static func field(_ name: String, in text: String) -> Int {
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            return Int(line.dropFirst(name.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? 0
        }
        return 0
    }

    static var openFileCount: Int { ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).count }

    static var memory: (resident: Int, virtual: Int) {
        let pages = read("/proc/self/statm").split(separator: " ").compactMap { Int($0) }
        let size = Int(sysconf(Int32(_SC_PAGESIZE)))
        guard pages.count >= 2 else { return (0, 0) }
        return (pages[1] &* size, pages[0] &* size)
    }

    static var threadCount: Int { field("Threads", in: read("/proc/self/status")) }

    static var contextSwitches: Int {
        let status = read("/proc/self/status")
        return field("voluntary_ctxt_switches", in: status) &+ field("nonvoluntary_ctxt_switches", in: status)
    }

    /// Runnable threads on the machine (the `procs_running` of `/proc/stat`).
    static var runQueue: Int { field("procs_running", in: read("/proc/stat").replacingOccurrences(of: "procs_running ", with: "procs_running:")) }

    static var threadLimit: Int { Int(read("/proc/sys/kernel/threads-max").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 }

    static var io: (read: Int, written: Int) {
        let text = read("/proc/self/io")
        return (field("rchar", in: text), field("wchar", in: text))
    }
}
