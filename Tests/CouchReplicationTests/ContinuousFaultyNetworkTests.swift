import CouchCore
import CouchReplication
import CouchTestSupport
import Foundation
import Testing

/// Continuous replications through a network that drops, resets, fails (500, 502, 503, 429),
/// cuts, stalls, trickles and reorders requests, the change feed included, while documents with
/// attachments, conflicts and deletions are written on the source: each ends with identical
/// revision trees and attachment bodies and no document counted as a write failure. And a
/// continuous job whose peer goes away (connections refused) and comes back catches up.
@Suite(.serialized) struct ContinuousFaultyNetworkTests {
    static let faults = FaultyProxy.Faults(dropBefore: 0.03, dropAfter: 0.03, serverError: 0.02, busy: 0.04, reset: 0.03,
                                           truncate: 0.05, stall: 0.02, trickle: 0.05, reorder: 0.05,
                                           faultyFeeds: true)
    /// A stalled request is abandoned after 2 s without a byte (the feed's heartbeat comes
    /// every 666 ms).
    static let settings: JSONObject = ["continuous": true, "worker_batch_size": 10, "retries_per_request": 10,
                                       "connection_timeout": 2000]

    /// Rounds of writes on the source while the job runs: new documents with attachments,
    /// new attachments on older ones, conflicting branches and deletions.
    private func write(on server: TestServer, _ database: String, rounds: Range<Int>) async throws {
        var generator = SplitMix(seed: 99 &+ UInt64(rounds.lowerBound))
        for round in rounds {
            var documents: [JSONValue] = []
            for index in 0..<12 {
                let id = "r\(round)-\(index)"
                var document: JSONObject = ["_id": JSONValue(id), "round": JSONValue(round)]
                if index % 3 == 0 {
                    let data = Base64.encode((0..<(index * 500 + 10)).map { _ in UInt8.random(in: 0...255, using: &generator) })
                    document["_attachments"] = ["inline.bin": ["content_type": "application/octet-stream", "data": JSONValue(data)]]
                        as JSONValue
                }
                documents.append(.object(document))
            }
            try await server.putDocuments(database, documents)
            // A standalone upload (up to 60 KB) on an earlier document.
            let target = "r\(round)-1"
            let rev = try #require(try await server.call("GET", "/\(database)/\(target)").json["_rev"]?.stringValue)
            let size = Int.random(in: 1...60_000, using: &generator)
            let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let uploaded = try await offPool {
                try httpRequest(port: server.port, "PUT", "/\(database)/\(target)/file.bin?rev=\(rev)",
                                headers: [("Content-Type", "application/octet-stream")], body: bytes)
            }
            #expect(uploaded.status == 201)
            // A conflicting branch (with an attachment) and a deletion.
            try await server.putDocuments(database, [
                ["_id": JSONValue("r\(round)-2"), "_rev": JSONValue("2-c0ffee\(round)"), "_revisions": ["start": 2, "ids": [JSONValue("c0ffee\(round)"), JSONValue("b0b")]],
                 "branch": true, "_attachments": ["conflict.txt": ["content_type": "text/plain", "data": "Y29uZmxpY3Q="]]],
            ], newEdits: false)
            let deleted = "r\(round)-4"
            let deletedRev = try #require(try await server.call("GET", "/\(database)/\(deleted)").json["_rev"]?.stringValue)
            try await server.call("DELETE", "/\(database)/\(deleted)?rev=\(deletedRev)")
            try await Task.sleep(nanoseconds: 150_000_000)
        }
    }

    /// Every document's leaves (revisions and deletion), as `_changes?style=all_docs` lists them.
    private func leaves(_ server: TestServer, _ database: String) async throws -> [String: JSONValue] {
        var leaves: [String: JSONValue] = [:]
        for row in try await server.call("GET", "/\(database)/_changes?style=all_docs").json["results"]?.arrayValue ?? [] {
            guard let id = row["id"]?.stringValue else { continue }
            let revisions = (row["changes"]?.arrayValue ?? []).compactMap { $0["rev"]?.stringValue }.sorted()
            leaves[id] = ["revs": .array(revisions.map { JSONValue($0) }), "deleted": row["deleted"] ?? false]
        }
        return leaves
    }

    /// Waits for the target to hold the source's leaves, then compares whole trees (with
    /// attachment stubs and digests) and every current attachment's bytes.
    private func expectIdentical(_ source: TestServer, _ sourceDatabase: String, _ target: TestServer,
                                 _ targetDatabase: String) async throws {
        let converged = try await eventually(180) {
            let (expected, actual) = (try await leaves(source, sourceDatabase), try await leaves(target, targetDatabase))
            if expected != actual { try await Task.sleep(nanoseconds: 200_000_000) }
            return expected == actual
        }
        #expect(converged, "the target never caught up")
        let trees = try await source.revisionTrees(sourceDatabase)
        #expect(trees.count > 30)
        #expect(trees == (try await target.revisionTrees(targetDatabase)))
        for (id, leaves) in trees {
            for leaf in leaves.arrayValue ?? [] {
                guard let rev = leaf["ok"]?["_rev"]?.stringValue else { continue }
                let names = leaf["ok"]?["_attachments"]?.objectValue.map { Array($0.keys) } ?? []
                for name in names {
                    let path = "/\(id)/\(name)?rev=\(rev)"
                    let (expected, actual) = try await offPool {
                        (try httpRequest(port: source.port, "GET", "/\(sourceDatabase)\(path)").body,
                         try httpRequest(port: target.port, "GET", "/\(targetDatabase)\(path)").body)
                    }
                    #expect(expected == actual, "\(id)/\(name) at \(rev)")
                }
            }
        }
    }

    private func task(_ server: TestServer) async throws -> JSONValue? {
        try await server.call("GET", "/_active_tasks").json[0]
    }

    @Test func aContinuousPullThroughAFaultyNetworkEndsIdentical() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        let proxy = try FaultyProxy(upstreamPort: a.port, faults: Self.faults, seed: 21)
        defer { b.replications.stopAll(); proxy.stop(); a.stop(); b.stop() }
        b.replications.jobBackoff = Backoff(initialMilliseconds: 50, maximumMilliseconds: 200)
        try await a.call("PUT", "/source")
        try await a.fill("source", count: 20)
        var body = Self.settings
        body["source"] = JSONValue(proxy.url + "/source")
        body["target"] = "pulled"
        body["create_target"] = true
        let (status, answer) = try await b.replicate(.object(body))
        #expect(status == 202, "\(answer.serializedString())")
        try await write(on: a, "source", rounds: 0..<6)
        try await expectIdentical(a, "source", b, "pulled")
        // Feeds go silent and are cut in turn for as long as the job runs: once both happened,
        // the job must still pick up what is written next.
        let feedsFailed = try await eventually(120) {
            proxy.faultsByKind["stallFeed", default: 0] > 0 && proxy.faultsByKind["cutFeed", default: 0] > 0
        }
        #expect(feedsFailed, "\(proxy.faultsByKind)")
        try await write(on: a, "source", rounds: 6..<7)
        try await expectIdentical(a, "source", b, "pulled")
        #expect(try await task(b)?["doc_write_failures"] == 0)
        #expect(proxy.faultsInjected > 5, "the network really was faulty: \(proxy.faultsByKind)")
    }

    @Test func aContinuousPushThroughAFaultyNetworkEndsIdentical() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        let proxy = try FaultyProxy(upstreamPort: b.port, faults: Self.faults, seed: 22)
        defer { a.replications.stopAll(); proxy.stop(); a.stop(); b.stop() }
        a.replications.jobBackoff = Backoff(initialMilliseconds: 50, maximumMilliseconds: 200)
        try await a.call("PUT", "/source")
        try await b.call("PUT", "/pushed")
        try await a.fill("source", count: 20)
        var body = Self.settings
        body["source"] = "source"
        body["target"] = JSONValue(proxy.url + "/pushed")
        let (status, answer) = try await a.replicate(.object(body))
        #expect(status == 202, "\(answer.serializedString())")
        try await write(on: a, "source", rounds: 0..<6)
        try await expectIdentical(a, "source", b, "pushed")
        #expect(try await task(a)?["doc_write_failures"] == 0)
        #expect(proxy.faultsInjected > 5, "the network really was faulty: \(proxy.faultsByKind)")
    }

    @Test func aContinuousJobWhosePeerGoesAwayCatchesUpWhenItReturns() async throws {
        let (a, b) = (try TestServer(), try TestServer())
        let proxy = try FaultyProxy(upstreamPort: a.port, faults: .init())
        defer { b.replications.stopAll(); proxy.stop(); a.stop(); b.stop() }
        try await a.call("PUT", "/source")
        try await a.fill("source", count: 20)
        let (status, _) = try await b.replicate(["source": JSONValue(proxy.url + "/source"), "target": "pulled",
                                                 "create_target": true, "continuous": true])
        #expect(status == 202)
        #expect(try await eventually(60) { try await b.documentCount("pulled") == 20 })

        proxy.goAway()
        try await write(on: a, "source", rounds: 0..<2)
        let noticed = try await eventually(60) {
            let task = try await task(b)
            return task?["status"] == "offline" && task?["last_error"]?["error"] == "peer_unreachable"
        }
        let whileAway = try await task(b)
        #expect(noticed, "the job noticed its peer was gone: \(String(describing: whileAway))")
        #expect(try await b.documentCount("pulled") == 20)

        try proxy.comeBack()
        try await expectIdentical(a, "source", b, "pulled")
        let running = try await eventually(60) {
            let task = try await task(b)
            return ["running", "idle"].contains(task?["status"]?.stringValue ?? "") && task?["last_error"] == .null
        }
        let afterwards = try await task(b)
        #expect(running, "\(String(describing: afterwards))")
        #expect(try await task(b)?["doc_write_failures"] == 0)
    }
}
