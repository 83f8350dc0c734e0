import CCurl
import Foundation

/// An HTTP/1.1 client on libcurl. It knows nothing of CouchDB: requests go out with a
/// method, URL, headers and a body (in memory, or read from files as it is sent);
/// responses come back whole (`send`) or piece by piece (`stream`: line by line for
/// continuous feeds, chunk by chunk for large bodies). All transfers share one curl multi handle driven by
/// one thread, so connections to a peer are kept alive and reused across requests, and
/// up to `maximumConnectionsPerHost` requests to one host run at once (more wait in line;
/// 0 for no limit).
public final class HTTPClient: Sendable {
    public let configuration: HTTPClientConfiguration
    private let loop: TransferLoop

    public init(configuration: HTTPClientConfiguration = HTTPClientConfiguration()) {
        self.configuration = configuration
        loop = TransferLoop(configuration: configuration)
    }

    deinit { loop.stop() }

    /// Sends a request and returns the whole response. Any status is a response; only
    /// transport failures (no connection, reset, timeout) throw. Cancelling the calling
    /// task abandons the transfer.
    public func send(_ request: Request) async throws(HTTPClientError) -> Response {
        let transfer = try Transfer(request: request, configuration: configuration, mode: .buffered)
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    transfer.onComplete = { result in continuation.resume(with: result) }
                    loop.submit(transfer)
                }
            } onCancel: {
                loop.cancel(transfer)
            }
        } catch let error as HTTPClientError {
            throw error
        } catch {
            throw .cancelled
        }
    }

    /// Sends a request and returns as soon as the response head has arrived; the body is
    /// then read from the returned stream, line by line or in chunks. The transfer pauses
    /// while the reader lags more than `streamBufferLimit` bytes behind.
    public func stream(_ request: Request, framing: StreamingResponse.Framing = .lines) async throws(HTTPClientError) -> StreamingResponse {
        let transfer = try Transfer(request: request, configuration: configuration,
                                    mode: framing == .lines ? .lines : .chunks)
        let stream = StreamingResponse(transfer: transfer, loop: loop)
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                    transfer.onHead = { result in continuation.resume(with: result) }
                    loop.submit(transfer)
                }
            } onCancel: {
                loop.cancel(transfer)
            }
        } catch let error as HTTPClientError {
            throw error
        } catch {
            throw .cancelled
        }
        return stream
    }

    /// Ends every transfer and the transfer thread.
    public func shutdown() { loop.stop() }
}

extension HTTPClient {
    /// What to send.
    public struct Request: Sendable {
        public var method: String
        public var url: String
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]?
        /// A body read while it is sent (files, large uploads); replaces `body` when set.
        public var upload: UploadBody?
        public var tls: TLSOptions
        /// The whole exchange must finish within this time; nil for no limit (feeds).
        public var timeoutMilliseconds: Int?
        /// Abandon the transfer after this long without a byte; nil for the client's
        /// `inactivityTimeoutSeconds`.
        public var inactivityTimeoutSeconds: Int?
        /// Keep a `Content-Encoding`d body as sent (libcurl otherwise decodes gzip itself):
        /// for bytes whose digest is of their encoded form.
        public var keepsContentEncoding = false

        public init(method: String = "GET", url: String, headers: [(name: String, value: String)] = [],
                    body: [UInt8]? = nil, upload: UploadBody? = nil, tls: TLSOptions = TLSOptions(),
                    timeoutMilliseconds: Int? = nil) {
            self.method = method
            self.url = url
            self.headers = headers
            self.body = body
            self.upload = upload
            self.tls = tls
            self.timeoutMilliseconds = timeoutMilliseconds
        }
    }

    /// What came back.
    public struct Response: Sendable {
        public let status: Int
        public let headers: [(name: String, value: String)]
        public let body: [UInt8]

        public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        /// The first value of a header, by case-insensitive name.
        public func header(_ name: String) -> String? {
            headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }

        /// Every value of a header (`Set-Cookie` may repeat).
        public func headerValues(_ name: String) -> [String] {
            headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
        }

        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// How to trust an HTTPS peer.
    public struct TLSOptions: Sendable, Hashable {
        /// A PEM bundle of the certificate authorities to trust instead of the system's.
        public var caFile: String?
        /// Pins the peer's public key: `sha256//<base64>` (several joined by `;`) or a PEM/DER file.
        public var pinnedPublicKey: String?
        /// Whether to check the peer's certificate and host name (on unless told otherwise).
        public var verifyPeer = true

        public init(caFile: String? = nil, pinnedPublicKey: String? = nil, verifyPeer: Bool = true) {
            self.caFile = caFile
            self.pinnedPublicKey = pinnedPublicKey
            self.verifyPeer = verifyPeer
        }
    }
}

/// Limits and timeouts shared by every request of one client.
public struct HTTPClientConfiguration: Sendable {
    public var connectTimeoutMilliseconds = 30_000
    /// A transfer that receives nothing for this long is abandoned: a dead peer, or a
    /// feed whose heartbeats stopped.
    public var inactivityTimeoutSeconds = 30
    /// Connections kept open to one host at most; further requests wait for one (0: no limit).
    public var maximumConnectionsPerHost = 8
    /// Idle connections kept for reuse, across hosts (0: libcurl's default, four per transfer).
    public var maximumCachedConnections = 64
    /// How far a streaming reader may lag behind before the transfer pauses.
    public var streamBufferLimit = 1 << 20
    public var userAgent = "CurlClient/1.0"

    public init() {}
}

/// Why a request got no response.
public enum HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The peer could not be reached: name not resolved, connection refused.
    case cannotConnect(String)
    /// No progress within the configured time.
    case timedOut(String)
    /// The connection broke or the peer answered something that is not HTTP.
    case connectionLost(String)
    /// TLS failed: unknown authority, wrong host, pinned key mismatch.
    case tls(String)
    /// The request was malformed (bad URL) or curl could not run it.
    case invalidRequest(String)
    case cancelled

    public var description: String {
        switch self {
        case .cannotConnect(let message): "cannot connect: \(message)"
        case .timedOut(let message): "timed out: \(message)"
        case .connectionLost(let message): "connection lost: \(message)"
        case .tls(let message): "TLS failure: \(message)"
        case .invalidRequest(let message): "invalid request: \(message)"
        case .cancelled: "cancelled"
        }
    }

    /// From a libcurl result code; the message never contains the URL.
    init(code: CURLcode) {
        let message = String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT:
            self = .cannotConnect(message)
        case CURLE_OPERATION_TIMEDOUT:
            self = .timedOut(message)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER:
            self = .tls(message)
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL, CURLE_BAD_FUNCTION_ARGUMENT:
            self = .invalidRequest(message)
        default:
            self = .connectionLost(message)
        }
    }
}
