// A small HTTP/1.1 client over raw POSIX sockets, for integration tests that talk to a
// real server on the loopback interface.
//
// Why not URLSession: tests need byte-exact control over what goes on the wire (custom
// methods such as COPY, raw non-normalised paths such as `/db/_local%2Fx`, exact headers,
// deliberately malformed requests), line-by-line reading of chunked streaming responses,
// and thousands of simultaneous connections that can be multiplexed with poll().
//
// Sockets are non-blocking; every wait goes through poll() with a timeout, so a misbehaving
// server makes a test fail with `HTTPTestClientError.timedOut` instead of hanging it.
// SIGPIPE is suppressed (MSG_NOSIGNAL / SO_NOSIGPIPE), so a server that closes early cannot
// kill the test process.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Public types

public struct HTTPTestResponse: Sendable {
    public let status: Int
    /// Response headers, in the order received (names as sent by the server).
    public let headers: [(name: String, value: String)]
    /// The body, de-chunked.
    public let body: [UInt8]
    /// Trailer fields of a chunked body, in the order received (usually empty).
    public let trailers: [(name: String, value: String)]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8],
                trailers: [(name: String, value: String)] = []) {
        self.status = status
        self.headers = headers
        self.body = body
        self.trailers = trailers
    }

    /// The first header with this name, compared case-insensitively.
    public func header(_ name: String) -> String? { firstHeader(name, in: headers) }

    /// The body decoded as UTF-8 (invalid sequences are replaced).
    public var text: String { String(decoding: body, as: UTF8.self) }
}

public struct HTTPTestResponseHead: Sendable {
    public let status: Int
    /// Response headers, in the order received.
    public let headers: [(name: String, value: String)]

    public init(status: Int, headers: [(name: String, value: String)]) {
        self.status = status
        self.headers = headers
    }

    /// The first header with this name, compared case-insensitively.
    public func header(_ name: String) -> String? { firstHeader(name, in: headers) }
}

public enum HTTPTestClientError: Error, Equatable, CustomStringConvertible {
    /// The TCP connection could not be established (refused, no such host, out of descriptors...).
    case connectFailed(String)
    /// Nothing arrived (or nothing could be sent) within the timeout.
    case timedOut
    /// The peer closed (or reset) the connection before a complete response was read.
    case closed
    /// The server's response is not valid HTTP/1.x.
    case malformedResponse(String)

    public var description: String {
        switch self {
        case .connectFailed(let why): return "HTTPTestClientError.connectFailed(\(why))"
        case .timedOut: return "HTTPTestClientError.timedOut"
        case .closed: return "HTTPTestClientError.closed"
        case .malformedResponse(let why): return "HTTPTestClientError.malformedResponse(\(why))"
        }
    }
}

/// Convenience: one request on a fresh connection, which is closed afterwards.
public func httpRequest(port: Int, _ method: String, _ path: String,
                        headers: [(String, String)] = [], body: [UInt8]? = nil) throws -> HTTPTestResponse {
    let connection = try HTTPTestConnection(port: port)
    defer { connection.close() }
    return try connection.request(method, path, headers: headers, body: body)
}

// MARK: - Connection

/// One keep-alive connection. Not thread-safe; one request at a time.
///
/// It is `@unchecked Sendable` only so that it can be created on one thread or task and used
/// on another; it must never be used from two threads at the same time.
///
/// `timeout` (seconds) is an inactivity timeout for connect, request(), sendRaw() and
/// startStreaming(): each wait for the socket gives up after that long without progress.
/// readLine(timeout:) and readToEnd(timeout:) take their own overall deadline.
///
/// If the server answers with `Connection: close` (or HTTP/1.0 without keep-alive, or a
/// close-delimited body), or if the server silently closed an idle keep-alive connection,
/// the next request reconnects transparently; `connectionCount` tells how many TCP
/// connections have been opened, so tests can assert keep-alive reuse.
///
/// Creating the first connection raises the process's soft RLIMIT_NOFILE to its hard limit
/// (at most 1,048,576) so that tests can hold thousands of connections.
public final class HTTPTestConnection: @unchecked Sendable {
    public let host: String
    public let port: Int
    /// Inactivity timeout in seconds; may be changed between requests.
    public var timeout: Double

    /// Number of TCP connections opened so far (1 after init; +1 for every reconnect).
    public private(set) var connectionCount = 0

    /// The current socket, or -1 when closed. For poll()-based multiplexing of many
    /// streaming connections; check `hasBufferedData` before waiting on it.
    public var fileDescriptor: Int32 { fd }

    /// After startStreaming: true when readLine will return (a line, nil for the end of the body,
    /// or an error) without touching the socket. When multiplexing many streams with poll(), call
    /// readLine on these connections first: bytes already read into this buffer do not make the
    /// socket readable again. (Bytes of an incomplete line do not count; more bytes must arrive,
    /// and they will wake poll().) Never blocks.
    public var hasBufferedData: Bool {
        guard streaming else { return false }
        if streamError != nil || !bodyActive || indexOfNewline() != nil { return true }
        guard inbuf.count > 0 else { return false }
        do {
            if try decodeAvailable(into: &streamOut) { finishBody() }
        } catch {
            streamError = error
            closeSocket()
            return true
        }
        return !bodyActive || indexOfNewline() != nil
    }

    private var fd: Int32 = -1
    private let inbuf = ByteQueue()
    private var readChunk = 4096
    private var mustReconnect = false
    private var responsesOnSocket = 0

    // Framing state of the response body being read.
    private enum Framing { case none, length, chunked, untilClose }
    private enum ChunkPhase { case size, data, dataEnd, trailers, done }
    private var framing: Framing = .none
    private var remaining = 0                 // bytes left in the body (.length) or chunk (.chunked)
    private var chunkPhase: ChunkPhase = .size
    private var trailers: [(name: String, value: String)] = []
    private var bodyActive = false            // a response body is still being read
    private var closeAfterBody = false

    // Streaming state (after startStreaming).
    private var streaming = false
    private var streamOut: [UInt8] = []       // de-chunked bytes not yet handed out
    private var streamPos = 0
    private var streamScan = 0                // no "\n" in streamOut[streamPos..<streamScan]
    private var streamError: Error?           // found by hasBufferedData, thrown by the next read

    private static let maxHeadBytes = 1 << 20
    private static let maxChunkLineBytes = 64 << 10

    public init(host: String = "127.0.0.1", port: Int, timeout: Double = 30) throws {
        self.host = host
        self.port = port
        self.timeout = timeout
        _ = fileDescriptorLimitRaised
        try connectSocket()
    }

    deinit {
        if fd >= 0 { _ = systemClose(fd) }
    }

    /// Closes the socket. A later request() opens a new connection.
    public func close() {
        closeSocket()
        streaming = false
        streamOut = []
        streamPos = 0
        streamScan = 0
        streamError = nil
    }

    // MARK: Requests

    /// Sends a request and reads the whole response. `path` is sent exactly as given (may include a query string).
    /// Adds `Host` (unless supplied), and `Content-Length` when body is non-nil (unless the caller supplied
    /// Content-Length or Transfer-Encoding; in the latter case `body` must already be chunk-encoded).
    public func request(_ method: String, _ path: String, headers: [(String, String)] = [],
                        body: [UInt8]? = nil) throws -> HTTPTestResponse {
        let head = buildRequestHead(method, path, headers, body)
        let result = try perform(method: method, head: head, body: body, stream: false, allowRetry: true)
        return HTTPTestResponse(status: result.head.status, headers: result.head.headers,
                                body: result.body, trailers: result.trailers)
    }

    /// Like request(_:_:headers:body:) with a UTF-8 JSON body; sets `Content-Type: application/json`
    /// unless the caller supplied a Content-Type.
    public func request(_ method: String, _ path: String, headers: [(String, String)] = [],
                        json: String) throws -> HTTPTestResponse {
        var all = headers
        if !all.contains(where: { asciiCaseInsensitiveEqual($0.0, "content-type") }) {
            all.append(("Content-Type", "application/json"))
        }
        return try request(method, path, headers: all, body: Array(json.utf8))
    }

    /// Sends raw bytes (for malformed-request tests) and reads one response. If the bytes start
    /// with `HEAD `, the response is read as a HEAD response (no body). Bytes of further
    /// (pipelined) responses stay buffered for readResponse().
    public func sendRaw(_ bytes: [UInt8]) throws -> HTTPTestResponse {
        let result = try perform(method: Self.methodOf(bytes), head: bytes, body: nil, stream: false, allowRetry: false)
        return HTTPTestResponse(status: result.head.status, headers: result.head.headers,
                                body: result.body, trailers: result.trailers)
    }

    /// Sends raw bytes without reading anything (e.g. half a request, or pipelined requests
    /// whose responses are then read with readResponse()).
    public func writeRaw(_ bytes: [UInt8]) throws {
        try prepareForExchange()
        do {
            try bytes.withUnsafeBytes { try sendAll($0) }
        } catch {
            closeSocket()
            throw Self.publicError(error)
        }
    }

    /// Reads one more response from the connection without sending anything (after writeRaw,
    /// or for pipelined responses after sendRaw). `method` is the method of the request it
    /// answers (only HEAD matters).
    public func readResponse(method: String = "GET") throws -> HTTPTestResponse {
        streamError = nil
        if streaming {
            streaming = false
            streamOut = []
            streamPos = 0
            streamScan = 0
            if bodyActive { closeSocket() }
        }
        if fd < 0 && inbuf.count == 0 { throw HTTPTestClientError.closed }
        do {
            let head = try readHead(isHead: method == "HEAD", idle: timeout)
            var body: [UInt8] = []
            try readWholeBody(into: &body)
            return HTTPTestResponse(status: head.status, headers: head.headers, body: body, trailers: trailers)
        } catch {
            closeSocket()
            throw Self.publicError(error)
        }
    }

    // MARK: Streaming

    /// Starts a request whose response is streamed (chunked or close-delimited): returns once the status line and headers are read.
    public func startStreaming(_ method: String, _ path: String, headers: [(String, String)] = [],
                               body: [UInt8]? = nil) throws -> HTTPTestResponseHead {
        let head = buildRequestHead(method, path, headers, body)
        return try perform(method: method, head: head, body: body, stream: true, allowRetry: true).head
    }

    /// After startStreaming: the next line of the de-chunked body without its trailing "\n" (and without a
    /// "\r" before it); an empty string for a blank line such as a heartbeat. When the body ends with an
    /// unterminated line, that line is returned first; then nil. Throws timedOut if no complete line arrives
    /// within `timeout` seconds (the stream stays usable), closed if the connection ends mid-body.
    public func readLine(timeout: Double) throws -> String? {
        guard streaming else { return nil }
        let deadline = monotonicNow() + timeout
        while true {
            if let newline = indexOfNewline() {
                var end = newline
                if end > streamPos && streamOut[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                let line = String(decoding: streamOut[streamPos..<end], as: UTF8.self)
                streamPos = newline + 1
                streamScan = streamPos
                compactStreamOut()
                return line
            }
            if let error = streamError {
                streamError = nil
                throw error
            }
            if !bodyActive {
                guard streamPos < streamOut.count else { return nil }
                let line = String(decoding: streamOut[streamPos...], as: UTF8.self)
                streamOut = []
                streamPos = 0
                streamScan = 0
                return line
            }
            try pumpStream(deadline: deadline)
        }
    }

    /// After startStreaming: whatever de-chunked bytes arrive until the body ends or `timeout` seconds pass
    /// (on timeout the bytes received so far are returned and the stream stays usable). Throws closed if
    /// the connection ends mid-body.
    public func readToEnd(timeout: Double) throws -> [UInt8] {
        guard streaming else { return [] }
        let deadline = monotonicNow() + timeout
        if let error = streamError {
            streamError = nil
            throw error
        }
        while bodyActive {
            do {
                try pumpStream(deadline: deadline)
            } catch HTTPTestClientError.timedOut {
                break
            }
        }
        let bytes = Array(streamOut[streamPos...])
        streamOut = []
        streamPos = 0
        streamScan = 0
        return bytes
    }

    /// Decodes what is buffered; if that produced nothing, waits (until `deadline`) for more bytes.
    private func pumpStream(deadline: Double) throws {
        do {
            let before = streamOut.count
            if try decodeAvailable(into: &streamOut) { finishBody(); return }
            if streamOut.count > before { return }
            if try !fill(deadline: deadline) {
                if framing == .untilClose { finishBody(); return }
                throw HTTPTestClientError.closed
            }
            if try decodeAvailable(into: &streamOut) { finishBody() }
        } catch HTTPTestClientError.timedOut {
            throw HTTPTestClientError.timedOut
        } catch {
            closeSocket()
            throw Self.publicError(error)
        }
    }

    private func indexOfNewline() -> Int? {
        let count = streamOut.count
        guard streamScan < count else { return nil }
        let found: Int? = streamOut.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress,
                  let hit = memchr(base + streamScan, Int32(UInt8(ascii: "\n")), count - streamScan) else { return nil }
            return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(hit))
        }
        if found == nil { streamScan = count }
        return found
    }

    private func compactStreamOut() {
        if streamPos == streamOut.count {
            streamOut.removeAll(keepingCapacity: streamOut.capacity <= 1 << 20)
            streamPos = 0
            streamScan = 0
        } else if streamPos >= 64 << 10 && streamPos * 2 >= streamOut.count {
            streamOut.removeFirst(streamPos)
            streamScan -= streamPos
            streamPos = 0
        }
    }

    // MARK: Exchange

    private enum Failure: Error {
        case send(Int32)   // errno of a failed send
        /// The peer closed before sending a single byte of the response. `requestSent` tells
        /// whether the whole request had been handed to the kernel (then the server may have
        /// received and acted on it, so it is not retried).
        case stale(requestSent: Bool)
    }

    private struct Result {
        var head: HTTPTestResponseHead
        var body: [UInt8]
        var trailers: [(name: String, value: String)]
    }

    private func perform(method: String, head: [UInt8], body: [UInt8]?, stream: Bool,
                         allowRetry: Bool) throws -> Result {
        var retried = false
        while true {
            try prepareForExchange()
            // A kept-alive connection may have been closed by the server while idle (the race
            // that prepareForExchange's check cannot see): if sending the request fails, retry
            // once on a new connection. A request that was fully sent is never retried.
            let reused = responsesOnSocket > 0 && inbuf.count == 0
            do {
                return try exchange(method: method, head: head, body: body, stream: stream)
            } catch Failure.stale(requestSent: false) where allowRetry && reused && !retried {
                retried = true
                closeSocket()
            } catch {
                closeSocket()
                throw Self.publicError(error)
            }
        }
    }

    private func exchange(method: String, head: [UInt8], body: [UInt8]?, stream: Bool) throws -> Result {
        let isHead = method == "HEAD"
        var sendFailure: Error?
        do {
            if let body, !body.isEmpty, head.count + body.count <= 64 << 10 {
                try (head + body).withUnsafeBytes { try sendAll($0) }
            } else {
                try head.withUnsafeBytes { try sendAll($0) }
                if let body { try body.withUnsafeBytes { try sendAll($0) } }
            }
        } catch {
            sendFailure = error
        }

        let responseHead: HTTPTestResponseHead
        if let sendFailure {
            // The server may have answered early (e.g. 413) and closed without reading the body.
            do {
                responseHead = try readHead(isHead: isHead, idle: min(timeout, 2))
            } catch {
                if case Failure.send(let code) = sendFailure, code == EPIPE || code == ECONNRESET {
                    throw Failure.stale(requestSent: false)
                }
                throw sendFailure
            }
            closeAfterBody = true
        } else {
            responseHead = try readHead(isHead: isHead, idle: timeout)
        }

        if stream {
            streaming = true
            streamOut = []
            streamPos = 0
            streamScan = 0
            do {
                if try decodeAvailable(into: &streamOut) { finishBody() }
            } catch {
                // Reported by the first read, so the caller still gets the head.
                streamError = error
                closeSocket()
            }
            return Result(head: responseHead, body: [], trailers: [])
        }
        var responseBody: [UInt8] = []
        try readWholeBody(into: &responseBody)
        return Result(head: responseHead, body: responseBody, trailers: trailers)
    }

    private func prepareForExchange() throws {
        streamError = nil
        if streaming {
            streaming = false
            streamOut = []
            streamPos = 0
            streamScan = 0
            if bodyActive { closeSocket() }   // abandon an unfinished stream
        }
        if bodyActive { closeSocket() }
        if fd < 0 || mustReconnect {
            closeSocket()
            try connectSocket()
        } else if inbuf.count == 0 && peerHasClosed() {
            closeSocket()
            try connectSocket()
        }
    }

    /// Whether an idle connection has been closed (or reset) by the peer. Unread data is left alone.
    private func peerHasClosed() -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 0) > 0 else { return false }
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        if n > 0 { return false }
        if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return false }
        return true
    }

    private func buildRequestHead(_ method: String, _ path: String, _ headers: [(String, String)],
                                  _ body: [UInt8]?) -> [UInt8] {
        var text = "\(method) \(path) HTTP/1.1\r\n"
        if !headers.contains(where: { asciiCaseInsensitiveEqual($0.0, "host") }) {
            let hostPart = host.contains(":") ? "[\(host)]" : host
            text += "Host: \(hostPart):\(port)\r\n"
        }
        for (name, value) in headers {
            text += "\(name): \(value)\r\n"
        }
        if let body, !headers.contains(where: {
            asciiCaseInsensitiveEqual($0.0, "content-length") || asciiCaseInsensitiveEqual($0.0, "transfer-encoding")
        }) {
            text += "Content-Length: \(body.count)\r\n"
        }
        text += "\r\n"
        return Array(text.utf8)
    }

    private static func methodOf(_ raw: [UInt8]) -> String {
        let end = raw.prefix(32).firstIndex(of: UInt8(ascii: " ")) ?? 0
        return String(decoding: raw[0..<end], as: UTF8.self)
    }

    private static func publicError(_ error: Error) -> Error {
        switch error {
        case is HTTPTestClientError: return error
        case Failure.send, Failure.stale: return HTTPTestClientError.closed
        default: return error
        }
    }

    // MARK: Response parsing

    /// Reads the status line and headers (skipping 1xx interim responses other than 101) and
    /// sets up the body framing.
    private func readHead(isHead: Bool, idle: Double) throws -> HTTPTestResponseHead {
        var receivedAny = inbuf.count > 0
        var scan = 0          // offset where the next unscanned line starts
        while true {
            if let end = findEndOfHead(scan: &scan) {
                let (version, status, headers) = try parseHead(count: end)
                inbuf.consume(end)
                scan = 0
                if status >= 100 && status < 200 && status != 101 { continue }
                try setUpFraming(version: version, status: status, headers: headers, isHead: isHead)
                return HTTPTestResponseHead(status: status, headers: headers)
            }
            if inbuf.count > Self.maxHeadBytes {
                throw HTTPTestClientError.malformedResponse("response head larger than \(Self.maxHeadBytes) bytes")
            }
            if try !fill(deadline: monotonicNow() + idle) {
                if inbuf.count == 0 {
                    throw receivedAny ? HTTPTestClientError.closed : Failure.stale(requestSent: true)
                }
                throw HTTPTestClientError.malformedResponse("connection closed inside the response head")
            }
            receivedAny = true
        }
    }

    /// Scans complete lines from offset `scan`; returns the length of the head (through the
    /// empty line) once found. Lines may end in CRLF or a bare LF.
    private func findEndOfHead(scan: inout Int) -> Int? {
        while let newline = inbuf.index(of: UInt8(ascii: "\n"), from: scan) {
            let length = newline - scan
            if length == 0 || (length == 1 && inbuf[scan] == UInt8(ascii: "\r")) {
                return newline + 1   // (an empty first line is rejected by parseHead)
            }
            scan = newline + 1
        }
        return nil
    }

    private func parseHead(count: Int) throws -> (version: String, status: Int, headers: [(name: String, value: String)]) {
        var lines: [String] = []
        var lineStart = 0
        for i in 0..<count where inbuf[i] == UInt8(ascii: "\n") {
            var end = i
            if end > lineStart && inbuf[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            lines.append(inbuf.string(lineStart..<end))
            lineStart = i + 1
        }
        // The last line is the empty terminator.
        guard let statusLine = lines.first, !statusLine.isEmpty else {
            throw HTTPTestClientError.malformedResponse("empty status line")
        }
        let (version, status) = try parseStatusLine(statusLine)

        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() where !line.isEmpty {
            if line.first == " " || line.first == "\t" {
                // Obsolete line folding: continuation of the previous value.
                guard let last = headers.popLast() else {
                    throw HTTPTestClientError.malformedResponse("continuation line before any header: \(line)")
                }
                headers.append((last.name, last.value + " " + trimOWS(Substring(line))))
                continue
            }
            guard let colon = line.firstIndex(of: ":") else {
                throw HTTPTestClientError.malformedResponse("header line without colon: \(line)")
            }
            let name = String(line[..<colon])
            guard !name.isEmpty, !name.contains(where: { $0 == " " || $0 == "\t" }) else {
                throw HTTPTestClientError.malformedResponse("invalid header name: \(line)")
            }
            headers.append((name, trimOWS(line[line.index(after: colon)...])))
        }
        return (version, status, headers)
    }

    private func parseStatusLine(_ line: String) throws -> (String, Int) {
        let bytes = Array(line.utf8)
        guard bytes.count >= 12, line.hasPrefix("HTTP/"),
              let space = bytes.firstIndex(of: UInt8(ascii: " ")), bytes.count >= space + 4 else {
            throw HTTPTestClientError.malformedResponse("bad status line: \(line)")
        }
        let code = bytes[(space + 1)..<(space + 4)]
        guard code.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              bytes.count == space + 4 || bytes[space + 4] == UInt8(ascii: " ") else {
            throw HTTPTestClientError.malformedResponse("bad status line: \(line)")
        }
        let status = code.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        return (String(decoding: bytes[0..<space], as: UTF8.self), status)
    }

    private func setUpFraming(version: String, status: Int, headers: [(name: String, value: String)],
                              isHead: Bool) throws {
        var connectionTokens: [String] = []
        var transferCodings: [String] = []
        var contentLength: Int?
        for (name, value) in headers {
            if asciiCaseInsensitiveEqual(name, "connection") {
                connectionTokens += commaList(value)
            } else if asciiCaseInsensitiveEqual(name, "transfer-encoding") {
                transferCodings += commaList(value)
            } else if asciiCaseInsensitiveEqual(name, "content-length") {
                for item in value.split(separator: ",", omittingEmptySubsequences: false) {
                    let digits = trimOWS(item)
                    guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                          let n = Int(digits) else {
                        throw HTTPTestClientError.malformedResponse("bad Content-Length: \(value)")
                    }
                    if let previous = contentLength, previous != n {
                        throw HTTPTestClientError.malformedResponse("conflicting Content-Length values")
                    }
                    contentLength = n
                }
            }
        }

        let keepAlive: Bool
        if version == "HTTP/1.0" {
            keepAlive = connectionTokens.contains("keep-alive")
        } else {
            keepAlive = !connectionTokens.contains("close")
        }
        closeAfterBody = !keepAlive || status == 101
        trailers = []
        chunkPhase = .size
        remaining = 0

        if isHead || (status >= 100 && status < 200) || status == 204 || status == 304 {
            framing = .none
        } else if !transferCodings.isEmpty {
            framing = transferCodings.last == "chunked" ? .chunked : .untilClose
        } else if let contentLength {
            framing = .length
            remaining = contentLength
        } else {
            framing = .untilClose
        }
        if framing == .untilClose { closeAfterBody = true }
        bodyActive = true
    }

    private func readWholeBody(into out: inout [UInt8]) throws {
        if framing == .length { out.reserveCapacity(min(remaining, 1 << 30)) }
        while true {
            if try decodeAvailable(into: &out) { finishBody(); return }
            if try !fill(deadline: monotonicNow() + timeout) {
                if framing == .untilClose { finishBody(); return }
                throw HTTPTestClientError.closed
            }
        }
    }

    /// Moves decoded body bytes from the input buffer to `out`, consuming everything it can.
    /// Returns true when the body is complete.
    private func decodeAvailable(into out: inout [UInt8]) throws -> Bool {
        guard bodyActive else { return true }
        switch framing {
        case .none:
            return true
        case .length:
            let n = min(remaining, inbuf.count)
            if n > 0 { inbuf.moveBytes(n, to: &out); remaining -= n }
            return remaining == 0
        case .untilClose:
            if inbuf.count > 0 { inbuf.moveBytes(inbuf.count, to: &out) }
            return false
        case .chunked:
            while true {
                switch chunkPhase {
                case .size:
                    guard let line = try takeLine() else { return false }
                    remaining = try parseChunkSize(line)
                    chunkPhase = remaining == 0 ? .trailers : .data
                case .data:
                    let n = min(remaining, inbuf.count)
                    if n > 0 { inbuf.moveBytes(n, to: &out); remaining -= n }
                    if remaining > 0 { return false }
                    chunkPhase = .dataEnd
                case .dataEnd:
                    guard inbuf.count > 0 else { return false }
                    if inbuf[0] == UInt8(ascii: "\n") {
                        inbuf.consume(1)
                    } else if inbuf[0] == UInt8(ascii: "\r") {
                        guard inbuf.count >= 2 else { return false }
                        guard inbuf[1] == UInt8(ascii: "\n") else {
                            throw HTTPTestClientError.malformedResponse("chunk data not followed by CRLF")
                        }
                        inbuf.consume(2)
                    } else {
                        throw HTTPTestClientError.malformedResponse("chunk data longer than its declared size")
                    }
                    chunkPhase = .size
                case .trailers:
                    guard let line = try takeLine() else { return false }
                    if line.isEmpty { chunkPhase = .done; return true }
                    guard let colon = line.firstIndex(of: ":") else {
                        throw HTTPTestClientError.malformedResponse("bad trailer line: \(line)")
                    }
                    trailers.append((String(line[..<colon]), trimOWS(line[line.index(after: colon)...])))
                case .done:
                    return true
                }
            }
        }
    }

    /// A complete line (without CR/LF) from the input buffer, or nil if none is buffered yet.
    private func takeLine() throws -> String? {
        guard let newline = inbuf.index(of: UInt8(ascii: "\n"), from: 0) else {
            if inbuf.count > Self.maxChunkLineBytes {
                throw HTTPTestClientError.malformedResponse("chunk-size or trailer line too long")
            }
            return nil
        }
        var end = newline
        if end > 0 && inbuf[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        let line = inbuf.string(0..<end)
        inbuf.consume(newline + 1)
        return line
    }

    private func parseChunkSize(_ line: String) throws -> Int {
        var size = 0
        var digits = 0
        for byte in line.utf8 {
            let value: Int
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = Int(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = Int(byte - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = Int(byte - UInt8(ascii: "A")) + 10
            case UInt8(ascii: ";"), UInt8(ascii: " "), UInt8(ascii: "\t"):
                // Chunk extensions (and whitespace before them) are ignored.
                guard digits > 0 else { throw HTTPTestClientError.malformedResponse("bad chunk size line: \(line)") }
                return size
            default:
                throw HTTPTestClientError.malformedResponse("bad chunk size line: \(line)")
            }
            guard digits < 15 else { throw HTTPTestClientError.malformedResponse("chunk size too large: \(line)") }
            size = size * 16 + value
            digits += 1
        }
        guard digits > 0 else { throw HTTPTestClientError.malformedResponse("empty chunk size line") }
        return size
    }

    private func finishBody() {
        guard bodyActive else { return }
        bodyActive = false
        responsesOnSocket += 1
        if closeAfterBody {
            // Buffered stream output (streamOut) and trailers survive closing the socket.
            closeSocket()
            mustReconnect = true
        }
    }

    // MARK: Socket I/O

    private func connectSocket() throws {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw HTTPTestClientError.connectFailed("\(host):\(port): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(first) }

        var lastError = "no addresses"
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let ai = candidate {
            candidate = ai.pointee.ai_next
            let s = socket(ai.pointee.ai_family, ai.pointee.ai_socktype, ai.pointee.ai_protocol)
            guard s >= 0 else { lastError = "socket: \(errnoString())"; continue }
            _ = fcntl(s, F_SETFD, FD_CLOEXEC)
            _ = fcntl(s, F_SETFL, fcntl(s, F_GETFL, 0) | O_NONBLOCK)
            var one: Int32 = 1
            _ = setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            #if canImport(Darwin)
            _ = setsockopt(s, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            let result = connect(s, ai.pointee.ai_addr, ai.pointee.ai_addrlen)
            if result != 0 {
                let code = errno
                guard code == EINPROGRESS || code == EINTR else {
                    lastError = String(cString: strerror(code))
                    _ = systemClose(s)
                    continue
                }
                // Non-blocking connect in progress: wait for writability, then ask for the outcome.
                fd = s
                defer { fd = -1 }
                do {
                    try waitFor(Int16(POLLOUT), deadline: monotonicNow() + timeout)
                } catch {
                    _ = systemClose(s)
                    lastError = "connect timed out after \(timeout)s"
                    continue
                }
                var soError: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                if getsockopt(s, SOL_SOCKET, SO_ERROR, &soError, &length) != 0 { soError = errno }
                if soError != 0 {
                    _ = systemClose(s)
                    lastError = String(cString: strerror(soError))
                    continue
                }
            }
            fd = s
            inbuf.reset()
            mustReconnect = false
            responsesOnSocket = 0
            closeAfterBody = false
            bodyActive = false
            connectionCount += 1
            return
        }
        throw HTTPTestClientError.connectFailed("\(host):\(port): \(lastError)")
    }

    private func closeSocket() {
        if fd >= 0 { _ = systemClose(fd) }
        fd = -1
        inbuf.reset()
        bodyActive = false
        closeAfterBody = false
        responsesOnSocket = 0
    }

    private func sendAll(_ bytes: UnsafeRawBufferPointer) throws {
        guard fd >= 0 else { throw Failure.send(EBADF) }
        guard var pointer = bytes.baseAddress else { return }
        var left = bytes.count
        while left > 0 {
            let n = send(fd, pointer, left, sendFlags)
            if n > 0 {
                pointer += n
                left -= n
                continue
            }
            let code = errno
            if n < 0 && code == EINTR { continue }
            if n < 0 && (code == EAGAIN || code == EWOULDBLOCK) {
                try waitFor(Int16(POLLOUT), deadline: monotonicNow() + timeout)
                continue
            }
            throw Failure.send(n == 0 ? EPIPE : code)
        }
    }

    /// Reads whatever is available into the input buffer, waiting until `deadline` if nothing is.
    /// Returns false at end of stream (FIN or reset).
    private func fill(deadline: Double) throws -> Bool {
        guard fd >= 0 else { return false }
        inbuf.reserveFree(readChunk)
        while true {
            let free = inbuf.freeCount
            let n = recv(fd, inbuf.writePointer, free, 0)
            if n > 0 {
                inbuf.didWrite(n)
                if n == free && readChunk < 1 << 20 { readChunk *= 2 }
                return true
            }
            if n == 0 { return false }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: try waitFor(Int16(POLLIN), deadline: deadline)
            case ECONNRESET: return false
            default: throw HTTPTestClientError.closed
            }
        }
    }

    private func waitFor(_ events: Int16, deadline: Double) throws {
        var pfd = pollfd(fd: fd, events: events, revents: 0)
        while true {
            let left = deadline - monotonicNow()
            let ms: Int32 = left <= 0 ? 0 : Int32(min((left * 1000).rounded(.up), 2_000_000_000))
            let r = poll(&pfd, 1, ms)
            if r > 0 { return }   // ready, or an error/hangup the next syscall will report
            if r == 0 {
                if ms == 0 || monotonicNow() >= deadline { throw HTTPTestClientError.timedOut }
                continue
            }
            if errno == EINTR { continue }
            throw HTTPTestClientError.closed
        }
    }
}

// MARK: - Helpers

#if os(Linux)
private let sendFlags = Int32(MSG_NOSIGNAL)
#else
private let sendFlags: Int32 = 0
#endif

@inline(__always)
private func systemClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(fd)
    #elseif canImport(Musl)
    return Musl.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}

private func errnoString() -> String { String(cString: strerror(errno)) }

private func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Raised once per process: soft RLIMIT_NOFILE up to the hard limit (capped), so tests can open
/// thousands of sockets.
private let fileDescriptorLimitRaised: Bool = {
    var limit = rlimit()
    #if canImport(Glibc)
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    let resource = RLIMIT_NOFILE
    #endif
    guard getrlimit(resource, &limit) == 0 else { return false }
    let wanted = min(limit.rlim_max, rlim_t(1 << 20))
    guard limit.rlim_cur < wanted else { return true }
    limit.rlim_cur = wanted
    return setrlimit(resource, &limit) == 0
}()

private func firstHeader(_ name: String, in headers: [(name: String, value: String)]) -> String? {
    headers.first(where: { asciiCaseInsensitiveEqual($0.name, name) })?.value
}

private func asciiCaseInsensitiveEqual(_ a: String, _ b: String) -> Bool {
    let x = a.utf8, y = b.utf8
    guard x.count == y.count else { return false }
    for (p, q) in zip(x, y) {
        let lp = (p >= 65 && p <= 90) ? p | 0x20 : p
        let lq = (q >= 65 && q <= 90) ? q | 0x20 : q
        if lp != lq { return false }
    }
    return true
}

private func trimOWS(_ s: Substring) -> String {
    var view = s.utf8[...]
    while let c = view.first, c == 32 || c == 9 { view = view.dropFirst() }
    while let c = view.last, c == 32 || c == 9 { view = view.dropLast() }
    return String(decoding: view, as: UTF8.self)
}

/// Lower-cased, trimmed, non-empty elements of a comma-separated header value.
private func commaList(_ value: String) -> [String] {
    value.split(separator: ",").map { trimOWS($0).lowercased() }.filter { !$0.isEmpty }
}

/// A byte queue with a read index: appends at the end, consumes from the front, compacts
/// only when the dead prefix is at least as large as the live bytes (amortised linear).
private final class ByteQueue {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var start = 0
    private var end = 0

    init(capacity: Int = 4096) {
        self.capacity = capacity
        base = .allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    var count: Int { end - start }
    var freeCount: Int { capacity - end }
    var writePointer: UnsafeMutablePointer<UInt8> { base + end }

    subscript(offset: Int) -> UInt8 { base[start + offset] }

    func reset() {
        start = 0
        end = 0
    }

    func didWrite(_ n: Int) { end += n }

    func consume(_ n: Int) {
        start += n
        if start == end { reset() }
    }

    /// Makes at least `minFree` bytes writable after the live bytes.
    func reserveFree(_ minFree: Int) {
        if capacity - end >= minFree { return }
        let live = count
        if start > 0 && start >= live && capacity - live >= minFree {
            memmove(base, base + start, live)
            start = 0
            end = live
            return
        }
        var newCapacity = capacity * 2
        while newCapacity - live < minFree { newCapacity *= 2 }
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.update(from: base + start, count: live)
        base.deallocate()
        base = newBase
        capacity = newCapacity
        start = 0
        end = live
    }

    /// Offset (from the front) of the first `byte` at or after `from`.
    func index(of byte: UInt8, from: Int) -> Int? {
        guard from < count, let hit = memchr(base + start + from, Int32(byte), count - from) else { return nil }
        return UnsafeRawPointer(base + start).distance(to: UnsafeRawPointer(hit))
    }

    func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(start: base + start + range.lowerBound, count: range.count), as: UTF8.self)
    }

    /// Appends the first `n` live bytes to `out` and consumes them.
    func moveBytes(_ n: Int, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: base + start, count: n))
        consume(n)
    }
}
