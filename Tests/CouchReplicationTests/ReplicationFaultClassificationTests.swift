import CouchCore
import CouchReplication
import CouchTestSupport
import Foundation
import Testing

/// A peer's answer decides what a one-shot replication does: a permanent refusal (a filter
/// the source cannot run, 404/501 for what the job needs, 401/403) fails it at once with the
/// peer's reason; a transient one (5xx, 429, a dropped connection) is retried until it passes.
@Suite(.serialized) struct ReplicationFaultClassificationTests {
    /// Counts requests to a path suffix, and answers them as told for the first `times`.
    final class Rule: @unchecked Sendable {
        let suffix: String
        let response: LoopbackHTTPServer.Response
        let times: Int
        private let lock = NSLock()
        private var seen = 0
        init(_ suffix: String, _ status: Int, _ body: JSONValue, times: Int = .max) {
            self.suffix = suffix
            response = .json(status, body)
            self.times = times
        }
        var count: Int { lock.withLock { seen } }
        func answer(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response? {
            guard request.path.hasSuffix(suffix) else { return nil }
            return lock.withLock {
                seen += 1
                return seen <= times ? response : nil
            }
        }
    }

    private func pull(through rule: Rule, extra: JSONObject = [:]) async throws -> (status: Int, json: JSONValue, source: TestServer) {
        let (source, target) = (try TestServer(), try TestServer())
        defer { target.stop() }
        try await source.call("PUT", "/source")
        try await target.call("PUT", "/target")
        try await source.fill("source", count: 20)
        let proxy = try FaultyProxy(upstreamPort: source.port, faults: FaultyProxy.Faults(answer: { rule.answer($0) }))
        defer { proxy.stop() }
        var body: JSONObject = ["source": JSONValue(proxy.url + "/source"), "target": "target"]
        for (key, value) in extra { body[key] = value }
        let (status, json) = try await target.replicate(.object(body))
        let count = status == 200 ? try await target.documentCount("target") : -1
        if status == 200 { #expect(count == 20, "\(json.serializedString())") }
        return (status, json, source)
    }

    @Test(arguments: [
        (501, "not_implemented", "this peer has no _changes"),
        (400, "bad_request", "filter crashed: ReferenceError"),
        (404, "not_found", "missing json key: filters"),
        (403, "forbidden", "You may not read this"),
        (401, "unauthorized", "Name or password is incorrect."),
    ])
    func aPermanentRefusalOfTheFeedFailsAtOnce(status: Int, error: String, reason: String) async throws {
        let rule = Rule("/_changes", status, ["error": JSONValue(error), "reason": JSONValue(reason)])
        let (answer, json, source) = try await pull(through: rule)
        defer { source.stop() }
        #expect(answer != 200, "\(json.serializedString())")
        #expect(json["ok"] != true)
        #expect(json["reason"]?.stringValue?.contains(reason) == true || status == 401 || status == 403,
                "the peer's reason: \(json.serializedString())")
        #expect(rule.count == 1, "a permanent refusal is not retried (\(rule.count) requests)")
    }

    @Test func aFilterTheSourceDoesNotHaveFailsAtOnceWithItsReason() async throws {
        let rule = Rule("/never", 500, [:])
        let (answer, json, source) = try await pull(through: rule, extra: ["filter": "nope/f"])
        defer { source.stop() }
        #expect(answer != 200)
        #expect(json["reason"]?.stringValue?.isEmpty == false, "\(json.serializedString())")
    }

    @Test(arguments: [503, 500, 429, 502])
    func aTransientFailureIsRetriedUntilItPasses(status: Int) async throws {
        let rule = Rule("/_changes", status, ["error": "unavailable", "reason": "try later"], times: 3)
        let (answer, json, source) = try await pull(through: rule)
        defer { source.stop() }
        #expect(answer == 200, "\(json.serializedString())")
        #expect(json["ok"] == true)
        #expect(rule.count > 3)
    }
}
