import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Request forms and headers CouchDB 3 answers (and the bugs its own integration tests
/// found here), each over real HTTP with CouchDB's status, headers and body.
@Suite struct RequestFormsTests {
    let server: TestServer
    var base: String { "127.0.0.1:\(server.port)" }

    init() throws {
        server = try TestServer()
        try server.createDatabase("db")
    }

    @Test func methodOverrideOnPostOnly() throws {
        defer { server.stop() }
        let put = try server.json("POST", "/db/fnord", headers: [("X-HTTP-Method-Override", "PUT")], body: #"{"bob":"connie"}"#)
        #expect(put.status == 201)
        #expect(try server.json("GET", "/db/fnord").json["bob"] == "connie")
        let rev = put.json["rev"]?.stringValue ?? ""
        let delete = try server.json("POST", "/db/fnord?rev=\(rev)", headers: [("X-HTTP-Method-Override", "DELETE")])
        #expect(delete.status == 200)
        #expect(try server.json("GET", "/db/fnord").status == 404)
        // Ignored unless the real method is POST.
        let get = try server.request("GET", "/db/fnord2", headers: [("X-HTTP-Method-Override", "PUT")], body: #"{"bob":"connie"}"#)
        #expect(get.status == 404)
    }

    @Test func everyAnswerHasOneRequestIDAndOneCacheControl() throws {
        defer { server.stop() }
        let first = try server.request("GET", "/db")
        let second = try server.request("GET", "/_up")
        let missing = try server.request("GET", "/nodb")
        for response in [first, second, missing] {
            let ids = response.headers.filter { $0.name.lowercased() == "x-couch-request-id" }.map(\.value)
            #expect(ids.count == 1 && ids[0].count == 10 && ids[0].allSatisfy(\.isHexDigit))
            #expect(response.headers.filter { $0.name.lowercased() == "cache-control" }.count == 1)
        }
        #expect(first.header("X-Couch-Request-ID") != second.header("X-Couch-Request-ID"))
        // `/_uuids` sets its own Cache-Control: still one header.
        let session = try server.request("GET", "/_uuids")
        #expect(session.headers.filter { $0.name.lowercased() == "cache-control" }.map(\.value) == ["must-revalidate, no-cache"])
    }

    @Test func locationIsAbsoluteFromHostOrForwardedHostWithNamesEncoded() throws {
        defer { server.stop() }
        let put = try server.request("PUT", "/db/test", body: "{}")
        #expect(put.header("Location") == "http://\(base)/db/test")
        let forwarded = try server.request("PUT", "/db/test2", headers: [("X-Forwarded-Host", "mysite.com")], body: "{}")
        #expect(forwarded.header("Location") == "http://mysite.com/db/test2")
        let secure = try server.request("PUT", "/db/test3", headers: [("X-Forwarded-Proto", "https")], body: "{}")
        #expect(secure.header("Location") == "https://\(base)/db/test3")
        // COUCHDB-708: newlines in names, and a literal `%0A` in a posted `_id`.
        let attachment = try server.request("PUT", "/db/docid%0A/attachment.txt", headers: [("Content-Type", "text/plain")], body: "x")
        #expect(attachment.header("Location") == "http://\(base)/db/docid%0A/attachment.txt")
        let posted = try server.request("POST", "/db", body: #"{"_id":"docidtestpost%0A"}"#)
        #expect(posted.header("Location") == "http://\(base)/db/docidtestpost%250A")
        // The database name stays encoded.
        let created = try server.request("PUT", "/a%2Fb")
        #expect(created.status == 201 && created.header("Location") == "http://\(base)/a%2Fb")
    }

    @Test func weakAndListedIfNoneMatch() throws {
        defer { server.stop() }
        let rev = try server.put("db", "doc", #"{"a":1}"#)
        #expect(try server.request("GET", "/db/doc", headers: [("If-None-Match", "W/\"\(rev)\"")]).status == 304)
        #expect(try server.request("GET", "/db/doc", headers: [("If-None-Match", "\"1-x\", \"\(rev)\"")]).status == 304)
        #expect(try server.request("GET", "/db/doc", headers: [("If-None-Match", "W/\"1-x\"")]).status == 200)
        let attached = try server.request("PUT", "/db/doc/a.txt?rev=\(rev)", headers: [("Content-Type", "text/plain")], body: "hello")
        #expect(attached.status == 201)
        let etag = try #require(try server.request("GET", "/db/doc/a.txt").header("ETag"))
        #expect(try server.request("GET", "/db/doc/a.txt", headers: [("If-None-Match", "W/" + etag)]).status == 304)
    }

    @Test func formUploadAddsAttachmentsAndOtherFormsAre415() throws {
        defer { server.stop() }
        let rev = try server.put("db", "form_data_doc", #"{"_id":"form-data-doc"}"#)
        let body = "------TF\r\nContent-Disposition: form-data; name=\"_rev\"\r\n\r\n\(rev)\r\n"
            + "------TF\r\nContent-Disposition: form-data; name=\"_attachments\"; filename=\"file.txt\"\r\n"
            + "Content-Type: text/plain\r\n\r\ncontents of file.txt\r\n\r\n------TF--"
        let form = try server.json("POST", "/db/form_data_doc",
                                   headers: [("Referer", "http://\(base)"), ("Content-Type", "multipart/form-data; boundary=----TF")],
                                   body: body)
        #expect(form.status == 201)
        #expect(form.json["ok"] == true && form.json["id"] == "form_data_doc")
        let doc = try server.json("GET", "/db/form_data_doc").json
        #expect(doc["_attachments"]?["file.txt"]?["length"] == 22)
        #expect(doc["_attachments"]?["file.txt"]?["content_type"] == "text/plain")
        #expect(try server.request("GET", "/db/form_data_doc/file.txt").text == "contents of file.txt\r\n")

        let urlencoded = try server.json("POST", "/db/baz", headers: [("Referer", "http://\(base)"),
                                                                      ("Content-Type", "application/x-www-form-urlencoded")],
                                         body: "a=b")
        #expect(urlencoded.status == 415)
        #expect(urlencoded.json == ["error": "bad_content_type", "reason": "Content-Type must be multipart/form-data"])
        let noReferer = try server.json("POST", "/db/baz", headers: [("Content-Type", "multipart/form-data; boundary=x")], body: "--x--")
        #expect(noReferer.status == 400 && noReferer.json["reason"] == "Referer header required.")
    }

    @Test func allOrNothingWritesNothingAndAnswers417() throws {
        defer { server.stop() }
        let rev = try server.put("db", "taken", "{}")
        let body = #"{"all_or_nothing":true,"docs":[{"_id":"new","v":1},{"_id":"taken","_rev":"1-0000"}]}"#
        let (status, json) = try server.json("POST", "/db/_bulk_docs", body: body)
        #expect(status == 417)
        #expect(json == [["id": "taken", "rev": "1-0000", "error": "conflict", "reason": "Document update conflict."]])
        #expect(try server.json("GET", "/db/new").status == 404)
        let good = #"{"all_or_nothing":true,"docs":[{"_id":"new","v":1},{"_id":"taken","_rev":"\#(rev)"}]}"#
        let written = try server.json("POST", "/db/_bulk_docs", body: good)
        #expect(written.status == 201 && written.json.arrayValue?.count == 2)
        #expect(try server.json("GET", "/db/new").status == 200)
    }

    @Test func writeQuorumAboveOneCopyAndBatchAre202() throws {
        defer { server.stop() }
        let put = try server.request("PUT", "/db/a?w=3", body: "{}")
        #expect(put.status == 202 && put.header("ETag") != nil)
        let rev = try JSONValue.parse(put.body)["rev"]?.stringValue ?? ""
        #expect(try server.request("PUT", "/db/b?w=1", body: "{}").status == 201)
        #expect(try server.request("DELETE", "/db/a?w=2&rev=\(rev)").status == 202)
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"w":3,"docs":[{"_id":"c"}]}"#).status == 202)
        #expect(try server.request("GET", "/db/b?r=3").status == 200)
        // batch=ok: 202 whatever becomes of the write, a conflict included.
        let batch = try server.json("PUT", "/db/b?batch=ok", body: "{}")
        #expect(batch.status == 202 && batch.json == ["ok": true, "id": "b"])
        #expect(try server.json("GET", "/db/b").json["_rev"]?.stringValue?.hasPrefix("1-") == true)
    }

    @Test func jsonpOnlyWhenAllowed() throws {
        defer { server.stop() }
        _ = try server.put("db", "0", #"{"a":0}"#)
        let off = try server.request("GET", "/db/0?callback=jsonp_no_chunk")
        #expect(off.status == 200 && off.header("Content-Type") == "application/json")
        var configuration = ServerConfiguration.testing()
        configuration.allowJSONP = true
        let allowing = try TestServer(configuration: configuration)
        defer { allowing.stop() }
        try allowing.createDatabase("db")
        _ = try allowing.put("db", "0", #"{"a":0}"#)
        let wrapped = try allowing.request("GET", "/db/0?callback=jsonp_no_chunk")
        #expect(wrapped.status == 200 && wrapped.header("Content-Type") == "application/javascript")
        #expect(wrapped.text.hasPrefix("/* CouchDB */jsonp_no_chunk({\"_id\":\"0\"") && wrapped.text.hasSuffix(");\n"))
        let changes = try allowing.request("GET", "/db/_changes?callback=cb")
        #expect(changes.header("Content-Type") == "application/javascript")
        let inner = changes.text.dropFirst("/* CouchDB */cb(".count).dropLast(3)
        #expect(try JSONValue.parse(Array(inner.utf8))["results"]?.arrayValue?.count == 1)
        #expect(try allowing.request("GET", "/db/0?callback=jsonp_no_chunk%22").status == 400)
    }

    @Test func reasonsWordedAsCouchDB() throws {
        defer { server.stop() }
        let rev = try server.put("db", "bin_doc", #"{"_attachments":{"foo.txt":{"content_type":"text/plain","data":"aGVsbG8="}}}"#)
        let dbRev = try server.json("DELETE", "/db?rev=1-x")
        #expect(dbRev.json["reason"] == "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document instead?")
        let negative = try server.json("GET", "/db/_changes?feed=continuous&heartbeat=-1000")
        #expect(negative.status == 400 && negative.json["reason"] == "The heartbeat value should be a positive integer (in milliseconds).")
        let word = try server.json("GET", "/db/_changes?feed=continuous&heartbeat=a1000")
        #expect(word.status == 400 && word.json["reason"] == "Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
        let keys = try server.json("POST", "/db/_all_docs", body: #"{"keys":"x"}"#)
        #expect(keys.status == 400 && keys.json["reason"] == "`keys` body member must be an array.")
        let mismatch = try server.json("PUT", "/db/bin_doc?rev=\(rev)", headers: [("If-Match", "\"2-abc\"")], body: "{}")
        #expect(mismatch.json == ["error": "bad_request", "reason": "Document rev and etag have different values"])
        #expect(try server.request("DELETE", "/db/bin_doc/foo.txt").status == 409)
        let garbage = try server.json("DELETE", "/db/bin_doc/foo.txt?rev=4-garbage")
        #expect(garbage.status == 409 && garbage.json == ["error": "not_found", "reason": "missing_rev"])
        let absent = try server.json("DELETE", "/db/bin_doc/notexisting.txt?rev=\(rev)")
        #expect(absent.status == 404 && absent.json["reason"] == "Document is missing attachment")
        let deleted = try server.request("DELETE", "/db/bin_doc/foo.txt?rev=\(rev)")
        #expect(deleted.status == 200 && deleted.header("Location") == nil)
        let copy = try server.json("COPY", "/db/bin_doc", headers: [("Destination", "http://\(base)/db/dst")])
        #expect(copy.status == 400 && copy.json["reason"] == "Destination URL must be relative.")
    }

    @Test func listingsHonourBodyOptionsAndCountTheirOwnRows() throws {
        defer { server.stop() }
        for id in ["a", "b", "c", "_design/x", "_design/y"] { _ = try server.put("db", id, "{}") }
        let posted = try server.json("POST", "/db/_all_docs", body: #"{"keys":["a","b","c"],"limit":2}"#).json
        #expect(posted["rows"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["a", "b"])
        // The query string wins over the body.
        let both = try server.json("POST", "/db/_all_docs?limit=0", body: #"{"keys":["a","b"],"limit":2}"#).json
        #expect(both["rows"] == [])
        let design = try server.json("GET", "/db/_design_docs").json
        #expect(design["total_rows"] == 2 && design["rows"]?.arrayValue?.count == 2)
        let designPosted = try server.json("POST", "/db/_design_docs", body: #"{"keys":["_design/x","_design/y"],"limit":1}"#).json
        #expect(designPosted["rows"]?.arrayValue?.count == 1 && designPosted["total_rows"] == 2)
    }

    @Test func wholeRangeIs200AndThreeFollowingPartsAreMatched() throws {
        defer { server.stop() }
        let rev = try server.put("db", "r", "{}")
        _ = try server.request("PUT", "/db/r/t.txt?rev=\(rev)", headers: [("Content-Type", "application/octet-stream")], body: "hello world")
        let whole = try server.request("GET", "/db/r/t.txt", headers: [("Range", "bytes=0-")])
        #expect(whole.status == 200 && whole.text == "hello world" && whole.header("Content-Range") == nil)
        let part = try server.request("GET", "/db/r/t.txt", headers: [("Range", "bytes=1-")])
        #expect(part.status == 206 && part.text == "ello world")
        // Parts without headers, one per `follows` attachment, in order.
        var body = "--abc\r\nContent-Type: application/json\r\n\r\n"
            + #"{"_attachments":{"a.txt":{"follows":true,"content_type":"text/plain","length":3},"#
            + #""b.txt":{"follows":true,"content_type":"text/plain","length":3},"#
            + #""c.txt":{"follows":true,"content_type":"text/plain","length":3}}}"#
        for content in ["aaa", "bbb", "ccc"] { body += "\r\n--abc\r\n\r\n" + content }
        body += "\r\n--abc--"
        let put = try server.request("PUT", "/db/mp", headers: [("Content-Type", "multipart/related; boundary=abc")], body: body)
        #expect(put.status == 201)
        for (name, content) in [("a.txt", "aaa"), ("b.txt", "bbb"), ("c.txt", "ccc")] {
            #expect(try server.request("GET", "/db/mp/\(name)").text == content)
        }
    }

    @Test func loweringRevsLimitStemsOnTheNextUpdate() throws {
        defer { server.stop() }
        var rev = try server.put("db", "d", #"{"v":0}"#)
        for value in 1...4 { rev = try server.put("db", "d?rev=\(rev)", #"{"v":\#(value)}"#) }
        #expect(try server.json("PUT", "/db/_revs_limit", body: "2").status == 200)
        _ = try server.put("db", "d?rev=\(rev)", #"{"v":5}"#)
        #expect(try server.json("GET", "/db/d?revs=true").json["_revisions"]?["ids"]?.arrayValue?.count == 2)
    }

    @Test func usersDatabaseHasItsAuthDesignDocument() throws {
        defer { server.stop() }
        #expect(try server.request("PUT", "/_users").status == 201)
        let auth = try server.json("GET", "/_users/_design/_auth")
        #expect(auth.status == 200 && auth.json["language"] == "javascript")
        #expect(auth.json["validate_doc_update"]?.stringValue != nil)
        // Sign-up still works beside it.
        let signUp = try server.json("PUT", "/_users/org.couchdb.user:joe",
                                     body: #"{"name":"joe","password":"pw","roles":[],"type":"user"}"#)
        #expect(signUp.status == 201)
    }

    @Test func compactionLeavesActiveSizeBelowTheFileSize() throws {
        defer { server.stop() }
        let padding = String(repeating: "x", count: 2000)
        let docs = (0..<40).map { #"{"_id":"d\#($0)","pad":"\#(padding)"}"# }.joined(separator: ",")
        let written = try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(docs)]}"#).json.arrayValue ?? []
        let deletions = written.compactMap { row -> String? in
            guard let id = row["id"]?.stringValue, let rev = row["rev"]?.stringValue else { return nil }
            return #"{"_id":"\#(id)","_rev":"\#(rev)","_deleted":true}"#
        }
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(deletions.joined(separator: ","))]}"#).status == 201)
        let before = try server.json("GET", "/db").json["sizes"]
        #expect(try server.json("POST", "/db/_compact", headers: [("Content-Type", "application/json")]).status == 202)
        let deadline = Date().addingTimeInterval(60)
        // Compaction runs in the background: wait until it has run and finished.
        let activeBefore = before?["active"]?.intValue ?? 0
        var info = try server.json("GET", "/db").json
        while info["compact_running"] == true || (info["sizes"]?["active"]?.intValue ?? 0) >= activeBefore, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            info = try server.json("GET", "/db").json
        }
        let active = info["sizes"]?["active"]?.intValue ?? 0, file = info["sizes"]?["file"]?.intValue ?? 0
        #expect(info["compact_running"] == false)
        #expect(active > 0 && active < file)
        #expect(active < activeBefore)
    }
}
