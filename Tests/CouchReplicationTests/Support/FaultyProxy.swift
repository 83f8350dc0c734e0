import CouchTestSupport
import Foundation

/// A loopback HTTP proxy in front of a server, for tests: it can slow every request down,
/// and, at random (from a fixed seed, so runs repeat), drop the connection before or
/// after forwarding a request, or answer 500 without forwarding it. Streaming responses
/// are not supported (one-shot replications only).
final class FaultyProxy: @unchecked Sendable {
    struct Faults: Sendable {
        /// Probability of closing the connection without forwarding the request.
        var dropBefore = 0.0
        /// Probability of forwarding the request, then closing without answering.
        var dropAfter = 0.0
        /// Probability of answering 500 without forwarding.
        var serverError = 0.0
        /// Probability of answering 502, 503 or 429 (in turn) without forwarding.
        var busy = 0.0
        /// Probability of closing with a TCP reset without forwarding.
        var reset = 0.0
        /// Probability of forwarding, then sending only half of the answer's body.
        var truncate = 0.0
        /// Added to every request, in seconds.
        var delay = 0.0
        /// Answer `_bulk_get` as a peer without it does (CouchDB < 2.0: 404... as a document).
        var withoutBulkGet = false
        /// Answers chosen by the test for some requests (nil: the request goes on as usual).
        var answer: (@Sendable (LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response?)? = nil
    }

    private let server: LoopbackHTTPServer
    private let state: State

    var port: Int { server.port }
    var url: String { server.url }
    var faultsInjected: Int { state.injected }
    var requests: [LoopbackHTTPServer.Request] { server.requests }
    /// The request target (path and query) and body size of every response forwarded.
    var responses: [(target: String, bytes: Int)] { state.responses }

    init(upstreamPort: Int, faults: Faults, seed: UInt64 = 7) throws {
        let state = State(seed: seed)
        self.state = state
        server = try LoopbackHTTPServer { request in
            if faults.delay > 0 { Thread.sleep(forTimeInterval: faults.delay) }
            if let answer = faults.answer?(request) { return .respond(answer) }
            if faults.withoutBulkGet && request.path.hasSuffix("/_bulk_get") {
                return .respond(.json(404, ["error": "not_found", "reason": "missing"]))
            }
            let roll = state.roll()
            if roll < faults.dropBefore {
                state.count()
                return .drop
            }
            if roll < faults.dropBefore + faults.serverError {
                state.count()
                return .respond(.json(500, ["error": "unknown_error", "reason": "injected"]))
            }
            var threshold = faults.dropBefore + faults.serverError
            if roll >= threshold, roll < threshold + faults.busy {
                state.count()
                let status = [502, 503, 429][state.injected % 3]
                return .respond(.json(status, ["error": "unavailable", "reason": "injected"]))
            }
            threshold += faults.busy
            if roll >= threshold, roll < threshold + faults.reset {
                state.count()
                return .reset
            }
            threshold += faults.reset
            var headers: [(String, String)] = []
            for name in ["content-type", "accept", "authorization", "cookie"] {
                if let value = request.header(name) { headers.append((name, value)) }
            }
            guard let response = try? httpRequest(port: upstreamPort, request.method, request.target, headers: headers,
                                                  body: request.body.isEmpty && request.method == "GET" ? nil : request.body)
            else { return .drop }
            if roll >= threshold, roll < threshold + faults.dropAfter {
                state.count()
                return .drop
            }
            threshold += faults.dropAfter
            if roll >= threshold, roll < threshold + faults.truncate {
                state.count()
                var forwarded: [(String, String)] = []
                for header in response.headers where header.name.lowercased() == "content-type" {
                    forwarded.append((header.name, header.value))
                }
                return .truncate(LoopbackHTTPServer.Response(status: response.status, headers: forwarded, body: response.body))
            }
            state.record(target: request.target, bytes: response.body.count)
            var forwarded: [(String, String)] = []
            for header in response.headers where ["content-type", "set-cookie"].contains(header.name.lowercased()) {
                forwarded.append((header.name, header.value))
            }
            return .respond(LoopbackHTTPServer.Response(status: response.status, headers: forwarded, body: response.body))
        }
    }

    func stop() { server.stop() }

    private final class State: @unchecked Sendable {
        private let lock = NSLock()
        private var generator: SplitMix
        private(set) var injectedCount = 0
        private var forwarded: [(target: String, bytes: Int)] = []

        init(seed: UInt64) { generator = SplitMix(seed: seed) }

        func roll() -> Double {
            lock.lock()
            defer { lock.unlock() }
            return Double(generator.next() % 1_000_000) / 1_000_000
        }

        func count() {
            lock.lock()
            injectedCount += 1
            lock.unlock()
        }

        func record(target: String, bytes: Int) {
            lock.lock()
            forwarded.append((target, bytes))
            lock.unlock()
        }

        var responses: [(target: String, bytes: Int)] {
            lock.lock()
            defer { lock.unlock() }
            return forwarded
        }

        var injected: Int {
            lock.lock()
            defer { lock.unlock() }
            return injectedCount
        }
    }
}
