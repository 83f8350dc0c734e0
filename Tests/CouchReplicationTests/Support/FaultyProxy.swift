import CouchTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A loopback HTTP proxy in front of a server, for tests. Answers are relayed as they come
/// (a continuous `_changes` feed or a long poll streams through), and, at random (from a
/// fixed seed, so runs repeat), a request is dropped, reset, answered 5xx/429 without being
/// forwarded, or forwarded and then its answer lost, cut short, stalled until the client
/// gives up, or trickled, or held back until a later request has been answered (so the peer
/// sees requests, and the client gets answers, out of the order they were sent). The proxy can also go away (connections refused) and come back on
/// the same port.
final class FaultyProxy: @unchecked Sendable {
    struct Faults: Sendable {
        /// Probability of closing the connection without forwarding the request.
        var dropBefore = 0.0
        /// Probability of forwarding the request, then closing once the answer's head is in.
        var dropAfter = 0.0
        /// Probability of answering 500 without forwarding.
        var serverError = 0.0
        /// Probability of answering 502, 503 or 429 (in turn) without forwarding.
        var busy = 0.0
        /// Probability of closing with a TCP reset without forwarding.
        var reset = 0.0
        /// Probability of forwarding, then relaying only part of the answer (half of a body of
        /// known length; a few kilobytes or a moment of a stream) and closing.
        var truncate = 0.0
        /// Probability of forwarding, then going silent (before the head, or part-way through
        /// the body) until the client gives up: its inactivity timeout must end the request.
        var stall = 0.0
        /// Probability of relaying the answer in small pieces with pauses between them.
        var trickle = 0.0
        /// Probability of holding the request back (up to half a second) until a request that
        /// came after it has been answered, before forwarding it: the peer gets requests, and
        /// the client answers, out of order.
        var reorder = 0.0
        /// Every continuous or long-poll `_changes` that meets none of the faults above (the
        /// trickle apart) fails anyway, in turn: it goes silent part-way (its reader must notice that heartbeats
        /// stopped) or is cut after a moment (up to 1.5 s) or a few kilobytes. A feed is one
        /// long request, which the faults above would seldom hit.
        var faultyFeeds = false
        /// Added to every request, in seconds.
        var delay = 0.0
        /// Answer `_bulk_get` as a peer without it does (CouchDB < 2.0: 404... as a document).
        var withoutBulkGet = false
        /// Answers chosen by the test for some requests (nil: the request goes on as usual).
        var answer: (@Sendable (LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response?)? = nil
    }

    private let lock = NSLock()
    private var server: LoopbackHTTPServer?
    private var allRequests: [LoopbackHTTPServer.Request] = []
    private let state: State
    private let faults: Faults
    private let upstreamPort: Int

    let port: Int
    var url: String { "http://127.0.0.1:\(port)" }
    var faultsInjected: Int { state.injected }
    /// Faults injected, by kind ("stall", "truncate"...).
    var faultsByKind: [String: Int] { state.kinds }
    var requests: [LoopbackHTTPServer.Request] { lock.withLock { allRequests + (server?.requests ?? []) } }
    /// The request target (path and query) and body size of every answer relayed whole.
    var responses: [(target: String, bytes: Int)] { state.responses }

    init(upstreamPort: Int, faults: Faults, seed: UInt64 = 7) throws {
        state = State(seed: seed)
        self.faults = faults
        self.upstreamPort = upstreamPort
        let server = try Self.listen(port: 0, upstreamPort: upstreamPort, faults: faults, state: state)
        self.server = server
        port = server.port
    }

    func stop() { goAway() }

    /// Stops listening and cuts every open connection: the peer is gone (connections refused).
    func goAway() {
        let gone: LoopbackHTTPServer? = lock.withLock {
            defer { server = nil }
            if let server { allRequests += server.requests }
            return server
        }
        gone?.stop()
    }

    /// Listens again on the same port: the peer is back.
    func comeBack() throws {
        guard lock.withLock({ server == nil }) else { return }
        var attempts = 0
        while true {
            do {
                let server = try Self.listen(port: port, upstreamPort: upstreamPort, faults: faults, state: state)
                lock.withLock { self.server = server }
                return
            } catch {
                // The old listener's thread may still be closing its socket.
                attempts += 1
                if attempts > 200 { throw error }
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
    }

    private static func listen(port: Int, upstreamPort: Int, faults: Faults, state: State) throws -> LoopbackHTTPServer {
        try LoopbackHTTPServer(port: port) { request in
            if faults.delay > 0 { Thread.sleep(forTimeInterval: faults.delay) }
            if let answer = faults.answer?(request) { return .respond(answer) }
            if faults.withoutBulkGet && request.path.hasSuffix("/_bulk_get") {
                return .respond(.json(404, ["error": "not_found", "reason": "missing"]))
            }
            let roll = state.roll()
            var threshold = 0.0
            func falls(_ probability: Double, _ kind: String) -> Bool {
                defer { threshold += probability }
                guard roll >= threshold, roll < threshold + probability else { return false }
                state.count(kind)
                return true
            }
            if falls(faults.dropBefore, "dropBefore") { return .drop }
            if falls(faults.serverError, "serverError") {
                return .respond(.json(500, ["error": "unknown_error", "reason": "injected"]))
            }
            if falls(faults.busy, "busy") {
                let status = [502, 503, 429][state.injected % 3]
                return .respond(.json(status, ["error": "unavailable", "reason": "injected"]))
            }
            if falls(faults.reset, "reset") { return .reset }
            var plan = Relay.Plan.whole
            if falls(faults.dropAfter, "dropAfter") {
                plan = .dropAfterHead
            } else if falls(faults.truncate, "truncate") {
                plan = .cut(bytes: state.below(8192), seconds: Double(state.below(1500)) / 1000)
            } else if falls(faults.stall, "stall") {
                // Half of the stalls send nothing at all; the others go quiet part-way.
                plan = .stall(afterBytes: state.below(2) == 0 ? nil : state.below(4096))
            } else if faults.faultyFeeds,
                      request.target.contains("feed=continuous") || request.target.contains("feed=longpoll") {
                // (Before the trickle: a trickled feed that is never cut would stay healthy.)
                if state.nextFeed() % 2 == 0 {
                    state.count("stallFeed")
                    plan = .stall(afterBytes: state.below(4096))
                } else {
                    state.count("cutFeed")
                    plan = .cut(bytes: 1 + state.below(16384), seconds: 0.1 + Double(state.below(1500)) / 1000)
                }
            } else if falls(faults.trickle, "trickle") {
                plan = .trickle
            } else if falls(faults.reorder, "reorder") {
                state.waitForALaterAnswer(atMost: 0.5)
            }
            return .relay { [plan] client in
                Relay(request: request, upstreamPort: upstreamPort, client: client, state: state).run(plan)
            }
        }
    }

    /// One request forwarded to the upstream server on a connection of its own (`Connection:
    /// close`, so the answer ends where that connection does), its answer relayed as it arrives.
    private struct Relay {
        enum Plan {
            case whole
            case dropAfterHead
            /// Relay at most so many body bytes (half of a known length) or for so long, then close.
            case cut(bytes: Int, seconds: Double)
            /// Relay the head and so many body bytes (nil: not even the head), then go silent.
            case stall(afterBytes: Int?)
            case trickle
        }

        let request: LoopbackHTTPServer.Request
        let upstreamPort: Int
        let client: LoopbackHTTPServer.Connection
        let state: State

        /// Whether the client's connection may serve another request.
        func run(_ plan: Plan) -> Bool {
            guard let upstream = connect(), send(upstream, requestBytes()) else { return false }
            defer { close(upstream) }
            var pending: [UInt8] = []
            guard let head = readHead(upstream, &pending) else { return false }
            if case .dropAfterHead = plan { return false }
            let lengthKnown = head.contentLength
            // An answer that ends only where its connection does cannot keep the client's open.
            let keepAlive = head.chunked || lengthKnown != nil || request.method == "HEAD" || head.status == 204 || head.status == 304
            var headBytes = "HTTP/1.1 \(head.status) \(head.reason)\r\n"
            for (name, value) in head.headers where !["connection", "keep-alive"].contains(name.lowercased()) {
                headBytes += "\(name): \(value)\r\n"
            }
            if !keepAlive { headBytes += "Connection: close\r\n" }
            headBytes += "\r\n"

            var limit = Int.max
            var deadline = Date.distantFuture
            var trickle = false
            switch plan {
            case .whole, .dropAfterHead:
                break
            case .cut(let bytes, let seconds):
                limit = lengthKnown.map { $0 / 2 } ?? bytes
                deadline = Date().addingTimeInterval(seconds)
            case .stall(let afterBytes):
                guard let afterBytes else {
                    client.holdUntilClientLeaves(atMost: 120)
                    return false
                }
                limit = min(afterBytes, lengthKnown.map { $0 / 2 } ?? afterBytes)
            case .trickle:
                trickle = true
            }
            guard trickle ? sendSlowly(Array(headBytes.utf8), piece: 16) : client.send(Array(headBytes.utf8)) else { return false }

            var relayed = 0
            var ended = false
            while relayed < limit, Date() < deadline, !client.isStopped {
                if pending.isEmpty {
                    switch receive(upstream, &pending) {
                    case .some(true): break
                    case .some(false): ended = true
                    case nil:
                        // Nothing for a moment: a quiet feed, unless its reader left.
                        if client.clientClosed { return false }
                        continue
                    }
                    if ended { break }
                }
                let piece = Array(pending.prefix(limit - relayed))
                pending.removeFirst(piece.count)
                guard trickle ? sendSlowly(piece, piece: 512) : client.send(piece) else { return false }
                relayed += piece.count
            }
            if case .stall = plan {
                client.holdUntilClientLeaves(atMost: 120)
                return false
            }
            guard ended else { return false }
            state.record(target: request.target, bytes: relayed)
            return keepAlive
        }

        private func requestBytes() -> [UInt8] {
            var head = "\(request.method) \(request.target) HTTP/1.1\r\n"
            let hopByHop: Set<String> = ["connection", "keep-alive", "content-length", "transfer-encoding", "expect", "host"]
            for (name, value) in request.headers where !hopByHop.contains(name) { head += "\(name): \(value)\r\n" }
            head += "Host: 127.0.0.1:\(upstreamPort)\r\nConnection: close\r\n"
            if !request.body.isEmpty || !["GET", "HEAD", "DELETE"].contains(request.method) {
                head += "Content-Length: \(request.body.count)\r\n"
            }
            return Array((head + "\r\n").utf8) + request.body
        }

        private func connect() -> Int32? {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { return nil }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(upstreamPort).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                close(fd)
                return nil
            }
            return fd
        }

        private func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
            var sent = 0
            while sent < bytes.count {
                let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return false }
                sent += count
            }
            return true
        }

        private func sendSlowly(_ bytes: [UInt8], piece: Int) -> Bool {
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + piece)
                guard client.send(Array(bytes[offset..<end])) else { return false }
                offset = end
                usleep(2000)
            }
            return true
        }

        /// Reads more of the upstream's answer: true with bytes, false at its end, nil when
        /// nothing came within 100 ms.
        private func receive(_ fd: Int32, _ buffer: inout [UInt8]) -> Bool? {
            var probe = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&probe, 1, 100)
            if ready == 0 || (ready < 0 && errno == EINTR) { return nil }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { return nil }
            guard count > 0 else { return false }
            buffer.append(contentsOf: chunk[..<count])
            return true
        }

        struct Head {
            var status: Int
            var reason: String
            var headers: [(String, String)]
            var chunked: Bool {
                headers.contains { $0.0.lowercased() == "transfer-encoding" && $0.1.lowercased().contains("chunked") }
            }
            var contentLength: Int? {
                headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1.trimmingCharacters(in: .whitespaces)) }
            }
        }

        /// The answer's head (skipping `100 Continue`); what came after it stays in `buffer`.
        private func readHead(_ fd: Int32, _ buffer: inout [UInt8]) -> Head? {
            let separator: [UInt8] = Array("\r\n\r\n".utf8)
            while true {
                guard let range = buffer.firstRange(of: separator) else {
                    switch receive(fd, &buffer) {
                    case .some(true): continue
                    case .some(false): return nil
                    case nil:
                        if client.isStopped || client.clientClosed { return nil }
                        continue
                    }
                }
                let text = String(decoding: buffer[..<range.lowerBound], as: UTF8.self)
                buffer.removeFirst(range.upperBound)
                var lines = text.components(separatedBy: "\r\n")
                let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2)
                guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
                if status == 100 { continue }
                var headers: [(String, String)] = []
                for line in lines {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
                }
                return Head(status: status, reason: statusLine.count > 2 ? String(statusLine[2]) : "Status", headers: headers)
            }
        }
    }

    private final class State: @unchecked Sendable {
        private let lock = NSLock()
        private var generator: SplitMix
        private var injectedCount = 0
        private var byKind: [String: Int] = [:]
        private var forwarded: [(target: String, bytes: Int)] = []

        init(seed: UInt64) { generator = SplitMix(seed: seed) }

        func roll() -> Double {
            lock.withLock { Double(generator.next() % 1_000_000) / 1_000_000 }
        }

        /// A number in 0..<bound, from the same seed.
        func below(_ bound: Int) -> Int {
            lock.withLock { Int(generator.next() % UInt64(max(1, bound))) }
        }

        private var feeds = 0
        /// Counts the feeds seen, from 0.
        func nextFeed() -> Int {
            lock.withLock {
                defer { feeds += 1 }
                return feeds
            }
        }

        func count(_ kind: String) {
            lock.withLock {
                injectedCount += 1
                byKind[kind, default: 0] += 1
            }
        }

        func record(target: String, bytes: Int) {
            lock.withLock { forwarded.append((target, bytes)) }
        }

        /// Returns once an answer has been relayed whole since the call (noted as "overtaken",
        /// not a fault of its own: this request is now out of order), or after `seconds`.
        func waitForALaterAnswer(atMost seconds: Double) {
            let seen = relayedCount
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if relayedCount > seen {
                    lock.withLock { byKind["overtaken", default: 0] += 1 }
                    return
                }
                usleep(5000)
            }
        }

        var responses: [(target: String, bytes: Int)] { lock.withLock { forwarded } }
        private var relayedCount: Int { lock.withLock { forwarded.count } }
        var injected: Int { lock.withLock { injectedCount } }
        var kinds: [String: Int] { lock.withLock { byKind } }
    }
}
