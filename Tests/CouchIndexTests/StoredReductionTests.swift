import CouchCore
@testable import CouchIndex
import CouchStore
import CouchTestSupport
import Foundation
import Testing

/// Reduce queries answered from stored reductions, over real HTTP: after random writes,
/// deletions, purges and compactions, every query (ranges, group levels, descending, keys,
/// document-ID bounds, skip and limit) answers what reducing the rows it covers answers, for
/// each built-in and a JavaScript reduce. The rows come from the same view queried with
/// `reduce=false`, and are reduced here.
@Suite struct StoredReductionTests {
    static let map = """
        function(doc) { if (doc.g !== undefined) { emit([doc.g, doc.h, doc.n], doc.n); if (doc.n % 3 == 0) emit([doc.g, doc.n], doc.n * 2); } }
        """
    static let javaScriptReduce = """
        function(keys, values, rereduce) { if (!rereduce) return [values.length, sum(values)]; \
        var c = 0, s = 0; for (var i = 0; i < values.length; i++) { c += values[i][0]; s += values[i][1]; } return [c, s]; }
        """
    static let reduces = ["count": "_count", "sum": "_sum", "stats": "_stats", "distinct": "_approx_count_distinct",
                          "js": javaScriptReduce]

    static var design: String { design(reduces) }

    /// JavaScript reduces are refused in partitioned views, as CouchDB refuses them.
    static var builtInDesign: String { design(reduces.filter { $0.key != "js" }) }

    static func design(_ reduces: [String: String]) -> String {
        let views = reduces.sorted { $0.key < $1.key }.map { name, reduce in
            #""\#(name)":{"map":\#(JSONValue(map).serializedString()),"reduce":\#(JSONValue(reduce).serializedString())}"#
        }
        return #"{"views":{\#(views.joined(separator: ","))}}"#
    }

    /// A document's fields, drawn at random.
    static func body(_ random: inout SeededRandom) -> String {
        let groups = ["a", "b", "c", "d"]
        return #""g":"\#(groups[random.next(groups.count)])","h":\#(random.next(20)),"n":\#(random.next(1000))"#
    }

    @Test func reduceQueriesMatchTheRowsAfterRandomChanges() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var server = try TestServer(directory: directory)
        defer { server.stop() }
        var random = SeededRandom(seed: 31)
        try server.createDatabase("db")
        try server.put("db", "_design/r", Self.design)
        var revisions: [String: String] = [:]
        var nextID = 0
        func write(_ documents: [String]) throws {
            let (status, json) = try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(documents.joined(separator: ","))]}"#)
            #expect(status == 201)
            for result in json.arrayValue ?? [] {
                guard let id = result["id"]?.stringValue else { continue }
                revisions[id] = result["rev"]?.stringValue
            }
        }
        func create(_ count: Int) throws {
            try write((0..<count).map { _ in
                nextID += 1
                return #"{"_id":"doc\#(String(format: "%05d", nextID))",\#(Self.body(&random))}"#
            })
        }
        /// Random edits of `count` documents: updates, deletions and purges, then new ones.
        func churn(_ count: Int) throws {
            var edits: [String] = []
            var deleted: [String] = []
            var purges: [String] = []
            for _ in 0..<count {
                let ids = revisions.keys.sorted()
                guard !ids.isEmpty else { break }
                let id = ids[random.next(ids.count)]
                guard let revision = revisions.removeValue(forKey: id) else { continue }
                switch random.next(10) {
                case 0..<6: edits.append(#"{"_id":"\#(id)","_rev":"\#(revision)",\#(Self.body(&random))}"#)
                case 6..<8:
                    edits.append(#"{"_id":"\#(id)","_rev":"\#(revision)","_deleted":true}"#)
                    deleted.append(id)
                default: purges.append(#""\#(id)":["\#(revision)"]"#)
                }
            }
            try write(edits)
            for id in deleted { revisions[id] = nil }
            for start in stride(from: 0, to: purges.count, by: 100) {   // CouchDB's most per request
                let chunk = purges[start..<min(purges.count, start + 100)]
                #expect(try server.json("POST", "/db/_purge", body: "{\(chunk.joined(separator: ","))}").status == 201)
            }
            try create(count / 4)
        }

        try create(3000)
        try checkQueries(server, &random, rounds: 10)
        for round in 0..<6 {
            // Small rounds follow the changes node by node; the large one builds the reductions again.
            try churn(round == 3 ? 1600 : 60 + random.next(80))
            switch round {
            case 1: #expect(try server.json("POST", "/db/_compact", body: "{}").status == 202)
            case 2: #expect(try server.json("POST", "/db/_compact/r", body: "{}").status == 202)
            case 4:
                // A restart reopens the same index file and its reductions.
                server.stop(keepData: true)
                server = try TestServer(directory: directory)
            default: break
            }
            try checkQueries(server, &random, rounds: 8)
        }
    }

    /// `_approx_count_distinct` answers what CouchDB 3.4.3 answers for the same keys (its
    /// `couch_hyper` run on them: these figures come from CouchDB's own code).
    @Test func approximateDistinctCountsAreCouchDBs() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let sets: [(name: String, keys: [String], couchDB: Int)] = [
            ("ints", (1...5000).map(String.init), 4940),
            ("strings", (0..<300).map { #""k\#($0)""# }, 292),
            ("arrays", (0..<1000).map { #"[\#($0),"x"]"# }, 985),
            ("floats", (0..<100).map { "\($0).5" }, 100),
            ("objects", (0..<2000).map { #"{"a":\#($0),"b":null}"# }, 2020),
        ]
        let views = sets.map { #""\#($0.name)":{"map":"function(doc) { if (doc.set == '\#($0.name)') emit(doc.k, null); }","reduce":"_approx_count_distinct"}"# }
        try server.put("db", "_design/d", #"{"views":{\#(views.joined(separator: ","))}}"#)
        for set in sets {
            for start in stride(from: 0, to: set.keys.count, by: 1000) {
                let documents = set.keys[start..<min(set.keys.count, start + 1000)].map { #"{"set":"\#(set.name)","k":\#($0)}"# }
                #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(documents.joined(separator: ","))]}"#).status == 201)
            }
        }
        for set in sets {
            let rows = try server.json("GET", "/db/_design/d/_view/\(set.name)").json["rows"]?.arrayValue ?? []
            #expect(rows.first?["value"] == JSONValue(set.couchDB), "\(set.name)")
        }

        // A partitioned view hashes {p, Partition, Key}, as CouchDB's partitioned index stores keys.
        #expect(try server.json("PUT", "/pdb?partitioned=true").status == 201)
        try server.put("pdb", "_design/d", #"{"views":{"k":{"map":"function(doc) { emit(doc.k, null); }","reduce":"_approx_count_distinct"}}}"#)
        for start in stride(from: 1, through: 3000, by: 1000) {
            let documents = (start..<start + 1000).map { #"{"_id":"p1:\#($0)","k":\#($0)}"# }
            #expect(try server.json("POST", "/pdb/_bulk_docs", body: #"{"docs":[\#(documents.joined(separator: ","))]}"#).status == 201)
        }
        let rows = try server.json("GET", "/pdb/_partition/p1/_design/d/_view/k").json["rows"]?.arrayValue ?? []
        #expect(rows.first?["value"] == 3151)
    }

    /// An index file written before reductions were stored answers reduce queries (they are
    /// built from its rows on the first), and keeps following changes.
    @Test func indexFilesWithoutStoredReductionsStillAnswer() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var server = try TestServer(directory: directory)
        try server.createDatabase("db")
        try server.put("db", "_design/r", Self.design)
        var random = SeededRandom(seed: 5)
        let documents = (0..<500).map { #"{"_id":"d\#($0)",\#(Self.body(&random))}"# }
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(documents.joined(separator: ","))]}"#).status == 201)
        let expected = try server.json("GET", "/db/_design/r/_view/sum?group_level=1").json["rows"]
        #expect(expected?.arrayValue?.count == 4)
        server.stop(keepData: true)

        let files = try FileManager.default.contentsOfDirectory(atPath: directory + "/db.views").filter { $0.hasSuffix(".sqlite") }
        try #require(files.count == 1)
        let file = try SQLiteConnection(path: directory + "/db.views/" + files[0])
        try file.execute("DROP TABLE reductions; DELETE FROM meta WHERE name = 'reductions';")
        server = try TestServer(directory: directory)
        defer { server.stop() }
        #expect(try server.json("GET", "/db/_design/r/_view/sum?group_level=1&update=false").json["rows"] == expected)
        #expect(try file.scalarInt("SELECT count(*) FROM reductions") ?? 0 > 0)
        try server.put("db", "extra", #"{"g":"a","h":1,"n":1000}"#)
        let rows = try server.json("GET", "/db/_design/r/_view/sum?group_level=1").json["rows"]?.arrayValue ?? []
        #expect(rows.first?["value"]?.intValue == (expected?.arrayValue?.first?["value"]?.intValue).map { $0 + 1000 })
    }

    /// A reduce that throws on some rows fails the queries that cover them, with its error, and
    /// only those; map queries answer; once the rows change the queries answer again.
    @Test func aFailingReduceFailsOnlyTheQueriesCoveringIt() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        try server.put("db", "_design/f", #"""
            {"views":{"v":{"map":"function(doc) { emit(doc.n, doc.n); }",
              "reduce":"function(keys, values, rereduce) { if (!rereduce && values.indexOf(13) >= 0) throw({error: 'unlucky', reason: 'thirteen'}); return sum(values); }"}}}
            """#)
        let documents = (0..<2000).map { #"{"_id":"d\#($0)","n":\#($0)}"# }
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(documents.joined(separator: ","))]}"#).status == 201)
        var (status, json) = try server.json("GET", "/db/_design/f/_view/v")
        #expect(status == 500)
        #expect(json["error"] == "unlucky" && json["reason"] == "thirteen")
        (status, json) = try server.json("GET", "/db/_design/f/_view/v?startkey=100")
        #expect(status == 200)
        #expect(json["rows"]?.arrayValue?.first?["value"] == JSONValue((100..<2000).reduce(0, +)))
        #expect(try server.json("GET", "/db/_design/f/_view/v?reduce=false&limit=1").status == 200)
        let revision = try server.json("GET", "/db/d13").json["_rev"]!.stringValue!
        try server.put("db", "d13", #"{"_rev":"\#(revision)","n":-13}"#)
        (status, json) = try server.json("GET", "/db/_design/f/_view/v")
        #expect(status == 200)
        #expect(json["rows"]?.arrayValue?.first?["value"] == JSONValue((0..<2000).reduce(0, +) - 26))
    }

    /// A partitioned view's reductions answer per partition: its groups and ranges, never
    /// another partition's rows.
    @Test func partitionedViewsReduceWithinTheirPartition() throws {
        let server = try TestServer()
        defer { server.stop() }
        #expect(try server.json("PUT", "/pdb?partitioned=true").status == 201)
        try server.put("pdb", "_design/r", Self.builtInDesign)
        var random = SeededRandom(seed: 11)
        for partition in ["p1", "p2", "p3"] {
            let documents = (0..<400).map { #"{"_id":"\#(partition):d\#($0)",\#(Self.body(&random))}"# }
            #expect(try server.json("POST", "/pdb/_bulk_docs", body: #"{"docs":[\#(documents.joined(separator: ","))]}"#).status == 201)
        }
        let queries: [[(String, JSONValue)]] = [[], [("group", true)], [("group_level", 1)], [("group_level", 2), ("descending", true)],
                                                [("group_level", 1), ("startkey", try JSONValue.parse(#"["b"]"#)),
                                                 ("endkey", try JSONValue.parse(#"["c",5]"#))]]
        for partition in ["p1", "p3"] {
            for query in queries {
                let parameters = query.map { "\($0.0)=\(PercentEncoding.encode($0.1.serializedString()))" }
                let mapOnly = query.filter { !["group", "group_level"].contains($0.0) }
                    .map { "\($0.0)=\(PercentEncoding.encode($0.1.serializedString()))" } + ["reduce=false"]
                let base = "/pdb/_partition/\(partition)/_design/r/_view/"
                let rows = try server.json("GET", base + "sum?" + mapOnly.joined(separator: "&")).json["rows"]?.arrayValue ?? []
                #expect(!rows.isEmpty && rows.allSatisfy { $0["id"]?.stringValue?.hasPrefix(partition + ":") == true })
                for view in ["sum", "count", "stats", "distinct"] {
                    let json = try server.json("GET", base + view + "?" + parameters.joined(separator: "&")).json
                    var expected = Self.reduced(rows, view: view, query: query)
                    if view == "distinct" {
                        // Keys hashed with their partition, as CouchDB's partitioned index holds them.
                        expected = .array((expected.arrayValue ?? []).map { group in
                            let covered = rows.filter { row in Self.reduced([row], view: "count", query: query).arrayValue?.first?["key"] == group["key"] }
                            var sketch = HyperLogLog()
                            for row in covered { sketch.insert(keyJSON: (row["key"] ?? .null).serialized(), partition: partition) }
                            return .object(JSONObject([(key: "key", value: group["key"] ?? .null), (key: "value", value: JSONValue(sketch.cardinality))]))
                        })
                    }
                    #expect(json["rows"] == expected, "\(partition) \(view)?\(parameters)")
                }
            }
        }
    }

    /// Random queries, each compared with the rows it covers reduced here.
    private func checkQueries(_ server: TestServer, _ random: inout SeededRandom, rounds: Int) throws {
        let all = try server.json("GET", "/db/_design/r/_view/count?reduce=false").json["rows"]?.arrayValue ?? []
        try #require(!all.isEmpty)
        func key() -> JSONValue { all[random.next(all.count)]["key"] ?? .null }
        var queries: [[(String, JSONValue)]] = [[], [("group", true)], [("group_level", 1)], [("group_level", 2)],
                                                [("group_level", 3)], [("descending", true), ("group_level", 2)]]
        for _ in 0..<rounds {
            var query: [(String, JSONValue)] = []
            var (low, high) = (key(), key())
            if Collation.compare(low, high) > 0 { swap(&low, &high) }
            let descending = random.next(3) == 0
            if descending { swap(&low, &high) }
            if descending { query.append(("descending", true)) }
            switch random.next(4) {
            case 0: query.append(("group", true))
            case 1: break
            default: query.append(("group_level", JSONValue(random.next(4))))
            }
            switch random.next(5) {
            case 0:
                query += [("startkey", low)]
            case 1:
                query += [("endkey", high), ("inclusive_end", JSONValue(random.next(2) == 0))]
            case 2:
                // One key, cut by document IDs.
                let ids = ["doc00\(random.next(10))", "doc0\(random.next(100))"].sorted()
                query += [("key", low), ("startkey_docid", JSONValue(descending ? ids[1] : ids[0])),
                          ("endkey_docid", JSONValue(descending ? ids[0] : ids[1]))]
            default:
                query += [("startkey", low), ("endkey", high), ("inclusive_end", JSONValue(random.next(2) == 0))]
            }
            if random.next(3) == 0 { query.append(("skip", JSONValue(random.next(4)))) }
            if random.next(3) == 0 { query.append(("limit", JSONValue(1 + random.next(5)))) }
            queries.append(query)
        }
        for query in queries {
            let path = query.map { "\($0.0)=\(PercentEncoding.encode($0.1.serializedString()))" }.joined(separator: "&")
            let mapOnly = query.filter { !["group", "group_level", "skip", "limit"].contains($0.0) }
                .map { "\($0.0)=\(PercentEncoding.encode($0.1.serializedString()))" } + ["reduce=false"]
            let (status, covered) = try server.json("GET", "/db/_design/r/_view/count?" + mapOnly.joined(separator: "&"))
            #expect(status == 200)
            let rows = covered["rows"]?.arrayValue ?? []
            for name in Self.reduces.keys.sorted() {
                let (status, json) = try server.json("GET", "/db/_design/r/_view/\(name)?" + path)
                #expect(status == 200, "\(name)?\(path): \(json.serializedString())")
                let expected = Self.reduced(rows, view: name, query: query)
                #expect(json["rows"] == expected, "\(name)?\(path)")
            }
        }
        // Several keys at once (group=true), in the order asked.
        let keys = Array(Set((0..<6).map { _ in key().serializedString() })).map { try! JSONValue.parse($0) }
        let body = JSONValue.object(JSONObject([(key: "keys", value: .array(keys))])).serializedString()
        let covered = try server.json("POST", "/db/_design/r/_view/count?reduce=false", body: body).json["rows"]?.arrayValue ?? []
        for name in Self.reduces.keys.sorted() {
            let json = try server.json("POST", "/db/_design/r/_view/\(name)?group=true", body: body).json
            #expect(json["rows"] == Self.reduced(covered, view: name, query: [("group", true)]), "\(name) keys")
        }
    }

    /// What a reduce query answers for `rows` (the rows it covers, in its order), reduced here.
    static func reduced(_ rows: [JSONValue], view: String, query: [(String, JSONValue)]) -> JSONValue {
        let level: Int? = query.contains { $0.0 == "group" } ? nil : query.first { $0.0 == "group_level" }?.1.intValue ?? 0
        var groups: [(key: JSONValue, rows: [JSONValue])] = []
        for row in rows {
            var key = row["key"] ?? .null
            if level == 0 { key = .null }
            if let level, level > 0, case .array(let items) = key, items.count > level { key = .array(Array(items.prefix(level))) }
            if let last = groups.last, last.key == key {
                groups[groups.count - 1].rows.append(row)
            } else {
                groups.append((key, [row]))
            }
        }
        let skip = query.first { $0.0 == "skip" }?.1.intValue ?? 0
        let limit = query.first { $0.0 == "limit" }?.1.intValue ?? Int.max
        return .array(groups.dropFirst(skip).prefix(limit).map { group in
            .object(JSONObject([(key: "key", value: group.key), (key: "value", value: reduce(group.rows, view: view))]))
        })
    }

    static func reduce(_ rows: [JSONValue], view: String) -> JSONValue {
        let values = rows.compactMap { $0["value"]?.intValue }
        switch view {
        case "count": return JSONValue(rows.count)
        case "sum": return JSONValue(values.reduce(0, +))
        case "stats":
            return .object(JSONObject([(key: "sum", value: JSONValue(values.reduce(0, +))), (key: "count", value: JSONValue(values.count)),
                                       (key: "min", value: JSONValue(values.min()!)), (key: "max", value: JSONValue(values.max()!)),
                                       (key: "sumsqr", value: JSONValue(values.map { $0 * $0 }.reduce(0, +)))]))
        case "distinct":
            var sketch = HyperLogLog()
            for row in rows { sketch.insert(keyJSON: (row["key"] ?? .null).serialized(), partition: nil) }
            return JSONValue(sketch.cardinality)
        default:
            return .array([JSONValue(rows.count), JSONValue(values.reduce(0, +))])
        }
    }
}

/// A small deterministic generator (SplitMix64), so a failure can be replayed.
struct SeededRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(bound))
    }
}
