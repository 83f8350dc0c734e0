import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Answers Apache CouchDB's replicator depends on when it pulls from or pushes to Couchette,
/// asked as it asks them (found wanting by replicating with a real CouchDB 3.4.3).
@Suite struct CouchDBReplicatorAnswersTests {
    /// CouchDB pulls a document with attachments by `open_revs` as `multipart/mixed` without
    /// `attachments=true`: every body must follow (a stub would be one the target lacks), but
    /// those the target has by `atts_since`.
    @Test func openRevisionsAsMultipartCarryEveryBodyButThoseTheTargetHas() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let first = try server.put("db", "doc", #"""
            {"_attachments":{"a.bin":{"content_type":"application/octet-stream","data":"AAEC"},
             "b.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}
            """#)
        let second = try server.put("db", "doc", #"""
            {"_rev":"\#(first)","_attachments":{"a.bin":{"stub":true},"b.txt":{"stub":true},
             "c.bin":{"content_type":"application/octet-stream","data":"AwQF"}}}
            """#)
        let query = "/db/doc?revs=true&latest=true&open_revs=%5B%22\(second)%22%5D"
        let all = try MultipartParts(try server.request("GET", query, headers: [("Accept", "multipart/mixed")]))
        let nested = try #require(all.bodies.first)
        for name in ["a.bin", "b.txt", "c.bin"] { #expect(nested.contains("filename=\"\(name)\""), "\(name)") }
        #expect(nested.contains(#""b.txt":{"content_type":"text/plain","revpos":1,"digest":"#))
        #expect(nested.contains(#""follows":true,"encoding":"gzip""#))

        let since = try server.request("GET", query + "&atts_since=%5B%22\(first)%22%5D", headers: [("Accept", "multipart/mixed")])
        let sinceBody = since.text
        #expect(sinceBody.contains("filename=\"c.bin\""))
        #expect(!sinceBody.contains("filename=\"a.bin\""))
        #expect(sinceBody.contains(#""a.bin":{"content_type":"application/octet-stream","revpos":1,"digest":"md5-"#))
        #expect(sinceBody.contains(#""length":3,"stub":true"#))

        // As JSON, stubs unless asked for; JSON too for a lone `*/*` (curl's) or a weight of 0.
        let json = try server.json("GET", query).json
        #expect(json[0]?["ok"]?["_attachments"]?["a.bin"]?["stub"] == true)
        for accept in ["*/*", "multipart/mixed;q=0, application/json"] {
            #expect(try server.request("GET", query, headers: [("Accept", accept)]).header("Content-Type") == "application/json", "\(accept)")
        }
        // Multipart for `multipart/*`, or `*/*` beside other types, as CouchDB reads Accept.
        for accept in ["multipart/*", "multipart/related,*/*;"] {
            let answer = try server.request("GET", query, headers: [("Accept", accept)])
            #expect(answer.header("Content-Type")?.hasPrefix("multipart/mixed") == true, "\(accept)")
        }

        // _bulk_get as multipart carries every body too.
        let bulk = try server.request("POST", "/db/_bulk_get?revs=true", headers: [("Accept", "multipart/mixed")],
                                      body: #"{"docs":[{"id":"doc","rev":"\#(second)"}]}"#)
        for name in ["a.bin", "b.txt", "c.bin"] { #expect(bulk.text.contains("filename=\"\(name)\""), "\(name)") }
    }

    /// A replicated write that names no `revpos` stores 0, as CouchDB does; the body is still
    /// sent to a peer that has no ancestor of the revision.
    @Test func attachmentsReplicatedWithoutRevposAreStoredAtZeroAndStillSent() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let write = try server.json("POST", "/db/_bulk_docs", body: #"""
            {"new_edits":false,"docs":[{"_id":"r","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},
             "_attachments":{"x.bin":{"content_type":"application/octet-stream","data":"AAEC"}}}]}
            """#)
        #expect(write.json == [])
        #expect(try server.json("GET", "/db/r").json["_attachments"]?["x.bin"]?["revpos"] == 0)
        let mixed = try server.request("GET", "/db/r?revs=true&open_revs=%5B%222-b%22%5D&atts_since=%5B%221-z%22%5D",
                                       headers: [("Accept", "multipart/mixed")])
        #expect(mixed.text.contains("filename=\"x.bin\""))
        let inline = try server.json("POST", "/db/_bulk_get?attachments=true", body: #"{"docs":[{"id":"r","rev":"2-b"}]}"#)
        #expect(inline.json["results"]?[0]?["docs"]?[0]?["ok"]?["_attachments"]?["x.bin"]?["data"] == "AAEC")
    }

    /// From its second checkpoint on, CouchDB's replicator writes `_local` documents with
    /// `"_revisions": {"start": 0, "ids": ["1"]}`: only the form of `_revisions` is checked.
    @Test func localDocumentsTakeCheckpointsAsCouchDBsReplicatorWritesThem() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let checkpoint = #"{"session_id":"s","source_last_seq":"5-x","history":[]}"#
        #expect(try server.json("PUT", "/db/_local/rep", body: checkpoint).json["rev"] == "0-1")
        let second = try server.json("PUT", "/db/_local/rep", body: #"""
            {"_id":"_local/rep","_rev":"0-1","_revisions":{"start":0,"ids":["1"]},"session_id":"s","source_last_seq":"9-y"}
            """#)
        #expect(second.status == 201)
        #expect(second.json["rev"] == "0-2")
        #expect(try server.json("GET", "/db/_local/rep").json["source_last_seq"] == "9-y")
        // In _bulk_docs too.
        let bulk = try server.json("POST", "/db/_bulk_docs", body: #"""
            {"docs":[{"_revisions":{"start":0,"ids":["2"]},"_id":"_local/rep","_rev":"0-2","n":1}]}
            """#)
        #expect(bulk.json[0]?["rev"] == "0-3")

        for (revisions, reason) in [(#""x""#, "_revisions must be an object with integer 'start' and array 'ids'"),
                                    (#"{"start":"0","ids":["1"]}"#, "_revisions.start isn't an integer."),
                                    (#"{"start":0,"ids":"1"}"#, "_revisions.ids isn't a array."),
                                    (#"{"start":0,"ids":[1]}"#, "RevId isn't a string")] {
            let refused = try server.json("PUT", "/db/_local/rep", body: #"{"_rev":"0-3","_revisions":\#(revisions)}"#)
            #expect(refused.status == 400, "\(revisions)")
            #expect(refused.json["reason"]?.stringValue == reason, "\(revisions)")
        }
        // An ordinary document still needs a history its tree can hold.
        let ordinary = try server.json("PUT", "/db/doc?new_edits=false", body: #"{"_rev":"0-1","_revisions":{"start":0,"ids":["1"]}}"#)
        #expect(ordinary.status == 400)
    }

    @Test func localDocumentsHaveNoAttachmentPaths() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        _ = try server.json("PUT", "/db/_local/doc", body: "{}")
        for method in ["GET", "PUT", "DELETE"] {
            let answer = try server.json(method, "/db/_local/doc/att.txt", body: method == "PUT" ? "{}" : nil)
            #expect(answer.status == 400, "\(method)")
            #expect(answer.json == ["error": "bad_request", "reason": "_local documents do not accept attachments."], "\(method)")
        }
        let noID = try server.json("GET", "/db/_local")
        #expect(noID.status == 400)
        #expect(noID.json["reason"] == "Invalid _local document id.")
        // An ID with a slash, written %2F, is still one document.
        #expect(try server.json("PUT", "/db/_local/a%2Fb", body: "{}").status == 201)
        #expect(try server.json("GET", "/db/_local/a%2Fb").json["_id"] == "_local/a/b")
    }
}
