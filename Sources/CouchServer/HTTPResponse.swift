import CouchCore

/// A response: a status, headers, and either bytes or a stream that produces its
/// body over time (change feeds).
public struct HTTPResponse: Sendable {
    public enum Body: Sendable {
        case bytes([UInt8])
        case stream(ResponseStream)
        /// A byte range of a file, sent by the kernel without passing through memory.
        case file(path: String, offset: Int, length: Int)
        /// A response (status included) decided later: the connection waits, holding no
        /// thread, until the `DeferredResponse` delivers it. This response's own headers
        /// (CORS, cookies) are added to the one delivered.
        case deferred(DeferredResponse)
    }

    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: Body

    public init(status: Int, headers: [(name: String, value: String)] = [], body: Body = .bytes([])) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public static let jsonContentType = "application/json"

    public static func json(_ status: Int, _ value: JSONValue, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        var bytes = value.serialized()
        bytes.append(UInt8(ascii: "\n"))
        return json(status, bytes: bytes, headers: headers)
    }

    /// A JSON body already serialised (documents spliced from stored bytes).
    public static func json(_ status: Int, bytes: [UInt8], headers: [(name: String, value: String)] = []) -> HTTPResponse {
        var all = [(name: String, value: String)]()
        all.reserveCapacity(headers.count + 1)
        all.append(("Content-Type", jsonContentType))
        all.append(contentsOf: headers)
        return HTTPResponse(status: status, headers: all, body: .bytes(bytes))
    }

    /// The one place a `CouchError` becomes CouchDB's `{"error","reason"}` response.
    public static func error(_ error: CouchError) -> HTTPResponse {
        // `WWW-Authenticate` is added by `CouchServer` only where CouchDB sends it.
        json(error.status, error.json)
    }

    public static let ok = json(200, ["ok": true])

    public func header(_ name: String) -> String? {
        headers.first { $0.name.isSameHeaderName(as: name) }?.value
    }

    public mutating func setHeader(_ name: String, _ value: String) {
        headers.removeAll { $0.name.isSameHeaderName(as: name) }
        headers.append((name, value))
    }
}

/// What a streaming body hands the listener each time it is asked for more.
public enum StreamChunk: Sendable {
    case data(Int)
    /// Nothing to send now; the stream calls its `wake` when it has more.
    case waiting
    case end
}

/// A response body produced over time. The listener calls `read` on its own thread;
/// when `read` answers `.waiting` the connection is suspended (no thread, no CPU)
/// until the stream calls the `wake` the listener gave it.
public protocol ResponseStream: AnyObject, Sendable {
    func start(wake: @escaping @Sendable () -> Void)
    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamChunk
    /// The connection closed (client gone or server stopping); release resources.
    func close()
    /// Whether the stream spends most of its life waiting for events (a continuous or
    /// longpoll feed) rather than producing a long body: its connection then keeps a small
    /// send block, since thousands of them may be open at once.
    var waitsForEvents: Bool { get }
    /// The length of the whole body when known in advance (sent as `Content-Length`, not chunked).
    var contentLength: Int? { get }
}

extension ResponseStream {
    var waitsForEvents: Bool { false }
    var contentLength: Int? { nil }
}

/// A response whose status is not known yet (`POST /_replicate` waits for its replication):
/// `start` is called once and must call `deliver` once, from any thread. `cancellation` is
/// set if the client hangs up first.
public protocol DeferredResponse: AnyObject, Sendable {
    func start(cancellation: RequestCancellation, deliver: @escaping @Sendable (HTTPResponse) -> Void)
}
