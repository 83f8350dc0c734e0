import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Partitioned databases and `_local_docs`, answering as CouchDB 3's partition and
/// local-docs integration tests expect.
@Suite struct PartitionTests {
    let server: TestServer

    init() throws {
        server = try TestServer()
        #expect(try server.request("PUT", "/pdb?partitioned=true").status == 201)
    }

    private func ids(_ json: JSONValue) -> [String] {
        json["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }

    private func fill(_ partitions: [String: Int]) throws {
        var docs: [JSONValue] = []
        for (partition, count) in partitions {
            for index in 0..<count { docs.append(["_id": JSONValue("\(partition):\(index)"), "value": JSONValue(index)]) }
        }
        #expect(try server.json("POST", "/pdb/_bulk_docs", body: JSONValue.object(["docs": .array(docs)]).serializedString()).status == 201)
    }

    @Test func creationPropsAndBadParameters() throws {
        defer { server.stop() }
        #expect(try server.json("GET", "/pdb").json["props"] == ["partitioned": true])
        try server.createDatabase("plain")
        #expect(try server.json("GET", "/plain").json["props"] == [:])
        let bad = try server.json("PUT", "/bad-db?partitioned=tru")
        #expect(bad.status == 400 && bad.json == ["error": "bad_request", "reason": "Invalid `partitioned` parameter"])
        let system = try server.json("PUT", "/_replicator?partitioned=true")
        #expect(system.status == 400 && system.json["reason"]?.stringValue?.contains("Cannot partition a system database") == true)
        // Partitioned after a restart too.
        server.stop(keepData: true)
        let again = try TestServer(directory: server.directory)
        defer { again.stop() }
        #expect(try again.json("GET", "/pdb").json["props"] == ["partitioned": true])
    }

    @Test func documentIDsMustNameAPartition() throws {
        defer { server.stop() }
        #expect(try server.json("PUT", "/pdb/my-partition:doc", body: #"{"partitioned_doc":true}"#).status == 201)
        #expect(try server.json("GET", "/pdb/my-partition:doc").json["_id"] == "my-partition:doc")
        let cases: [(String, JSONValue)] = [
            ("not-partitioned", ["error": "illegal_docid", "reason": "Doc id must be of form partition:id"]),
            ("_bad:partitioned", ["error": "illegal_docid", "reason": "Only reserved document ids may start with underscore."]),
            ("bad:", ["error": "illegal_docid", "reason": "Document id must not be empty"]),
        ]
        for (id, error) in cases {
            let put = try server.json("PUT", "/pdb/\(id)", body: "{}")
            #expect(put.status == 400 && put.json == error, "PUT \(id)")
            let bulk = try server.json("POST", "/pdb/_bulk_docs", body: #"{"docs":[{"_id":"ok:1"},{"_id":"\#(id)"}]}"#)
            #expect(bulk.status == 400 && bulk.json == error, "_bulk_docs \(id)")
        }
        #expect(try server.json("GET", "/pdb/ok:1").status == 404, "a refused _bulk_docs writes nothing")
        #expect(try server.json("POST", "/pdb", body: #"{"_id":"not-partitioned-post"}"#).status == 400)
        #expect(try server.json("POST", "/pdb", body: #"{"_id":"p:post"}"#).status == 201)
        // Design and local documents are not partitioned.
        #expect(try server.json("PUT", "/pdb/_design/d", body: "{}").status == 201)
        #expect(try server.json("PUT", "/pdb/_local/l", body: "{}").status == 201)
        // Replicated revisions are checked too.
        let replicated = try server.json("POST", "/pdb/_bulk_docs", body: #"{"new_edits":false,"docs":[{"_id":"nope","_rev":"1-abc"}]}"#)
        #expect(replicated.status == 400)
        let bulkGet = try server.json("POST", "/pdb/_bulk_get", body: #"{"docs":[{"id":"my-partition-post"}]}"#).json
        #expect(bulkGet["results"]?[0]?["docs"]?[0]?["error"] == ["id": "my-partition-post", "rev": .null, "error": "illegal_docid",
                                                                    "reason": "Doc id must be of form partition:id"])
        let purge = try server.json("POST", "/pdb/_purge", body: #"{"no_partition":["1-967a00dff5e02add41819138abb3284d"]}"#)
        #expect(purge.status == 400 && purge.json["error"] == "illegal_docid")
    }

    @Test func partitionInformation() throws {
        defer { server.stop() }
        try fill(["foo": 6, "bar": 3])
        let rev = try server.json("GET", "/pdb/foo:0").json["_rev"]?.stringValue ?? ""
        #expect(try server.json("DELETE", "/pdb/foo:0?rev=\(rev)").status == 200)
        let (status, info) = try server.json("GET", "/pdb/_partition/foo")
        #expect(status == 200)
        #expect(info["db_name"] == "pdb" && info["partition"] == "foo")
        #expect(info["doc_count"] == 5 && info["doc_del_count"] == 1)
        let external = info["sizes"]?["external"]?.intValue ?? 0
        #expect(external > 0 && (info["sizes"]?["active"]?.intValue ?? 0) > external)
        #expect(try server.json("GET", "/pdb/_partition/bar").json["doc_count"] == 3)
        #expect(try server.json("GET", "/pdb/_partition/none").json["doc_count"] == 0)
        #expect(try server.json("GET", "/pdb/_partition").json == ["error": "bad_request", "reason": "invalid_partition_req"])
        #expect(try server.json("GET", "/pdb/_partition/_bad").json["error"] == "illegal_partition")
        #expect(try server.json("POST", "/pdb/_partition/foo", body: "{}").status == 405)
        try server.createDatabase("plain")
        let plain = try server.json("GET", "/plain/_partition/foo/_all_docs")
        #expect(plain.status == 400 && plain.json["reason"] == "database is not partitioned")
    }

    @Test func partitionAllDocsListsOnlyItsPartition() throws {
        defer { server.stop() }
        try fill(["foo": 12, "bar": 30, "fop": 2])
        let all = try server.json("GET", "/pdb/_partition/foo/_all_docs").json
        #expect(ids(all).count == 12 && ids(all).allSatisfy { $0.hasPrefix("foo:") })
        #expect(all["total_rows"] == 12 && all["offset"] == 0)
        let limited = try server.json("GET", "/pdb/_partition/foo/_all_docs?descending=true&limit=3").json
        #expect(ids(limited) == ["foo:9", "foo:8", "foo:7"])
        let skipped = try server.json("GET", "/pdb/_partition/foo/_all_docs?skip=2&limit=2").json
        #expect(ids(skipped) == ["foo:10", "foo:11"])
        let ranged = try server.json("GET", "/pdb/_partition/foo/_all_docs?start_key=%22foo:10%22&end_key=%22foo:2%22").json
        #expect(ids(ranged) == ["foo:10", "foo:11", "foo:2"])
        // A range reaching past the partition stays in it.
        let wide = try server.json("GET", "/pdb/_partition/foo/_all_docs?startkey=%22a%22&endkey=%22z%22").json
        #expect(ids(wide).count == 12)
        let key = try server.json("GET", "/pdb/_partition/foo/_all_docs?key=%22foo:3%22").json
        #expect(ids(key) == ["foo:3"])
        let keys = try server.json("POST", "/pdb/_partition/foo/_all_docs", body: #"{"keys":["foo:2","bar:1","foo:4"]}"#).json
        #expect(ids(keys) == ["foo:2", "foo:4"])
        #expect(keys["rows"]?[1] == ["key": "bar:1", "error": "not_found"])
        let tooMany = try server.json("GET", "/pdb/_partition/foo/_all_docs?limit=2001")
        #expect(tooMany.status == 400 && tooMany.json["reason"] == "Limit is too large, must not exceed 2000")
        #expect(try server.json("GET", "/pdb/_partition//_all_docs").json["error"] == "illegal_partition")
        #expect(try server.json("GET", "/pdb/_partition/foo/_all_docs?partition=bar").status == 400)
        #expect(try server.json("GET", "/pdb/_partition/foo/_nothing").status == 404)
        // The whole database still lists everything.
        #expect(try server.json("GET", "/pdb/_all_docs").json["total_rows"] == 44)
    }

    @Test func fullPartitionsRefuseGrowingWrites() throws {
        defer { server.stop() }
        var configuration = ServerConfiguration.testing()
        configuration.maximumPartitionSize = 10_240
        let limited = try TestServer(configuration: configuration)
        defer { limited.stop() }
        #expect(try limited.request("PUT", "/pdb?partitioned=true").status == 201)
        let padding = String(repeating: " ", count: 1023) + "0"
        let docs = (1...15).map { #"{"_id":"foo:\#($0)","value":"\#(padding)"}"# }.joined(separator: ",")
        #expect(try limited.json("POST", "/pdb/_bulk_docs", body: #"{"docs":[\#(docs)]}"#).status == 201)
        let post = try limited.json("POST", "/pdb", body: #"{"_id":"foo:bar","value":"stuff"}"#)
        #expect(post.status == 403)
        #expect(post.json == ["error": "partition_overflow", "reason": "Partition limit exceeded due to update on 'foo:bar'"])
        // Refused once the partition holds the limit (the write that crossed it went in).
        #expect(try limited.json("GET", "/pdb/_partition/foo").json["sizes"]?["external"]?.intValue ?? 0 >= 10_240)
        #expect(try limited.json("PUT", "/pdb/foo:baz", body: #"{"value":"stuff"}"#).status == 403)
        let bulk = try limited.json("POST", "/pdb/_bulk_docs", body: #"{"docs":[{"_id":"foo:bar"},{"_id":"baz:bang"}]}"#)
        #expect(bulk.status == 201 && bulk.json[0]?["error"] == "partition_overflow" && bulk.json[1]?["ok"] == true)
        // Still readable; deletions, shrinking updates, design documents and replicated writes go in.
        let doc = try limited.json("GET", "/pdb/foo:1").json
        let rev = doc["_rev"]?.stringValue ?? ""
        #expect(try limited.json("PUT", "/pdb/foo:1", body: #"{"_rev":"\#(rev)","value":""}"#).status == 201)
        let doc2 = try limited.json("GET", "/pdb/foo:2").json["_rev"]?.stringValue ?? ""
        #expect(try limited.json("DELETE", "/pdb/foo:2?rev=\(doc2)").status == 200)
        #expect(try limited.json("PUT", "/pdb/_design/foo", body: #"{"value":"stuff"}"#).status == 201)
        #expect(try limited.json("PUT", "/pdb/foo:bar?new_edits=false", body: #"{"_rev":"1-23202479633c2b380f79507a776743d5","value":"stuff"}"#).status == 201)
        // The limit is live configuration.
        #expect(try limited.json("PUT", "/_node/_local/_config/couchdb/max_partition_size", body: #""10240000""#).status == 200)
        #expect(try limited.json("POST", "/pdb", body: #"{"_id":"foo:more","value":"stuff"}"#).status == 201)
    }

    @Test func localDocsListsLocalDocumentsWithAllDocsOptions() throws {
        defer { server.stop() }
        try server.createDatabase("db")
        #expect(try server.json("PUT", "/db/_local/foo", body: #"{"bar":"baz"}"#).status == 201)
        #expect(try server.json("PUT", "/db/_local/foo2", body: #"{"bar":"baz2"}"#).status == 201)
        _ = try server.put("db", "regular", "{}")
        let all = try server.json("GET", "/db/_local_docs").json
        #expect(all["total_rows"] == .null && all["offset"] == .null)
        #expect(all["rows"] == [["id": "_local/foo", "key": "_local/foo", "value": ["rev": "0-1"]],
                                ["id": "_local/foo2", "key": "_local/foo2", "value": ["rev": "0-1"]]])
        let keys = try server.json("GET", "/db/_local_docs?keys=%5B%22_local/foo%22,%22_local/nope%22%5D").json
        #expect(keys["rows"]?[1] == ["key": "_local/nope", "error": "not_found"])
        #expect(try server.json("POST", "/db/_local_docs", body: "{}").json["rows"]?.arrayValue?.count == 2)
        let limited = try server.json("POST", "/db/_local_docs", body: #"{"keys":["_local/foo","_local/foo2"],"limit":1}"#).json
        #expect(limited["rows"]?.arrayValue?.count == 1)
        let queryWins = try server.json("POST", "/db/_local_docs?limit=0", body: #"{"keys":["_local/foo"],"limit":2}"#).json
        #expect(queryWins["rows"] == [])
        let docs = try server.json("GET", "/db/_local_docs?include_docs=true&descending=true&limit=1").json
        #expect(docs["rows"]?[0]?["doc"] == ["_id": "_local/foo2", "_rev": "0-1", "bar": "baz2"])
        let ranged = try server.json("GET", "/db/_local_docs?startkey=%22_local/foo2%22").json
        #expect(ranged["rows"]?.arrayValue?.count == 1)
        #expect(try server.json("GET", "/db/_local_docs?limit=-1").status == 400)
    }

    @Test func partitionedViewsReadOnlyTheirPartitionsKeyRange() throws {
        defer { server.stop() }
        try fill(["foo": 5, "bar": 40])
        let map = #"function(doc) { emit(doc.value, 1); }"#
        #expect(try server.json("PUT", "/pdb/_design/v", body: #"{"views":{"all":{"map":"\#(map)","reduce":"_count"}}}"#).status == 201)
        let view = "/pdb/_partition/foo/_design/v/_view/all"
        let rows = try server.json("GET", view + "?reduce=false").json
        #expect(ids(rows) == (0..<5).map { "foo:\($0)" } && rows["total_rows"] == 5 && rows["offset"] == 0)
        let ranged = try server.json("GET", view + "?reduce=false&startkey=2&endkey=3").json
        #expect(ids(ranged) == ["foo:2", "foo:3"] && ranged["offset"] == 2)
        let descending = try server.json("GET", view + "?reduce=false&descending=true&limit=2").json
        #expect(ids(descending) == ["foo:4", "foo:3"])
        #expect(try server.json("GET", view).json["rows"] == [["key": .null, "value": 5]])
        #expect(try server.json("GET", view + "?group=true").json["rows"]?.arrayValue?.count == 5)
        let keys = try server.json("POST", view + "?reduce=false", body: #"{"keys":[3,1,30]}"#).json
        #expect(ids(keys) == ["foo:3", "foo:1"])
        // A partitioned design document answers only per partition.
        let global = try server.json("GET", "/pdb/_design/v/_view/all")
        #expect(global.status == 400 && global.json == ["error": "query_parse_error",
                                                        "reason": "`partition` parameter is mandatory for queries to this view."])
        #expect(try server.json("GET", view + "?reduce=false&limit=2001").status == 400)
        // A global one (`options.partitioned: false`) answers for the whole database only.
        let globalMap = #"function(doc) { emit(doc._id, null); }"#
        #expect(try server.json("PUT", "/pdb/_design/g", body: #"{"options":{"partitioned":false},"views":{"all":{"map":"\#(globalMap)"}}}"#).status == 201)
        #expect(try server.json("GET", "/pdb/_design/g/_view/all").json["total_rows"] == 45)
        let refused = try server.json("GET", "/pdb/_partition/foo/_design/g/_view/all")
        #expect(refused.status == 400 && refused.json["reason"] == "`partition` parameter is not supported in this design doc")
        // CouchDB's checks of `options.partitioned` when the design document is saved.
        let reduce = #"function(keys, values) { return sum(values); }"#
        let jsReduce = try server.json("PUT", "/pdb/_design/mrtest", body: #"{"views":{"some":{"map":"\#(map)","reduce":"\#(reduce)"}}}"#)
        #expect(jsReduce.status == 400 && jsReduce.json == ["error": "invalid_design_doc",
                                                            "reason": "Javascript reduces not supported in partitioned view."])
        try server.createDatabase("plain")
        let notPartitioned = try server.json("PUT", "/plain/_design/p", body: #"{"options":{"partitioned":true}}"#)
        #expect(notPartitioned.status == 400
                && notPartitioned.json["reason"] == "partitioned option cannot be true in a non-partitioned database.")
    }

    @Test func partitionFindExaminesOnlyItsPartition() throws {
        defer { server.stop() }
        try fill(["foo": 5, "bar": 200])
        let found = try server.json("POST", "/pdb/_partition/foo/_find",
                                    body: #"{"selector":{"value":{"$gte":3}},"execution_stats":true}"#).json
        #expect(found["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue } == ["foo:3", "foo:4"])
        // Only the partition's rows are read, though another partition holds forty times more.
        #expect(found["execution_stats"]?["total_docs_examined"] == 5)
        let global = try server.json("POST", "/pdb/_find", body: #"{"selector":{"value":{"$gte":198}},"execution_stats":true}"#).json
        #expect(global["docs"]?.arrayValue?.count == 2 && global["execution_stats"]?["total_docs_examined"] == 205)
        let explain = try server.json("POST", "/pdb/_partition/foo/_explain", body: #"{"selector":{"value":3}}"#).json
        #expect(explain["index"]?["name"] == "_all_docs" && explain["opts"]?["partition"] == "foo")
        #expect(explain["mrargs"]?["partition"] == "foo")
        #expect(try server.json("GET", "/pdb/_partition/foo/_find").status == 404)
    }

    @Test func partitionedJSONIndexesServePartitionQueriesOnly() throws {
        defer { server.stop() }
        try fill(["foo": 30, "bar": 30])
        // An index of a partitioned database is partitioned unless asked otherwise.
        var (status, json) = try server.json("POST", "/pdb/_index", body: #"{"index":{"fields":["value"]},"ddoc":"byvalue"}"#)
        #expect(status == 200 && json["result"] == "created")
        let query = #"{"selector":{"value":{"$gte":25}},"sort":["value"],"execution_stats":true}"#
        (status, json) = try server.json("POST", "/pdb/_partition/foo/_explain", body: query)
        #expect(status == 200)
        #expect(json["index"]?["ddoc"] == "_design/byvalue" && json["index"]?["partitioned"] == true)
        #expect(json["index"]?["def"] == ["fields": [["value": "asc"]]])
        #expect(json["mrargs"]?["partition"] == "foo")
        (status, json) = try server.json("POST", "/pdb/_partition/foo/_find", body: query)
        #expect(status == 200)
        #expect(json["docs"]?.arrayValue?.compactMap { $0["_id"]?.stringValue } == (25..<30).map { "foo:\($0)" })
        #expect(json["execution_stats"]?["total_keys_examined"] == 5)
        // A global query neither uses it nor sorts without a global index.
        (status, json) = try server.json("POST", "/pdb/_explain", body: #"{"selector":{"value":{"$gte":25}}}"#)
        #expect(json["index"]?["name"] == "_all_docs")
        (status, json) = try server.json("POST", "/pdb/_find", body: query)
        #expect(status == 400 && json["error"] == "no_usable_index")
        #expect(json["reason"] == "No global index exists for this sort, try indexing by the sort fields.")
        (status, json) = try server.json("POST", "/pdb/_partition/foo/_find", body: #"{"selector":{"n":{"$gt":0}},"sort":["n"]}"#)
        #expect(status == 400)
        #expect(json["reason"] == "No partitioned index exists for this sort, try indexing by the sort fields.")
        // A global index serves global queries, and no partition query.
        (status, json) = try server.json("POST", "/pdb/_index", body: #"{"index":{"fields":["value"]},"ddoc":"global","partitioned":false}"#)
        #expect(status == 200)
        #expect(try server.json("GET", "/pdb/_design/global").json["options"] == ["partitioned": false])
        (status, json) = try server.json("POST", "/pdb/_find", body: query)
        #expect(status == 200 && json["docs"]?.arrayValue?.count == 10)
        (_, json) = try server.json("POST", "/pdb/_partition/bar/_explain", body: query)
        #expect(json["index"]?["ddoc"] == "_design/byvalue")
        (status, json) = try server.json("POST", "/pdb/_index", body: #"{"index":{"fields":["n"]},"ddoc":"global"}"#)
        #expect(status == 400 && json["error"] == "invalid_partitioned_option")
    }
}
