import CMicroHTTPD
import CShims
import CouchCore
import Foundation

// The listener's per-connection state: a request between libmicrohttpd's callbacks, and the
// connections it suspends (streamed feeds, deferred answers). Part of the listener: with
// Listener.swift and Listener+Bodies.swift, the only files that call libmicrohttpd.

/// What the listener keeps about a request between libmicrohttpd's callbacks.
final class RequestState {
    /// Counted in the listener's active requests until libmicrohttpd completes it.
    var counted = false
    let method: String
    let path: String
    let connection: OpaquePointer
    var body: [UInt8] = []
    var received = 0
    private(set) var sink: RequestBodySink?
    var sinkError: Error?
    var rejected = false
    /// Ambiguous body framing (a request-smuggling attempt): refused before the body is read.
    private(set) var framingError: CouchError?
    var responded = false
    /// A body follows the head (a non-zero length or a transfer coding): it has a deadline.
    private(set) var expectsBody = false
    /// Bytes of the request's header lines, as received.
    private(set) var headerBytes = 0
    var stream: StreamConnection?
    var deferred: DeferredConnection?
    let started = DispatchTime.now()
    private var headers: [String: String] = [:]
    private var query: [(name: String, value: String)] = []
    /// The request target's length, about as sent (path, `?`, `=` and `&` included).
    private(set) var targetLength = 0
    /// The most body bytes this request may send (an upload streamed to disk may send more).
    private(set) var maximumBodySize = 0

    init(method: String, path: String, connection: OpaquePointer, listener: Listener) {
        self.method = method
        self.path = path
        self.connection = connection
        let context = Unmanaged.passUnretained(self).toOpaque()
        MHD_get_connection_values(connection, .HEADER_KIND, collectHeader, context)
        MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, collectArgument, context)
        targetLength = query.reduce(path.utf8.count) { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 }
        let coding = headers["transfer-encoding"], lengths = headers["content-length"]
        // Most requests have no body: nothing below applies to them.
        guard coding != nil || lengths != nil else { return }
        expectsBody = coding != nil || lengths != "0"
        sink = listener.handler.bodySink(method: method, path: path, headers: headers)
        maximumBodySize = sink == nil
            ? listener.handler.maximumBodySize ?? listener.configuration.maximumBodySize
            : listener.configuration.maximumUploadSize
        let limit = maximumBodySize
        if let length = lengths.flatMap(Int.init), length > limit {
            rejected = true
        }
        // Repeated headers arrive joined by ", ". Two different lengths, or a length beside
        // a transfer coding, could frame the body differently for a proxy in front of us.
        if let coding, coding.lowercased() != "chunked" {
            // libmicrohttpd decodes `chunked` alone (see `Acceptor.check`).
            framingError = Acceptor.unknownTransferEncoding(coding)
        } else if let lengths {
            if lengths.utf8.contains(UInt8(ascii: ",")), Set(lengths.split(separator: ",").map { $0.trimmingWhitespace() }).count > 1 {
                framingError = CouchError.badRequest("Conflicting Content-Length headers")
            } else if coding != nil {
                framingError = CouchError.badRequest("Content-Length and Transfer-Encoding must not both be given")
            }
        }
    }

    /// The most a `Content-Length` sets aside for a body kept in memory, once its first bytes
    /// came (an announced length alone reserves nothing).
    private static let reservedBodyLimit = 8 * 1024 * 1024

    /// Sets aside room for the announced body before its first bytes are kept: grown by
    /// doubling, a replication batch of megabytes was copied and faulted in about twice.
    func reserveBodyOnce() {
        guard body.isEmpty, let length = headers["content-length"].flatMap(Int.init), length > 0 else { return }
        body.reserveCapacity(min(length, maximumBodySize, Self.reservedBodyLimit))
    }

    fileprivate func addHeader(_ name: String, _ value: String) {
        headerBytes += name.utf8.count + value.utf8.count + 4
        let key = name.headerNameLowercased
        if let existing = headers[key] {
            headers[key] = existing + ", " + value
        } else {
            headers[key] = value
        }
    }

    fileprivate func addArgument(_ name: String, _ value: String?) {
        let decodedName = PercentDecoding.decode(Substring(name), plusIsSpace: true) ?? name
        let decodedValue = value.map { PercentDecoding.decode(Substring($0), plusIsSpace: true) ?? $0 } ?? ""
        query.append((decodedName, decodedValue))
    }

    func makeRequest() -> HTTPRequest {
        var request = HTTPRequest(method: method, path: path, query: query, headers: headers, body: body, bodySink: sink)
        request.peerAddress = couchette_mhd_connection_ipv4(connection)
        return request
    }

    /// Milliseconds from the request's head to its last body byte, sent as CouchDB's
    /// `X-CouchDB-Body-Time`; set when the handler is called.
    private(set) var bodyMilliseconds = 0

    func bodyReceived() {
        bodyMilliseconds = Int((DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1_000_000)
    }

    /// `X-Couch-Request-ID`: the client's own when CouchDB would keep it (at most 36 letters,
    /// digits, `-` or `_`; clients tie their logs to ours with it), else a new nonce.
    var requestID: String {
        if let given = headers["x-couch-request-id"], !given.isEmpty, given.utf8.count <= 36,
           given.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || ($0 >= 48 && $0 <= 57)
                                   || ($0 | 0x20 >= UInt8(ascii: "a") && $0 | 0x20 <= UInt8(ascii: "z")) }) {
            return given
        }
        return RequestForms.requestID()
    }

    /// Milliseconds since the request's head, to two decimals (as `%.2f` would, without its
    /// cost on every request's log line).
    var elapsedMilliseconds: String {
        let hundredths = (DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds + 5_000) / 10_000
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}

/// A streaming response on one connection: suspends the connection while its stream
/// waits and resumes it when the stream wakes.
final class StreamConnection: @unchecked Sendable {
    let stream: ResponseStream
    private let connection: OpaquePointer
    private let descriptor: Int32
    private let lock = NSLock()
    private var suspended = false
    private var wakePending = false
    private var closed = false
    private var finished = false
    private weak var listener: Listener?

    init(stream: ResponseStream, connection: OpaquePointer, listener: Listener) {
        self.stream = stream
        self.connection = connection
        self.listener = listener
        descriptor = couchette_mhd_connection_fd(connection)
    }

    func begin() {
        stream.start { [weak self] in self?.wake() }
    }

    /// The stream is read without the lock held, so a commit that wakes this feed never
    /// waits for it; a wake that arrives during a read is remembered and the read retried.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        lock.lock()
        wakePending = false
        let isFinished = finished
        lock.unlock()
        if isFinished { return -1 }
        switch stream.read(into: buffer) {
        case .data(let count):
            return count
        case .end:
            return -1
        case .waiting:
            lock.lock()
            defer { lock.unlock() }
            if wakePending || finished { return 0 }
            // The buffer is the connection's send space in libmicrohttpd's pool, mostly touched
            // (zeroed) while the request was read; nothing in it is needed until the next write,
            // so a waiting feed gives its pages back (~30 KB each, most of a feed's memory). A
            // listing waits for its next page only briefly, and would fault them in again.
            if stream.waitsForEvents, buffer.count >= 16 * 1024, let start = buffer.baseAddress {
                couchette_release_pages(start, buffer.count)
            }
            suspended = true
            MHD_suspend_connection(connection)
            listener?.hangups?.watch(descriptor) { [weak self] in self?.finish() }
            return 0
        }
    }

    func wake() {
        lock.lock()
        defer { lock.unlock() }
        if suspended && !closed {
            suspended = false
            listener?.hangups?.unwatch(descriptor)
            MHD_resume_connection(connection)
        } else {
            wakePending = true
        }
    }

    /// Ends the stream at the next read (server stopping).
    func finish() {
        lock.lock()
        finished = true
        lock.unlock()
        wake()
    }

    func connectionClosed() {
        lock.lock()
        closed = true
        lock.unlock()
        listener?.hangups?.unwatch(descriptor)
        stream.close()
    }
}

/// A connection waiting for a deferred response: suspended until it is delivered, then
/// resumed so that libmicrohttpd calls the access handler again, which queues it. While it
/// waits, its socket is watched: a client that hangs up cancels the work (`cancellation`)
/// and is answered at once, so libmicrohttpd closes the connection now rather than when the
/// work ends (a suspended connection is not polled: it would stay in CLOSE-WAIT until then).
final class DeferredConnection: @unchecked Sendable {
    private let connection: OpaquePointer
    private let descriptor: Int32
    private let headers: [(name: String, value: String)]
    private weak var listener: Listener?
    let cancellation = RequestCancellation()
    private let lock = NSLock()
    private var response: HTTPResponse?
    private var suspended = false
    private var closed = false

    init(connection: OpaquePointer, headers: [(name: String, value: String)], listener: Listener) {
        self.connection = connection
        self.headers = headers
        self.listener = listener
        descriptor = couchette_mhd_connection_fd(connection)
    }

    /// Suspends the connection unless the response is already there (then false).
    func suspendUnlessDelivered() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if response != nil { return false }
        suspended = true
        MHD_suspend_connection(connection)
        listener?.hangups?.watch(descriptor) { [weak self, cancellation] in
            cancellation.cancel()
            self?.deliver(.error(CouchError.clientGone))
        }
        return true
    }

    func deliver(_ delivered: HTTPResponse) {
        var delivered = delivered
        for header in headers where header.name.lowercased() != "content-type" && delivered.header(header.name) == nil {
            delivered.headers.append(header)
        }
        lock.lock()
        defer { lock.unlock() }
        guard response == nil else { return }
        response = delivered
        // Answered another way (the server stopping): the work behind it may stop.
        cancellation.cancel()
        if suspended && !closed {
            suspended = false
            listener?.hangups?.unwatch(descriptor)
            MHD_resume_connection(connection)
        }
    }

    func take() -> HTTPResponse? {
        lock.withLock { response }
    }

    func connectionClosed() {
        lock.withLock { closed = true }
        listener?.hangups?.unwatch(descriptor)
        cancellation.cancel()
    }
}

// libmicrohttpd's iterators over a request's headers and query arguments (see Listener.swift
// for why its callbacks are file-level constants).
private let collectHeader: MHD_KeyValueIterator = { context, _, key, value in
    guard let context, let key else { return .YES }
    let state = Unmanaged<RequestState>.fromOpaque(context).takeUnretainedValue()
    state.addHeader(String(cString: key), value.map { String(cString: $0) } ?? "")
    return .YES
}

private let collectArgument: MHD_KeyValueIterator = { context, _, key, value in
    guard let context, let key else { return .YES }
    let state = Unmanaged<RequestState>.fromOpaque(context).takeUnretainedValue()
    state.addArgument(String(cString: key), value.map { String(cString: $0) })
    return .YES
}
