import CMicroHTTPD
import CShims
import CouchCore
import Foundation
import Logging

public struct ListenerConfiguration: Sendable {
    public var port: Int = 5984
    public var bindAddress = "127.0.0.1"
    /// libmicrohttpd worker threads; handlers are synchronous, so this bounds how many
    /// requests (and so how many writers sharing a group commit) run at once.
    public var threadCount = 16
    public var connectionLimit = 8192
    public var idleTimeoutSeconds = 300
    /// Bodies kept in memory (JSON); streamed uploads (attachments) may reach `maximumUploadSize`.
    public var maximumBodySize = 64 * 1024 * 1024
    public var maximumUploadSize = 4 * 1024 * 1024 * 1024
    public var maximumURLLength = 16 * 1024
    /// Request headers, names and values together; larger ones answer 431.
    public var maximumHeaderSize = 16 * 1024
    /// Seconds a new connection has to send its first request's head, however it trickles.
    public var headerTimeoutSeconds = 30.0
    /// A request body must arrive at `minimumBodyRate` bytes per second on average once
    /// `bodyGraceSeconds` have passed since its head, or its connection is closed.
    public var bodyGraceSeconds = 30.0
    public var minimumBodyRate = 16 * 1024
    /// Connections one client address may hold; nil: a quarter of `connectionLimit`, or all of it
    /// when bound to loopback (where every client has the same address).
    public var maximumConnectionsPerAddress: Int?
    public init() {}
}

/// The only file that touches libmicrohttpd: reads requests, hands them to `handler`,
/// and writes responses, suspending connections whose streams are waiting.
public final class Listener: @unchecked Sendable {
    public let configuration: ListenerConfiguration
    let handler: RequestHandler
    private var daemon: OpaquePointer?
    public private(set) var port = 0
    let logger = Logger(label: "couchette.http")
    private let streamsLock = NSLock()
    private var streams: [ObjectIdentifier: StreamConnection] = [:]
    /// Set by `stop`: a stream that starts after it (a kept-alive connection's next request)
    /// ends at once, since libmicrohttpd aborts when it stops with a suspended connection.
    private var stopping = false
    private var acceptor: Acceptor?
    /// Suspended feeds whose client hangs up are resumed, so that their connection closes.
    private(set) var hangups: HangupWatcher?
    /// Bodies that trickle in too slowly have their connection closed.
    private var bodyDeadlines: BodyDeadlines?
    private let connectionsLock = NSLock()
    private var connectionCount = 0
    private var connectionsByAddress: [UInt32: Int] = [:]

    /// Connections handed to libmicrohttpd and not closed yet (change feeds waiting included),
    /// counted from the hand-off: libmicrohttpd takes them in on its worker's next turn.
    public var openConnectionCount: Int { connectionsLock.withLock { connectionCount } }

    func openConnections(from address: UInt32) -> Int {
        connectionsLock.withLock { connectionsByAddress[address, default: 0] }
    }

    fileprivate func countConnection(_ change: Int, address: UInt32) {
        connectionsLock.withLock {
            connectionCount += change
            let count = connectionsByAddress[address, default: 0] + change
            connectionsByAddress[address] = count > 0 ? count : nil
        }
    }

    public init(configuration: ListenerConfiguration, handler: RequestHandler) {
        self.configuration = configuration
        self.handler = handler
    }

    public convenience init(configuration: ListenerConfiguration, handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
        self.init(configuration: configuration, handler: ClosureHandler(handle: handler))
    }

    public func start() throws {
        var address = in_addr()
        guard inet_pton(AF_INET, configuration.bindAddress, &address) == 1 else {
            throw CouchError.badRequest("bind address must be an IPv4 address: \(configuration.bindAddress)")
        }
        var options = couchette_mhd_options()
        options.flags = UInt32(MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue
            | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_TURBO.rawValue
            // Couchette writes Date itself, after the response's own headers: some clients
            // (python-couchdb) read a login's cookie from the first header, as CouchDB sends it.
            | MHD_USE_SUPPRESS_DATE_NO_CLOCK.rawValue
            // Connections come from the `Acceptor`, once their first request's head is in.
            | MHD_USE_NO_LISTEN_SOCKET.rawValue)
        // Settings are range-checked where they are read (`ConfigurationRules`); an embedding
        // application's own values must not trap here either.
        guard (0...65535).contains(configuration.port) else { throw CouchError.badRequest("port must be 0 to 65535") }
        options.port = UInt16(configuration.port)
        options.bind_address = address.s_addr
        options.thread_pool_size = UInt32(clamping: max(1, configuration.threadCount))
        // The connection limit is the `Acceptor`'s, never libmicrohttpd's: 0.9.75 keeps a worker's
        // mutex locked when a connection given with MHD_add_connection finds that worker at its
        // limit (fixed in 1.0.0), and the worker never runs again; its connections stay open
        // (CLOSE-WAIT) for good. It picks the worker by descriptor number and counts only the
        // connections that worker has taken in, so one worker reaches its share well before the
        // daemon is full. Each worker may hold every connection the Acceptor allows, and more.
        let perWorker = min(max(0, configuration.connectionLimit), 1 << 31) + 1024
        options.connection_limit = UInt32(clamping: min(max(1, configuration.threadCount), 1 << 16) * perWorker)
        options.connection_timeout_seconds = UInt32(clamping: configuration.idleTimeoutSeconds)
        // Each connection's buffer holds the request line and headers (and the response head).
        // libmicrohttpd keeps each connection's request line and headers in this pool (and
        // clears it for every request), so it is sized to the limits, not beyond.
        options.connection_memory_limit = max(64 * 1024,
                                              configuration.maximumURLLength + configuration.maximumHeaderSize + 16 * 1024)
        let context = Unmanaged.passUnretained(self).toOpaque()
        couchette_mhd_set_error_page_builder(errorPage)
        guard let daemon = couchette_mhd_start(&options, accessHandler, context, requestCompleted, context,
                                               connectionNotified, context) else {
            throw CouchError.internalError("cannot start the HTTP daemon")
        }
        let limits = Acceptor.Limits(headerDeadlineSeconds: configuration.headerTimeoutSeconds,
                                     maximumURLLength: configuration.maximumURLLength,
                                     maximumHeaderSize: configuration.maximumHeaderSize,
                                     connectionLimit: configuration.connectionLimit,
                                     connectionsPerAddress: configuration.maximumConnectionsPerAddress
                                         ?? (address.s_addr & 0xff == 127 ? configuration.connectionLimit
                                                                         : max(16, configuration.connectionLimit / 4)))
        let acceptor: Acceptor
        do {
            acceptor = try Acceptor(bindAddress: address, port: configuration.port, limits: limits,
                                    openConnections: { [unowned self] in openConnectionCount },
                                    openConnectionsFrom: { [unowned self] in openConnections(from: $0) }) { descriptor, peer in
                var peer = peer
                // Counted before libmicrohttpd may close it (its worker notifies the close).
                self.countConnection(1, address: peer.sin_addr.s_addr)
                let added = withUnsafePointer(to: &peer) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        MHD_add_connection(daemon, descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                // libmicrohttpd closes a connection it cannot take: its client sees it closed
                // without an answer, which only this line explains.
                if added != .YES {
                    self.countConnection(-1, address: peer.sin_addr.s_addr)
                    self.logger.warning("libmicrohttpd refused a connection; it was closed unanswered")
                }
            }
        } catch {
            MHD_stop_daemon(daemon)
            throw CouchError.internalError("cannot listen on \(configuration.bindAddress):\(configuration.port)")
        }
        self.daemon = daemon
        self.acceptor = acceptor
        hangups = HangupWatcher()
        bodyDeadlines = BodyDeadlines(graceSeconds: configuration.bodyGraceSeconds,
                                      minimumRate: configuration.minimumBodyRate, logger: logger)
        port = acceptor.port
        acceptor.start()
    }

    /// Graceful stop, first half: no new connection is accepted, requests arriving on open
    /// ones answer 503 and close, feeds end, and the requests being handled finish and have
    /// their responses sent (waiting at most `timeout` seconds). `stop` then closes the rest.
    public func drain(timeout: Double = 10) {
        acceptor?.stop()
        acceptor = nil
        streamsLock.lock()
        stopping = true
        let open = Array(streams.values)
        streamsLock.unlock()
        open.forEach { $0.finish() }
        activeLock.withLock { draining = true }
        let deadline = Date().addingTimeInterval(timeout)
        while activeLock.withLock({ activeRequests }) > 0, Date() < deadline { usleep(10_000) }
    }

    private let activeLock = NSLock()
    /// Requests handled or whose response is being sent (from the handler's call to libmicrohttpd's completion).
    private var activeRequests = 0
    private var draining = false

    public func stop() {
        guard let daemon else { return }
        acceptor?.stop()
        acceptor = nil
        // Suspended connections must be resumed before the daemon stops.
        streamsLock.lock()
        stopping = true
        let open = Array(streams.values)
        streamsLock.unlock()
        open.forEach { $0.finish() }
        let waiting = deferredLock.withLock { Array(deferreds.values) }
        waiting.forEach { $0.deliver(Self.stoppingAnswer) }
        MHD_stop_daemon(daemon)
        hangups?.stop()
        hangups = nil
        bodyDeadlines?.stop()
        bodyDeadlines = nil
        self.daemon = nil
    }

    /// Streaming responses currently open (change feeds).
    public var openStreamCount: Int {
        streamsLock.lock()
        defer { streamsLock.unlock() }
        return streams.count
    }

    func register(_ stream: StreamConnection) {
        streamsLock.lock()
        streams[ObjectIdentifier(stream)] = stream
        let isStopping = stopping
        streamsLock.unlock()
        if isStopping { stream.finish() }
    }

    func unregister(_ stream: StreamConnection) {
        streamsLock.lock()
        streams[ObjectIdentifier(stream)] = nil
        streamsLock.unlock()
    }

    private let deferredLock = NSLock()
    private var deferreds: [ObjectIdentifier: DeferredConnection] = [:]

    /// A deferred answer registered once the daemon began stopping gets 503 at once (before
    /// its connection is suspended): `stop` answers only those registered before it looked,
    /// and libmicrohttpd aborts the process if a connection is still suspended when it stops.
    func register(_ waiting: DeferredConnection) {
        deferredLock.withLock { deferreds[ObjectIdentifier(waiting)] = waiting }
        if streamsLock.withLock({ stopping }) { waiting.deliver(Self.stoppingAnswer) }
    }

    static var stoppingAnswer: HTTPResponse { .error(CouchError(.serviceUnavailable, "The server is stopping.")) }

    func unregister(_ waiting: DeferredConnection) {
        _ = deferredLock.withLock { deferreds.removeValue(forKey: ObjectIdentifier(waiting)) }
    }

    // MARK: - Request handling (called from libmicrohttpd threads)

    fileprivate func handle(connection: OpaquePointer, url: String, method: String,
                            upload: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>,
                            state statePointer: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> MHD_Result {
        guard let raw = statePointer.pointee else {
            let state = RequestState(method: method, path: url, connection: connection, listener: self)
            statePointer.pointee = Unmanaged.passRetained(state).toOpaque()
            // Refused at once when the headers say so, before a client that sent
            // `Expect: 100-continue` sends the body.
            if let refusal = refusal(state, adding: 0) { return refuse(refusal, state: state, method: method, url: url) }
            if state.expectsBody {
                bodyDeadlines?.watch(state, descriptor: couchette_mhd_connection_fd(connection), label: "\(method) \(url)")
            }
            return .YES
        }
        let state = Unmanaged<RequestState>.fromOpaque(raw).takeUnretainedValue()
        let count = uploadSize.pointee
        uploadSize.pointee = 0
        if state.responded {
            // Resumed by a deferred response that has been delivered.
            if let waiting = state.deferred, let response = waiting.take() {
                state.deferred = nil
                unregister(waiting)
                logger.info("\(method) \(url) \(response.status) \(state.elapsedMilliseconds)ms")
                return queue(response, state: state, closing: false)
            }
            return .YES
        }
        if let refusal = refusal(state, adding: count) { return refuse(refusal, state: state, method: method, url: url) }
        if count > 0 {
            state.received += count
            if state.expectsBody { bodyDeadlines?.received(count, for: state) }
            guard let upload else { return .YES }
            let bytes = UnsafeRawBufferPointer(start: upload, count: count)
            if let sink = state.sink {
                if state.sinkError == nil {
                    do { try sink.append(bytes) } catch { state.sinkError = error }
                }
            } else {
                state.reserveBodyOnce()
                state.body.append(contentsOf: bytes)
            }
            return .YES
        }
        state.responded = true
        state.bodyReceived()
        if state.expectsBody { bodyDeadlines?.unwatch(state) }
        let request = state.makeRequest()
        let response: HTTPResponse
        if state.sinkError != nil { state.sink?.abort() }
        if let error = state.sinkError {
            response = .error(error as? CouchError ?? CouchError.badRequest("cannot read the request body"))
        } else if activeLock.withLock({ draining }) {
            logger.info("\(method) \(url) 503 (stopping)")
            return queue(.error(CouchError(.serviceUnavailable, "The server is stopping.")), state: state, closing: true)
        } else {
            activeLock.withLock { activeRequests += 1 }
            state.counted = true
            response = handler.handle(request)
        }
        // A deferred answer is logged once delivered, with its own status.
        if case .deferred = response.body {} else {
            logger.info("\(method) \(url) \(response.status) \(state.elapsedMilliseconds)ms")
        }
        return queue(response, state: state, closing: false)
    }

    /// A request over the URL, header or body limits, or with ambiguous framing. Checked from
    /// the first call on, for every request of a connection: the `Acceptor` vets only the first.
    private func refusal(_ state: RequestState, adding count: Int) -> CouchError? {
        if state.targetLength > configuration.maximumURLLength { return CouchError(.uriTooLong, "URL is too long") }
        if let framing = state.framingError { return framing }
        if state.headerBytes > configuration.maximumHeaderSize {
            return CouchError(.headerTooLarge, "Request headers are too large")
        }
        if state.rejected || state.received + count > state.maximumBodySize {
            return CouchError(.tooLarge, "the request entity is too large")
        }
        return nil
    }

    private func refuse(_ error: CouchError, state: RequestState, method: String, url: String) -> MHD_Result {
        state.responded = true
        if state.expectsBody { bodyDeadlines?.unwatch(state) }
        state.sink?.abort()
        logger.info("\(method) \(url) \(error.status) \(error.reason)")
        return queue(.error(error), state: state, closing: true)
    }

    private func queue(_ response: HTTPResponse, state: RequestState, closing: Bool) -> MHD_Result {
        let mhdResponse: OpaquePointer?
        switch response.body {
        case .bytes(let bytes):
            mhdResponse = Self.response(sending: bytes)
        case .file(let path, let offset, let length):
            let descriptor = open(path, O_RDONLY)
            guard descriptor >= 0 else {
                return queue(.error(CouchError.internalError("cannot open file")), state: state, closing: false)
            }
            mhdResponse = MHD_create_response_from_fd_at_offset64(UInt64(length), descriptor, UInt64(offset))
            if mhdResponse == nil { close(descriptor) }
        case .deferred(let deferred):
            let waiting = DeferredConnection(connection: state.connection, headers: response.headers, listener: self)
            state.deferred = waiting
            register(waiting)
            deferred.start(cancellation: waiting.cancellation) { waiting.deliver($0) }
            if waiting.suspendUnlessDelivered() { return .YES }
            let delivered = waiting.take() ?? .error(CouchError.internalError("no response"))
            state.deferred = nil
            unregister(waiting)
            logger.info("\(state.method) \(state.path) \(delivered.status) \(state.elapsedMilliseconds)ms")
            return queue(delivered, state: state, closing: closing)
        case .stream(let stream):
            let connection = StreamConnection(stream: stream, connection: state.connection, listener: self)
            state.stream = connection
            register(connection)
            let box = Unmanaged.passRetained(connection).toOpaque()
            // The block is where libmicrohttpd has the stream write when it cannot chunk (an HTTP/1.0
            // client), and it is allocated and zeroed with every response: a feed's rows are small
            // and thousands of feeds may wait at once, so theirs is small.
            let block = stream.waitsForEvents ? 1024 : 32 * 1024
            let size = stream.contentLength.map { UInt64($0) } ?? UInt64.max // MHD_SIZE_UNKNOWN: chunked
            mhdResponse = MHD_create_response_from_callback(size, block, streamReader, box, streamReleased)
            connection.begin()
        }
        guard let mhdResponse else { return .NO }
        for (name, value) in response.headers where name == "Set-Cookie" { addResponseHeader(mhdResponse, name, value) }
        for (name, value) in response.headers where name != "Set-Cookie" { addResponseHeader(mhdResponse, name, value) }
        Self.addCommonHeaders(to: mhdResponse, cacheControl: response.header("Cache-Control") == nil,
                              requestID: response.header("X-Couch-Request-ID") == nil ? state.requestID : nil)
        addResponseHeader(mhdResponse, "X-CouchDB-Body-Time", String(state.bodyMilliseconds))
        if closing { MHD_add_response_header(mhdResponse, "Connection", "close") }
        let result = MHD_queue_response(state.connection, UInt32(response.status), mhdResponse)
        MHD_destroy_response(mhdResponse)
        return result
    }

    /// `Server`, `Date`, and unless the response has its own, CouchDB's default `Cache-Control`
    /// and a request ID (the client's own when it sent one).
    fileprivate static func addCommonHeaders(to response: OpaquePointer, cacheControl: Bool = true,
                                             requestID: String? = RequestForms.requestID()) {
        addResponseHeader(response, "Server", ServerInfo.serverHeader)
        addResponseHeader(response, "Date", HTTPDate.now())
        if cacheControl { MHD_add_response_header(response, "Cache-Control", "must-revalidate") }
        if let requestID { addResponseHeader(response, "X-Couch-Request-ID", requestID) }
    }

    /// What libmicrohttpd's own error pages (0.9.75's texts) say, as CouchDB's errors; it
    /// sends them with their status (and `Connection: close`). Nil for a Content-Length it
    /// cannot read: it would send that answer's head twice (it builds it again once the
    /// headers are parsed), so the connection is closed instead. Only a kept-alive
    /// connection's later request gets there: the `Acceptor` answers a first one.
    static func libraryError(page: String) -> CouchError? {
        if page.contains("chunked encoding") { return .badRequest("Invalid chunked encoding of the request body") }
        if page.contains("chunk size") { return CouchError(.tooLarge, "A chunk of the request body is too large") }
        if page.contains("Content-Length") { return nil }
        if page.contains("header was too big") { return CouchError(.headerTooLarge, "Request line or headers are too large") }
        if page.contains("Internal server error") { return CouchError(.unknownError, "internal error") }
        return .badRequest("Malformed request")
    }

    fileprivate func completed(state raw: UnsafeMutableRawPointer) {
        let state = Unmanaged<RequestState>.fromOpaque(raw).takeRetainedValue()
        if state.counted { activeLock.withLock { activeRequests -= 1 } }
        if state.expectsBody { bodyDeadlines?.unwatch(state) }
        if !state.responded { state.sink?.abort() }
        if let waiting = state.deferred {
            waiting.connectionClosed()
            unregister(waiting)
        }
        if let stream = state.stream {
            stream.connectionClosed()
            unregister(stream)
        }
    }
}

/// Adapts a plain function to `RequestHandler`; bodies stay in memory.
struct ClosureHandler: RequestHandler {
    let handle: @Sendable (HTTPRequest) -> HTTPResponse
    func handle(_ request: HTTPRequest) -> HTTPResponse { handle(request) }
    func bodySink(method: String, path: String, headers: [String: String]) -> RequestBodySink? { nil }
}

// libmicrohttpd's callbacks. They live here, not in main.swift, because top-level
// code there is main-actor isolated and would trap on a pool thread.

private let accessHandler: MHD_AccessHandlerCallback = { context, connection, url, method, _, upload, uploadSize, state in
    guard let context, let connection, let url, let method, let uploadSize, let state else { return .NO }
    let listener = Unmanaged<Listener>.fromOpaque(context).takeUnretainedValue()
    return listener.handle(connection: connection, url: String(cString: url), method: String(cString: method),
                           upload: upload, uploadSize: uploadSize, state: state)
}

private let requestCompleted: MHD_RequestCompletedCallback = { context, _, state, _ in
    guard let context, let raw = state?.pointee else { return }
    let listener = Unmanaged<Listener>.fromOpaque(context).takeUnretainedValue()
    listener.completed(state: raw)
    state?.pointee = nil
}

private let connectionNotified: MHD_NotifyConnectionCallback = { context, connection, _, code in
    guard let context else { return }
    let listener = Unmanaged<Listener>.fromOpaque(context).takeUnretainedValue()
    // Opened connections are counted when handed over (`Listener.start`), closed ones here.
    guard let connection, code.rawValue == 1 else { return }   // MHD_CONNECTION_NOTIFY_CLOSED
    listener.countConnection(-1, address: couchette_mhd_connection_ipv4(connection))
}

/// libmicrohttpd's answer to a request it refuses itself, as CouchDB's JSON (see CShims.h).
private let errorPage: couchette_mhd_error_page_builder = { message, length in
    guard let message else { return nil }
    let page = String(decoding: UnsafeRawBufferPointer(start: message, count: length), as: UTF8.self)
    guard let error = Listener.libraryError(page: page) else { return nil }
    var body: [UInt8] = []
    error.json.write(to: &body)
    body.append(10)
    guard let response = Listener.response(sending: body) else { return nil }
    MHD_add_response_header(response, "Content-Type", "application/json")
    Listener.addCommonHeaders(to: response)
    return response
}

private let streamReader: MHD_ContentReaderCallback = { context, _, buffer, maximum in
    guard let context, let buffer else { return -2 }
    let connection = Unmanaged<StreamConnection>.fromOpaque(context).takeUnretainedValue()
    return connection.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: maximum))
}

private let streamReleased: MHD_ContentReaderFreeCallback = { context in
    guard let context else { return }
    Unmanaged<StreamConnection>.fromOpaque(context).release()
}

/// Hands a header to libmicrohttpd, which copies it, through a buffer on the stack. A Swift
/// string of up to 15 bytes is no C string in memory: passed as one, it was first copied to
/// the heap (eight allocations a response).
private func addResponseHeader(_ response: OpaquePointer, _ name: String, _ value: String) {
    let nameCount = name.utf8.count, valueCount = value.utf8.count
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: nameCount + valueCount + 2) { buffer in
        _ = UnsafeMutableBufferPointer(rebasing: buffer[..<nameCount]).initialize(fromContentsOf: name.utf8)
        buffer[nameCount] = 0
        _ = UnsafeMutableBufferPointer(rebasing: buffer[(nameCount + 1)...]).initialize(fromContentsOf: value.utf8)
        buffer[nameCount + 1 + valueCount] = 0
        let text = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
        MHD_add_response_header(response, text, text + nameCount + 1)
    }
}
