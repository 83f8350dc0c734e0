import CouchCore

/// Why a replication (or one of its requests) failed, named as CouchDB's replicator names
/// it (`db_not_found`, `unauthorized`, ...). Reasons never contain credentials: URLs in
/// them are the redacted display form.
public struct ReplicationError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        case badRequest = "bad_request"
        case databaseNotFound = "db_not_found"
        case unauthorized
        case forbidden
        /// The peer could not be reached at all (refused, unresolved): the job goes offline.
        case peerUnreachable = "peer_unreachable"
        /// A request kept failing (5xx, reset, timeout) after its retries: the job crashes and restarts.
        case requestFailed = "http_request_failed"
        case checkpointCommitFailure = "checkpoint_commit_failure"
        case filterFetchError = "filter_fetch_error"
        /// The target refused a whole request as too large (413): the writer halves the batch.
        case requestBodyTooLarge = "request_body_too_large"
        case notImplemented = "not_implemented"
        case stopped
        case unknown = "unknown_error"
    }

    public let kind: Kind
    public let reason: String

    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    /// CouchDB's error name, as `{"error": ...}` carries it.
    public var error: String { kind.rawValue }

    /// Errors after which the job restarts by itself (with back-off) rather than fail.
    public var isTransient: Bool {
        switch kind {
        case .peerUnreachable, .requestFailed, .checkpointCommitFailure: true
        default: false
        }
    }

    public var description: String { "\(error): \(reason)" }

    /// `{"error": ..., "reason": ...}`
    public var json: JSONValue { ["error": JSONValue(error), "reason": JSONValue(reason)] }

    static func badRequest(_ reason: String) -> ReplicationError { ReplicationError(.badRequest, reason) }
}
