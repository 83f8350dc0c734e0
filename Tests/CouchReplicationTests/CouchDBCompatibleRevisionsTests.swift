import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// A PouchDB-style push whose documents carry a `_rev` that disagrees with `_revisions`
/// (`_revisions` wins, as in CouchDB), replicated on by Couchette's replicator; then the same
/// edit made on both servers gets the same revision ID, so replicating back makes no conflict.
@Suite(.serialized) struct CouchDBCompatibleRevisionsTests {
    @Test func disagreeingRevAndRevisionsReplicateAndTheSameEditMakesNoConflict() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        defer { a.stop(); b.stop() }
        try await a.call("PUT", "/pushed")
        try await b.call("PUT", "/copy")
        // As PouchDB pushes: _revs_diff, then _bulk_docs with new_edits=false.
        let diff = try await a.call("POST", "/pushed/_revs_diff", body: ["doc": ["2-bbb"]]).json
        #expect(diff["doc"]?["missing"] == ["2-bbb"])
        try await a.putDocuments("pushed", [
            ["_id": "doc", "_rev": "1-aaa", "_revisions": ["start": 2, "ids": ["bbb", "aaa"]], "v": 2],
        ], newEdits: false)
        let (status, result) = try await b.replicate(["source": JSONValue(a.url + "/pushed"), "target": "copy"])
        #expect(status == 200, "\(result.serializedString())")
        #expect(result["ok"] == true)
        #expect(try await a.revisionTrees("pushed") == b.revisionTrees("copy"))
        #expect(try await b.call("GET", "/copy/doc").json["_rev"] == "2-bbb")

        let here = try await a.call("PUT", "/pushed/doc", body: ["_rev": "2-bbb", "v": 3]).json["rev"]
        let there = try await b.call("PUT", "/copy/doc", body: ["_rev": "2-bbb", "v": 3]).json["rev"]
        #expect(here != nil && here == there)
        let back = try await b.replicate(["source": "copy", "target": JSONValue(a.url + "/pushed")])
        #expect(back.json["ok"] == true)
        let conflicts = try await a.call("GET", "/pushed/doc?conflicts=true").json
        #expect(conflicts["_conflicts"] == nil)
    }
}
