import CouchCore

/// A request as the listener read it: raw path (still percent-encoded, so routes can
/// tell `%2F` from `/`), decoded query parameters in order, headers and the body.
public struct HTTPRequest: Sendable {
    public let method: String
    public let path: String
    public let query: [(name: String, value: String)]
    /// Header names in lower case; repeated headers joined with ", ".
    public let headers: [String: String]
    public var body: [UInt8]
    /// Where the body went instead of `body`, for uploads streamed as they arrive.
    public var bodySink: RequestBodySink?
    /// How many `_rewrite`s led to this request (CouchDB's `rewrite_limit` bounds it).
    public var rewrites = 0
    /// The client's IPv4 address in network byte order, 0 where the listener does not know
    /// it: failed logins are counted per address (`LoginLockout`).
    public var peerAddress: UInt32 = 0

    public init(method: String, path: String, query: [(name: String, value: String)],
                headers: [String: String], body: [UInt8], bodySink: RequestBodySink? = nil) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.bodySink = bodySink
    }

    public func header(_ name: String) -> String? { headers[name.headerNameLowercased] }

    /// The last value given for a query parameter, as CouchDB reads them.
    public func queryValue(_ name: String) -> String? {
        query.last(where: { $0.name == name })?.value
    }

    /// Whether a `multipart/SUBTYPE` answer may be sent rather than JSON: `Accept` names it or
    /// `multipart/*`, or names `*/*` beside other types, with a weight above 0 (CouchDB's
    /// `accepts_content_type`). No header, or a lone `*/*` (curl's default), gets JSON, where
    /// CouchDB sends multipart.
    public func acceptsMultipart(_ subtype: String) -> Bool {
        guard let accept = header("accept") else { return false }
        var named = false
        var wildcard = false
        var others = false
        for (type, weight) in Self.weightedValues(accept) where weight > 0 {
            switch type {
            case "multipart/" + subtype, "multipart/*": named = true
            case "*/*": wildcard = true
            default: others = true
            }
        }
        return named || (wildcard && others)
    }

    /// The values of an `Accept`-like header, lowercased, each with its `q` weight (1 when it
    /// names none), in the header's order.
    static func weightedValues(_ header: String) -> [(value: String, weight: Double)] {
        header.lowercased().split(separator: ",").compactMap { entry -> (value: String, weight: Double)? in
            let parts = entry.split(separator: ";")
            guard let value = parts.first?.trimmingWhitespace(), !value.isEmpty else { return nil }
            let weight = parts.dropFirst().lazy.map { $0.trimmingWhitespace() }.first { $0.hasPrefix("q=") }
                .flatMap { Double($0.dropFirst(2)) } ?? 1
            return (value, weight)
        }
    }

    public var contentType: String? {
        header("content-type")?.split(separator: ";").first.map { $0.trimmingWhitespace().lowercased() }
    }
}

/// Receives a request body as it arrives, so an upload never sits in memory whole. The
/// handler takes what the sink collected; a body that is never handled is aborted.
public protocol RequestBodySink: AnyObject, Sendable {
    func append(_ bytes: UnsafeRawBufferPointer) throws
    /// The client went away or the request was refused: discard what was received.
    func abort()
}

/// What the listener serves requests with.
public protocol RequestHandler: Sendable {
    func handle(_ request: HTTPRequest) -> HTTPResponse
    /// A sink for this request's body, decided once its headers are read; nil keeps it in memory.
    func bodySink(method: String, path: String, headers: [String: String]) -> RequestBodySink?
    /// The largest body kept in memory for a request starting now, when it may change while
    /// the server runs (`[chttpd] max_http_request_size`); nil: the listener's configured one.
    var maximumBodySize: Int? { get }
}

extension RequestHandler {
    public var maximumBodySize: Int? { nil }
}

extension String {
    /// A header name in lower case. Names are ASCII tokens: no Unicode case mapping (which
    /// costs more than the rest of reading a header), and no copy when already lower case.
    var headerNameLowercased: String {
        guard utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else { return self }
        // Written in place: a name of up to 15 bytes then needs no allocation at all.
        return String(unsafeUninitializedCapacity: utf8.count) { buffer in
            for (index, byte) in utf8.enumerated() {
                buffer[index] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
            }
            return utf8.count
        }
    }

    /// Whether two header names are the same, ASCII case aside (without lowering either).
    func isSameHeaderName(as other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        return zip(utf8, other.utf8).allSatisfy { a, b in
            a == b || (a | 0x20 == b | 0x20 && a | 0x20 >= UInt8(ascii: "a") && a | 0x20 <= UInt8(ascii: "z"))
        }
    }
}

extension StringProtocol {
    func trimmingWhitespace() -> String {
        let text = String(self)
        guard let start = text.firstIndex(where: { !$0.isWhitespace }),
              let end = text.lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(text[start...end])
    }
}
