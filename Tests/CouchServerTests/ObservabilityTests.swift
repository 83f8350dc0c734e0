import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// `/_node/_local/_stats`, `_system`, `_versions` and `_prometheus`.
@Suite struct ObservabilityTests {
    @Test func statsCountersMoveWithRequests() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let before = try server.json("GET", "/_node/_local/_stats").json
        for id in ["a", "b", "c"] { try server.put("db", id, "{}") }
        #expect(try server.request("GET", "/db/a").status == 200)
        #expect(try server.request("GET", "/db/missing").status == 404)
        let after = try server.json("GET", "/_node/_local/_stats").json
        func value(_ stats: JSONValue, _ path: String...) -> Int {
            var node = stats["couchdb"]
            for part in path { node = node?[part] }
            return node?["value"]?.intValue ?? -1
        }
        #expect(value(after, "httpd_request_methods", "PUT") - value(before, "httpd_request_methods", "PUT") == 3)
        #expect(value(after, "httpd_status_codes", "201") - value(before, "httpd_status_codes", "201") == 3)
        #expect(value(after, "httpd_status_codes", "404") - value(before, "httpd_status_codes", "404") == 1)
        #expect(value(after, "database_writes") - value(before, "database_writes") == 3)
        #expect(value(after, "database_reads") - value(before, "database_reads") == 1)
        #expect(value(after, "httpd", "requests") - value(before, "httpd", "requests") == 6)
        #expect(value(after, "open_databases") >= 1)
        #expect(value(after, "open_os_files") > 0)
        #expect(after["couchdb"]?["httpd_request_methods"]?["PUT"]?["type"] == "counter")
        let time = try #require(after["couchdb"]?["request_time"]?["value"])
        #expect((time["n"]?.intValue ?? 0) > 0)
        #expect(time["percentile"]?.arrayValue?.count == 6)
        #expect(after["couch_replicator"]?["jobs"]?["running"]?["type"] == "gauge")
        // A path picks one statistic, as in CouchDB.
        let one = try server.json("GET", "/_node/_local/_stats/couchdb/httpd_request_methods/PUT").json
        #expect(one["type"] == "counter")
        #expect((one["value"]?.intValue ?? 0) >= 3)
    }

    /// Requests counted from many connections at once are each counted once, in `_stats` and
    /// in the Prometheus text, which scrape after scrape adds only what came since.
    @Test func requestsAtOnceAreCountedExactly() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        try server.put("db", "a", "{}")
        func value(_ path: String) throws -> Int {
            try server.json("GET", "/_node/_local/_stats/couchdb/" + path).json["value"]?.intValue ?? -1
        }
        func prometheus(_ family: String, label: (String, String)? = nil) throws -> Double? {
            let families = try PrometheusText.parse(server.request("GET", "/_node/_local/_prometheus").text)
            return families[family]?.samples.first { sample in label.map { sample.labels[$0.0] == $0.1 } ?? true }?.value
        }
        let requestsBefore = try value("httpd/requests")
        let readsBefore = try value("database_reads")
        let getsBefore = try value("httpd_request_methods/GET")
        let failures = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            guard let connection = try? HTTPTestConnection(port: server.port) else { return failures.withLock { $0 += 100 } }
            defer { connection.close() }
            for _ in 0..<100 where (try? connection.request("GET", "/db/a").status) != 200 { failures.withLock { $0 += 1 } }
        }
        #expect(failures.withLock { $0 } == 0)
        // Each `_stats` read is counted once answered: three were made since `requestsBefore`.
        #expect(try value("httpd/requests") - requestsBefore == 800 + 3)
        #expect(try value("database_reads") - readsBefore == 800)
        #expect(try value("httpd_request_methods/GET") - getsBefore == 800 + 3)
        let total = try value("httpd/requests")
        #expect(try prometheus("couchdb_httpd_requests_total") == Double(total + 1))
        #expect(try prometheus("couchdb_httpd_requests_total") == Double(total + 2))
        #expect(try prometheus("couchdb_httpd_request_methods", label: ("method", "GET")) == Double(getsBefore + 800 + 7))
    }

    @Test func openFeedsAreCounted() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        func feeds() throws -> Int? {
            try server.json("GET", "/_node/_local/_stats/couchdb/httpd/clients_requesting_changes").json["value"]?.intValue
        }
        #expect(try feeds() == 0)
        let connection = try HTTPTestConnection(port: server.port)
        _ = try connection.startStreaming("GET", "/db/_changes?feed=continuous&heartbeat=50")
        #expect(try connection.readLine(timeout: 5) != nil)
        #expect(try feeds() == 1)
        connection.close()
        var remaining = 50
        while try feeds() != 0, remaining > 0 {
            Thread.sleep(forTimeInterval: 0.1)
            remaining -= 1
        }
        #expect(try feeds() == 0)
    }

    @Test func systemAndVersions() throws {
        let server = try TestServer()
        defer { server.stop() }
        let system = try server.json("GET", "/_node/_local/_system").json
        #expect((system["uptime"]?.intValue ?? -1) >= 0)
        #expect((system["memory"]?["resident"]?.intValue ?? 0) > 0)
        #expect((system["process_count"]?.intValue ?? 0) > 0)
        #expect(system["message_queues"] == [:])
        let versions = try server.json("GET", "/_node/_local/_versions").json
        #expect(versions["sqlite"]?["version"]?.stringValue?.hasPrefix("3.") == true)
        #expect(versions["couchette"]?["version"]?.stringValue?.isEmpty == false)
        #expect(try server.request("POST", "/_node/_local/_system").status == 405)
    }

    @Test func prometheusTextIsStrictlyValid() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        try server.put("db", "doc", "{}")
        #expect(try server.request("GET", "/db/doc").status == 200)
        let response = try server.request("GET", "/_node/_local/_prometheus")
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
        let families = try PrometheusText.parse(response.text)
        #expect(families["couchdb_httpd_request_methods"]?.type == "counter")
        let gets = families["couchdb_httpd_request_methods"]?.samples.first { $0.labels["method"] == "GET" }?.value
        #expect((gets ?? 0) >= 1)
        #expect((families["couchdb_database_writes_total"]?.samples.first?.value ?? 0) >= 1)
        #expect((families["couchdb_database_reads_total"]?.samples.first?.value ?? 0) >= 1)
        #expect(families["couchdb_request_time_seconds"]?.type == "histogram")
        #expect(families["couchdb_uptime_seconds"]?.type == "gauge")
        #expect(families["couchdb_open_databases"] != nil)
    }

    @Test func theStrictParserRefusesMalformedText() {
        for bad in ["metric 1\n", "# TYPE m counter\nm{a=\"1\" 2\n", "# TYPE m counter\nm one\n",
                    "# TYPE m gauge\nm 1\n# TYPE m gauge\nm 2\n", "# TYPE 1m counter\n1m 1\n",
                    "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
                    "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"] {
            #expect(throws: PrometheusText.Error.self, "\(bad)") { try PrometheusText.parse(bad) }
        }
    }
}

/// A strict reader of Prometheus' text exposition format (0.0.4): every sample belongs to
/// a family declared by `# TYPE` before it, families are not split or repeated, names and
/// labels are well formed, values are numbers, no series repeats, and histograms have
/// cumulative buckets ending at `+Inf` whose count equals `_count`.
enum PrometheusText {
    struct Error: Swift.Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    struct Sample {
        let name: String
        let labels: [String: String]
        let value: Double
    }

    struct Family {
        let type: String
        var samples: [Sample] = []
    }

    static func isName(_ text: Substring, colons: Bool = true) -> Bool {
        guard let first = text.first, first.isASCII, first.isLetter || first == "_" || (colons && first == ":") else { return false }
        return text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || (colons && $0 == ":")) }
    }

    static func number(_ text: Substring) -> Double? {
        switch text {
        case "+Inf": return .infinity
        case "-Inf": return -.infinity
        case "NaN": return .nan
        default: return Double(text)
        }
    }

    static func parse(_ text: String) throws -> [String: Family] {
        var families: [String: Family] = [:]
        var current: String?
        var seen: Set<String> = []
        guard text.isEmpty || text.hasSuffix("\n") else { throw Error("the text must end with a newline") }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            if line.hasPrefix("#") {
                let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
                if parts.count >= 2, parts[1] == "TYPE" {
                    guard parts.count == 4, isName(parts[2]),
                          ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[3]) else {
                        throw Error("bad TYPE line: \(line)")
                    }
                    let name = String(parts[2])
                    guard families[name] == nil else { throw Error("family \(name) declared twice") }
                    families[name] = Family(type: String(parts[3]))
                    current = name
                } else if parts.count >= 2, parts[1] == "HELP" {
                    guard parts.count >= 3, isName(parts[2]) else { throw Error("bad HELP line: \(line)") }
                }
                continue
            }
            guard !line.isEmpty else { continue }
            let sample = try parseSample(line)
            guard let family = current else { throw Error("sample before any TYPE: \(line)") }
            let type = families[family]!.type
            let allowed = type == "histogram" ? ["_bucket", "_sum", "_count"].map { family + $0 }
                : type == "summary" ? [family, family + "_sum", family + "_count"] : [family]
            guard allowed.contains(sample.name) else { throw Error("sample \(sample.name) outside its family \(family)") }
            let series = sample.name + sample.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
            guard seen.insert(series).inserted else { throw Error("series repeated: \(series)") }
            families[family]!.samples.append(sample)
        }
        for (name, family) in families where family.type == "histogram" { try checkHistogram(name, family) }
        return families
    }

    private static func parseSample(_ line: Substring) throws -> Sample {
        var rest = line[...]
        let nameEnd = rest.firstIndex { $0 == "{" || $0 == " " } ?? rest.endIndex
        let name = rest[..<nameEnd]
        guard isName(name) else { throw Error("bad metric name in: \(line)") }
        rest = rest[nameEnd...]
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                guard let equals = rest.firstIndex(of: "=") else { throw Error("bad labels in: \(line)") }
                let label = rest[..<equals]
                guard isName(label, colons: false), labels[String(label)] == nil else { throw Error("bad label name in: \(line)") }
                rest = rest[rest.index(after: equals)...]
                guard rest.first == "\"" else { throw Error("unquoted label value in: \(line)") }
                rest = rest.dropFirst()
                var value = ""
                while true {
                    guard let character = rest.first else { throw Error("unterminated label value in: \(line)") }
                    rest = rest.dropFirst()
                    if character == "\"" { break }
                    if character == "\\" {
                        guard let escaped = rest.first, ["\\", "\"", "n"].contains(escaped) else { throw Error("bad escape in: \(line)") }
                        value.append(escaped == "n" ? "\n" : escaped)
                        rest = rest.dropFirst()
                    } else {
                        value.append(character)
                    }
                }
                labels[String(label)] = value
                if rest.first == "," { rest = rest.dropFirst() } else if rest.first != "}" { throw Error("bad labels in: \(line)") }
            }
            rest = rest.dropFirst()
        }
        guard rest.first == " " else { throw Error("no value in: \(line)") }
        let fields = rest.dropFirst().split(separator: " ", omittingEmptySubsequences: false)
        guard (1...2).contains(fields.count), let value = number(fields[0]) else { throw Error("bad value in: \(line)") }
        if fields.count == 2, Int64(fields[1]) == nil { throw Error("bad timestamp in: \(line)") }
        return Sample(name: String(name), labels: labels, value: value)
    }

    private static func checkHistogram(_ name: String, _ family: Family) throws {
        let buckets = family.samples.filter { $0.name == name + "_bucket" }
        var groups: [String: [(Double, Double)]] = [:]
        for bucket in buckets {
            guard let le = bucket.labels["le"], let bound = number(le[...]) else { throw Error("\(name): bucket without le") }
            let key = bucket.labels.filter { $0.key != "le" }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined()
            groups[key, default: []].append((bound, bucket.value))
        }
        guard !groups.isEmpty else { throw Error("\(name): histogram without buckets") }
        for (key, group) in groups {
            let sorted = group.sorted { $0.0 < $1.0 }
            guard sorted.last?.0 == .infinity else { throw Error("\(name): no +Inf bucket") }
            for (a, b) in zip(sorted, sorted.dropFirst()) where b.1 < a.1 { throw Error("\(name): buckets not cumulative") }
            let count = family.samples.first { sample in
                sample.name == name + "_count"
                    && sample.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined() == key
            }
            guard let count, count.value == sorted.last!.1 else { throw Error("\(name): _count differs from the +Inf bucket") }
        }
    }
}
