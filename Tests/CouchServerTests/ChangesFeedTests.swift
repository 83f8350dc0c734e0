import CouchCore
import CouchTestSupport
import Foundation
import Testing

@Suite struct ChangesFeedTests {
    let server: TestServer

    init() throws {
        server = try TestServer()
        try server.createDatabase("db")
    }

    @Test func normalFeedListsEachDocumentOnceAtItsLatestSequence() throws {
        defer { server.stop() }
        let rev = try server.put("db", "a", #"{"v":1}"#)
        _ = try server.put("db", "b", #"{"v":1}"#)
        _ = try server.put("db", "a", #"{"_rev":"\#(rev)","v":2}"#)
        let changes = try server.json("GET", "/db/_changes").json
        let results = try #require(changes["results"]?.arrayValue)
        #expect(results.map { $0["id"]?.stringValue } == ["b", "a"])
        #expect(results.map { sequenceNumber($0["seq"]) } == [2, 3])
        #expect(sequenceNumber(changes["last_seq"]) == 3)
        #expect(changes["pending"] == 0)

        let limited = try server.json("GET", "/db/_changes?limit=1").json
        #expect(limited["results"]?.arrayValue?.count == 1)
        #expect(sequenceNumber(limited["last_seq"]) == 2)
        #expect(limited["pending"] == 1)
        #expect(try server.json("GET", "/db/_changes?since=2").json["results"]?.arrayValue?.count == 1)
        #expect(try server.json("GET", "/db/_changes?since=%222-g1AAAA%22").json["results"]?.arrayValue?.count == 1)
        #expect(try server.json("GET", "/db/_changes?since=now").json["results"] == [])
        #expect(try server.json("GET", "/db/_changes?descending=true").json["results"]?[0]?["id"] == "a")
        let withDocs = try server.json("GET", "/db/_changes?include_docs=true").json
        #expect(withDocs["results"]?[1]?["doc"]?["v"] == 2)
        #expect(try server.json("GET", "/db/_changes?limit=0").json["pending"] == 2)
    }

    /// A feed's rows are written from the stored bytes when they can be: the same rows as a
    /// filter that reads every document whole writes, whatever the IDs need escaped and whatever
    /// the revisions, in the normal and the continuous feed.
    @Test func rowsFromStoredBytesAreTheRowsOfParsedDocuments() throws {
        defer { server.stop() }
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"""
            {"new_edits":false,"docs":[
              {"_id":"upper","_rev":"1-0123456789ABCDEF0123456789ABCDEF","n":1},
              {"_id":"odd","_rev":"3-a_b.C","n":2},
              {"_id":"q\"uo\\te\ttab","_rev":"1-abc","n":3},
              {"_id":"\u00e9t\u00e9","_rev":"1-def","n":4}]}
            """#).status == 201)
        _ = try server.put("db", "plain", #"{"nested":{"a":[1,"two",null]}}"#)
        let gone = try server.put("db", "gone", #"{"n":5}"#)
        _ = try server.json("DELETE", "/db/gone?rev=\(gone)")
        #expect(try server.request("PUT", "/db/attached/file.txt", headers: [("Content-Type", "text/plain")],
                                   body: "hello").status == 201)
        let everything = #"{"selector":{"_id":{"$gt":null}}}"#
        for options in ["", "include_docs=true"] {
            let stored = try #require(try server.json("GET", "/db/_changes?\(options)").json["results"]?.arrayValue)
            let parsed = try server.json("POST", "/db/_changes?filter=_selector&\(options)", body: everything).json
            #expect(stored.count == 7)
            #expect(stored == parsed["results"]?.arrayValue)
            let continuous = try server.request("GET", "/db/_changes?feed=continuous&timeout=0&\(options)").text
            let lines = try continuous.split(separator: "\n").map { try JSONValue.parse(Array($0.utf8)) }
            #expect(Array(lines.dropLast()) == stored)
        }
        let upper = try #require(try server.json("GET", "/db/_changes").json["results"]?[0])
        #expect(upper["changes"] == [["rev": "1-0123456789abcdef0123456789abcdef"]])
    }

    /// `pending` while a client pages through the feed (counted from the last page's count
    /// when it can be) is what the feed still holds after the page, through edits, deletions
    /// and purges between pages, and when a client goes back to an earlier page.
    @Test func pendingWhilePagingIsWhatTheFeedStillHolds() throws {
        defer { server.stop() }
        let documents = (0..<60).map { #"{"_id":"d\#($0)","n":\#($0)}"# }.joined(separator: ",")
        #expect(try server.json("POST", "/db/_bulk_docs", body: #"{"docs":[\#(documents)]}"#).status == 201)
        func remaining(after since: String) throws -> Int {
            try server.json("GET", "/db/_changes?since=\(since)").json["results"]?.arrayValue?.count ?? -1
        }
        func revision(_ id: String) throws -> String {
            try server.json("GET", "/db/\(id)").json["_rev"]?.stringValue ?? ""
        }
        var since = "0"
        var pages: [String] = []
        for page in 0..<12 {
            let changes = try server.json("GET", "/db/_changes?limit=7&since=\(since)").json
            let last = try #require(changes["last_seq"]?.stringValue)
            #expect(changes["pending"] == JSONValue(try remaining(after: last)), "page \(page)")
            pages.append(since)
            since = last
            switch page {
            case 2:  // edits of rows already listed and of rows still ahead
                for id in ["d1", "d40"] { _ = try server.put("db", id, #"{"_rev":"\#(try revision(id))","n":-1}"#) }
            case 4:
                #expect(try server.json("DELETE", "/db/d50?rev=\(try revision("d50"))").status == 200)
            case 6:  // purges remove rows without a new sequence
                for id in ["d2", "d55"] {
                    let purge = #"{"\#(id)":["\#(try revision(id))"]}"#
                    #expect(try server.json("POST", "/db/_purge", body: purge).status == 201)
                }
            case 8:  // back to an earlier page, then on again
                for earlier in pages.prefix(4).reversed() {
                    let changes = try server.json("GET", "/db/_changes?limit=7&since=\(earlier)").json
                    let last = try #require(changes["last_seq"]?.stringValue)
                    #expect(changes["pending"] == JSONValue(try remaining(after: last)), "from \(earlier)")
                }
            default: break
            }
        }
        #expect(try server.json("GET", "/db/_changes?since=\(since)").json["pending"] == 0)
    }

    @Test func allDocsStyleListsEveryLeafAndDeletionsAreMarked() throws {
        defer { server.stop() }
        _ = try server.json("POST", "/db/_bulk_docs", body: #"{"new_edits":false,"docs":[{"_id":"c","_rev":"1-a"},{"_id":"c","_rev":"1-b"}]}"#)
        let rev = try server.put("db", "gone", "{}")
        _ = try server.json("DELETE", "/db/gone?rev=\(rev)")
        let changes = try #require(try server.json("GET", "/db/_changes?style=all_docs").json["results"]?.arrayValue)
        #expect(changes[0]["changes"] == [["rev": "1-b"], ["rev": "1-a"]])
        #expect(changes[1]["deleted"] == true)
        let mainOnly = try #require(try server.json("GET", "/db/_changes").json["results"]?.arrayValue)
        #expect(mainOnly[0]["changes"] == [["rev": "1-b"]])
        #expect(try server.json("GET", "/db/_changes?style=odd").status == 400)
    }

    @Test func builtInFilters() throws {
        defer { server.stop() }
        _ = try server.put("db", "a", #"{"type":"x","n":1}"#)
        _ = try server.put("db", "b", #"{"type":"y","n":2}"#)
        _ = try server.put("db", "_design/d", #"{"filters":{"f":"function(doc){return true}"}}"#)
        let ids = { (json: JSONValue) in json["results"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? [] }
        #expect(ids(try server.json("GET", "/db/_changes?filter=_doc_ids&doc_ids=%5B%22b%22%5D").json) == ["b"])
        #expect(ids(try server.json("POST", "/db/_changes?filter=_doc_ids", body: #"{"doc_ids":["a"]}"#).json) == ["a"])
        #expect(ids(try server.json("GET", "/db/_changes?filter=_design").json) == ["_design/d"])
        #expect(ids(try server.json("POST", "/db/_changes?filter=_selector", body: #"{"selector":{"n":{"$gt":1}}}"#).json) == ["b"])
        #expect(try server.json("GET", "/db/_changes?filter=_selector").status == 400)
        #expect(try server.json("GET", "/db/_changes?filter=_doc_ids").status == 400)
        #expect(try server.json("GET", "/db/_changes?filter=nofilter").status == 400)
        #expect(try server.json("GET", "/db/_changes?filter=missing/f").status == 404)
        #expect(try server.json("GET", "/db/_changes?filter=d/other").status == 404)
    }

    @Test func continuousFeedDeliversLaterChangesHeartbeatsAndEndsOnTimeout() throws {
        defer { server.stop() }
        _ = try server.put("db", "before", "{}")
        let connection = try HTTPTestConnection(port: server.port)
        let head = try connection.startStreaming("GET", "/db/_changes?feed=continuous&heartbeat=100")
        #expect(head.status == 200)
        let first = try JSONValue.parse(try #require(try connection.readLine(timeout: 5)))
        #expect(first["id"] == "before")
        // Idle: heartbeats are blank lines.
        #expect(try connection.readLine(timeout: 5) == "")
        let started = Date()
        _ = try server.put("db", "after", "{}")
        var line = try connection.readLine(timeout: 5)
        while line == "" { line = try connection.readLine(timeout: 5) }
        #expect(Date().timeIntervalSince(started) < 1)
        #expect(try JSONValue.parse(try #require(line))["id"] == "after")
        connection.close()

        let timed = try HTTPTestConnection(port: server.port)
        _ = try timed.startStreaming("GET", "/db/_changes?feed=continuous&timeout=200&since=now")
        let last = try JSONValue.parse(try #require(try timed.readLine(timeout: 5)))
        #expect(sequenceNumber(last["last_seq"]) == 2)
        #expect(try timed.readLine(timeout: 5) == nil)
    }

    @Test func timeoutZeroEndsAContinuousFeedOnceCaughtUp() throws {
        defer { server.stop() }
        _ = try server.put("db", "one", "{}")
        let started = Date()
        let response = try server.request("GET", "/db/_changes?feed=continuous&timeout=0")
        let lines = response.text.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(sequenceNumber(try JSONValue.parse(String(lines[1]))["last_seq"]) == 1)
        #expect(Date().timeIntervalSince(started) < 2)
    }

    @Test func liveIsAnotherNameForContinuous() throws {
        defer { server.stop() }
        _ = try server.put("db", "one", "{}")
        let lines = try server.request("GET", "/db/_changes?feed=live&timeout=0").text.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(try JSONValue.parse(String(lines[0]))["id"] == "one")
        #expect(sequenceNumber(try JSONValue.parse(String(lines[1]))["last_seq"]) == 1)
        let refused = try server.json("GET", "/db/_changes?feed=lively")
        #expect(refused.status == 400)
        #expect(refused.json["reason"] == "Supported `feed` types: normal, continuous, live, longpoll, eventsource")
    }

    @Test func longpollWaitsForTheNextChange() throws {
        defer { server.stop() }
        _ = try server.put("db", "one", "{}")
        let connection = try HTTPTestConnection(port: server.port)
        _ = try connection.startStreaming("GET", "/db/_changes?feed=longpoll&since=1&heartbeat=50")
        Thread.sleep(forTimeInterval: 0.2)
        _ = try server.put("db", "two", "{}")
        let body = try JSONValue.parse(connection.readToEnd(timeout: 5))
        #expect(body["results"]?.arrayValue?.map { $0["id"]?.stringValue } == ["two"])
        #expect(sequenceNumber(body["last_seq"]) == 2)

        let immediate = try server.json("GET", "/db/_changes?feed=longpoll&since=0").json
        #expect(immediate["results"]?.arrayValue?.count == 2)
        let timedOut = try server.json("GET", "/db/_changes?feed=longpoll&since=now&timeout=100").json
        #expect(timedOut["results"] == [])
    }

    @Test func eventSourceFeedSendsIDLines() throws {
        defer { server.stop() }
        _ = try server.put("db", "doc", "{}")
        let connection = try HTTPTestConnection(port: server.port)
        let head = try connection.startStreaming("GET", "/db/_changes?feed=eventsource&timeout=300")
        #expect(head.header("Content-Type") == "text/event-stream")
        let data = try #require(try connection.readLine(timeout: 5))
        #expect(data.hasPrefix("data: "))
        let row = try JSONValue.parse(String(data.dropFirst(6)))
        #expect(row["id"] == "doc")
        let seq = try #require(row["seq"]?.stringValue)
        #expect(sequenceNumber(row["seq"]) == 1)
        #expect(try connection.readLine(timeout: 5) == "id: \(seq)")
    }

    @Test func feedEndsWhenTheDatabaseIsDeleted() throws {
        defer { server.stop() }
        let connection = try HTTPTestConnection(port: server.port)
        _ = try connection.startStreaming("GET", "/db/_changes?feed=continuous&heartbeat=5000")
        Thread.sleep(forTimeInterval: 0.1)
        _ = try server.json("DELETE", "/db")
        let rest = String(decoding: try connection.readToEnd(timeout: 5), as: UTF8.self)
        #expect(rest.contains("last_seq"))
    }

    /// A waiting feed gives its idle send buffer back to the system and keeps only a small
    /// block for clients that cannot take chunks (HTTP/1.0): rows far larger than either
    /// still arrive whole, after each wait.
    @Test func rowsLargerThanAFeedsBuffersArriveWholeAfterWaiting() throws {
        defer { server.stop() }
        let text = String(repeating: "0123456789abcdef", count: 8 * 1024)
        let connection = try HTTPTestConnection(port: server.port)
        defer { connection.close() }
        #expect(try connection.startStreaming("GET", "/db/_changes?feed=continuous&include_docs=true&since=0").status == 200)
        for index in 0..<2 {
            Thread.sleep(forTimeInterval: 0.1)
            _ = try server.put("db", "big\(index)", #"{"text":"\#(text)","n":\#(index)}"#)
            let row = try JSONValue.parse(try #require(try connection.readLine(timeout: 10)))
            #expect(row["id"]?.stringValue == "big\(index)")
            #expect(row["doc"]?["text"]?.stringValue == text)
            #expect(row["doc"]?["n"]?.intValue == index)
        }

        let old = try HTTPTestConnection(port: server.port)
        defer { old.close() }
        try old.writeRaw(Array("GET /db/_changes?feed=longpoll&include_docs=true&since=2 HTTP/1.0\r\n\r\n".utf8))
        Thread.sleep(forTimeInterval: 0.1)
        _ = try server.put("db", "big2", #"{"text":"\#(text)","n":2}"#)
        let response = try old.readResponse()
        #expect(response.status == 200)
        let results = try #require(try JSONValue.parse(response.body)["results"]?.arrayValue)
        #expect(results.map { $0["id"]?.stringValue } == ["big2"])
        #expect(results.first?["doc"]?["text"]?.stringValue == text)
    }

    @Test func clientsThatLeaveReleaseTheirFeeds() throws {
        defer { server.stop() }
        for _ in 0..<20 {
            let connection = try HTTPTestConnection(port: server.port)
            _ = try connection.startStreaming("GET", "/db/_changes?feed=continuous&heartbeat=50")
            connection.close()
        }
        var open = server.listener.openStreamCount
        for _ in 0..<100 where open > 0 {
            Thread.sleep(forTimeInterval: 0.05)
            open = server.listener.openStreamCount
        }
        #expect(open == 0)
    }
}

/// Sequences are CouchDB 3's opaque strings on every route, and every `since` form works.
@Suite struct SequenceFormTests {
    let server: TestServer

    init() throws {
        server = try TestServer()
        try server.createDatabase("db")
    }

    @Test func everyRouteWritesStringsAndEverySinceFormReadsBack() throws {
        defer { server.stop() }
        for id in ["a", "b", "c"] { _ = try server.put("db", id, "{}") }
        let info = try server.json("GET", "/db").json
        let updateSeq = try #require(info["update_seq"]?.stringValue)
        #expect(updateSeq.hasPrefix("3-") && updateSeq.count > 10)
        #expect(sequenceNumber(info["purge_seq"]) == 0)
        #expect(try server.json("GET", "/db/_all_docs?update_seq=true&limit=0").json["update_seq"]?.stringValue == updateSeq)
        let changes = try server.json("GET", "/db/_changes").json
        #expect(changes["last_seq"]?.stringValue == updateSeq)
        let rows = try #require(changes["results"]?.arrayValue)
        let second = try #require(rows[1]["seq"]?.stringValue)
        #expect(second.hasPrefix("2-"))
        // Back as `since`: the string, quoted or not, a bare number, a CouchDB cluster's string, `now`.
        let quoted = "%22" + second + "%22"
        for since in [second, quoted, "2", "2-g1AAAAFTeJzLYWBgYMlgTmFQSElKzi9KdUhJMtbLTS3KLElMytFLzskvTUnNSy0uyi8"] {
            let after = try server.json("GET", "/db/_changes?since=\(since)").json
            #expect(after["results"]?.arrayValue?.map { $0["id"] } == ["c"], "since=\(since)")
        }
        #expect(try server.json("GET", "/db/_changes?since=now").json["results"]?.arrayValue?.isEmpty == true)
        let longpoll = try server.json("GET", "/db/_changes?feed=longpoll&since=1").json
        #expect(sequenceNumber(longpoll["last_seq"]) == 3)
        #expect(try server.json("GET", "/db/_changes?since=junk").status == 400)
    }
}
