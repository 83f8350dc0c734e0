import CouchCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A tiny HTTP/1.1 server on a loopback port for tests: a thread per connection, keep-alive,
/// `Content-Length` bodies. It records every request and answers with a handler, which may
/// also drop the connection without answering (to play a failing peer), or write the answer
/// itself as it comes (a proxy relaying a stream).
final class LoopbackHTTPServer: @unchecked Sendable {
    struct Request: Sendable {
        let method: String
        /// The raw target: path and query, still percent-encoded.
        let target: String
        /// Lower-case names.
        let headers: [String: String]
        let body: [UInt8]

        var path: String { String(target.prefix { $0 != "?" }) }
        var rawQuery: String {
            guard let question = target.firstIndex(of: "?") else { return "" }
            return String(target[target.index(after: question)...])
        }
        func header(_ name: String) -> String? { headers[name.lowercased()] }
        var json: JSONValue? { try? JSONValue.parse(body) }
    }

    struct Response: Sendable {
        var status: Int
        var headers: [(String, String)] = []
        var body: [UInt8] = []

        static func json(_ status: Int, _ value: JSONValue, headers: [(String, String)] = []) -> Response {
            Response(status: status, headers: [("Content-Type", "application/json")] + headers, body: value.serialized())
        }
    }

    enum Action: Sendable {
        case respond(Response)
        /// Close the connection without answering.
        case drop
        /// Send the head and this first chunk of a chunked body, then keep the connection
        /// open without ending the body (a feed that has nothing more to say).
        case respondAndHold(Response)
        /// Send the head with the whole body's length and half the body, then close.
        case truncate(Response)
        /// Close with a TCP reset (SO_LINGER 0) without answering.
        case reset
        /// The handler writes the answer itself, and says whether the connection may serve
        /// another request.
        case relay(@Sendable (Connection) -> Bool)
    }

    /// A client's connection, for a `relay` answer.
    struct Connection {
        let fd: Int32
        fileprivate let server: LoopbackHTTPServer

        /// Sends every byte; false when the client is gone.
        func send(_ bytes: [UInt8]) -> Bool { server.write(fd, bytes) }
        var isStopped: Bool { server.isStopped }

        /// Whether the client closed its end (checked without waiting).
        var clientClosed: Bool {
            var probe = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&probe, 1, 0) > 0 else { return false }
            if probe.revents & Int16(POLLHUP | POLLERR) != 0 { return true }
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 0
        }

        /// Holds the connection without a word until the client gives up (or the server
        /// stops, or `seconds` pass).
        func holdUntilClientLeaves(atMost seconds: Double) {
            let deadline = Date().addingTimeInterval(seconds)
            while !isStopped, !clientClosed, Date() < deadline { usleep(20_000) }
        }
    }

    private let listener: Int32
    let port: Int
    private let handler: @Sendable (Request) -> Action
    private let lock = NSLock()
    private var recorded: [Request] = []
    private var connections: Set<Int32> = []
    private var accepted = 0
    private var stopped = false
    /// Whether `listener` is still open (the accept loop closes it when it ends).
    private var listening = true

    /// `port` 0 takes an ephemeral one; a given port is taken again (a peer coming back).
    init(port requested: Int = 0, handler: @escaping @Sendable (Request) -> Action) throws {
        self.handler = handler
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(requested).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            close(listener)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { stop() }

    var requests: [Request] {
        lock.lock()
        defer { lock.unlock() }
        return recorded
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// TCP connections accepted so far.
    var connectionsAccepted: Int {
        lock.lock()
        defer { lock.unlock() }
        return accepted
    }

    func stop() {
        lock.lock()
        defer { lock.unlock() }
        if stopped { return }
        stopped = true
        // Only shut down: the threads close their own descriptors, under this lock. (Shut down
        // after letting it go, a number a thread had closed meanwhile could already be another
        // test's socket: the likely cause of several tests' fresh connections found closed at
        // the same instant, when a proxy stopped.)
        if listening { shutdown(listener, Int32(SHUT_RDWR)) }
        for fd in connections { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        defer {
            lock.lock()
            listening = false
            close(listener)
            lock.unlock()
        }
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR, !isStopped { continue }
                return
            }
            lock.lock()
            if stopped {
                lock.unlock()
                close(fd)
                return
            }
            connections.insert(fd)
            accepted += 1
            lock.unlock()
            let thread = Thread { [self] in serve(fd) }
            thread.start()
        }
    }

    fileprivate var isStopped: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopped
    }

    private func serve(_ fd: Int32) {
        var buffer: [UInt8] = []
        defer {
            lock.lock()
            connections.remove(fd)
            close(fd)
            lock.unlock()
        }
        while let request = readRequest(fd, &buffer) {
            lock.lock()
            recorded.append(request)
            lock.unlock()
            switch handler(request) {
            case .drop:
                return
            case .reset:
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                return
            case .truncate(let response):
                var head = "HTTP/1.1 \(response.status) Status\r\n"
                for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
                head += "Content-Length: \(response.body.count)\r\n\r\n"
                _ = write(fd, Array(head.utf8) + response.body.prefix(response.body.count / 2))
                return
            case .respond(let response):
                var head = "HTTP/1.1 \(response.status) Status\r\n"
                for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
                head += "Content-Length: \(response.body.count)\r\n\r\n"
                guard write(fd, Array(head.utf8) + response.body) else { return }
            case .relay(let answer):
                guard answer(Connection(fd: fd, server: self)) else { return }
            case .respondAndHold(let response):
                var head = "HTTP/1.1 \(response.status) Status\r\n"
                for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
                head += "Transfer-Encoding: chunked\r\n\r\n"
                head += String(response.body.count, radix: 16) + "\r\n"
                guard write(fd, Array(head.utf8) + response.body + Array("\r\n".utf8)) else { return }
                var ignored: [UInt8] = []
                while receive(fd, &ignored) {}
                return
            }
        }
    }

    fileprivate func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { return false }
            sent += count
        }
        return true
    }

    private func readRequest(_ fd: Int32, _ buffer: inout [UInt8]) -> Request? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while true {
            if let range = buffer.firstRange(of: separator) {
                headEnd = range.lowerBound
                break
            }
            guard receive(fd, &buffer) else { return nil }
        }
        guard let headEnd else { return nil }
        let head = String(decoding: buffer[..<headEnd], as: UTF8.self)
        buffer.removeFirst(headEnd + separator.count)
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count >= 2 else { return nil }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        if headers["expect"]?.lowercased() == "100-continue", buffer.count < length {
            guard write(fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return nil }
        }
        while buffer.count < length {
            guard receive(fd, &buffer) else { return nil }
        }
        let body = Array(buffer[..<length])
        buffer.removeFirst(length)
        return Request(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers, body: body)
    }

    private func receive(_ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        var count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        while count < 0 && errno == EINTR && !isStopped {
            count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        }
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[..<count])
        return true
    }
}
