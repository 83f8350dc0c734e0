#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one error type that crosses module boundaries. Its `kind` names CouchDB's
/// error string; the HTTP status is decided in exactly one place (`CouchError.status`),
/// after CouchDB's `chttpd:error_info/1`.
public struct CouchError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        case badRequest = "bad_request"
        case notFound = "not_found"
        case conflict = "conflict"
        case fileExists = "file_exists"
        case preconditionFailed = "precondition_failed"
        case missingStub = "missing_stub"
        case forbidden = "forbidden"
        case unauthorized = "unauthorized"
        case methodNotAllowed = "method_not_allowed"
        case notAcceptable = "not_acceptable"
        case badContentType = "bad_content_type"
        case tooLarge = "too_large"
        case documentTooLarge = "document_too_large"
        case headerTooLarge = "header_too_large"
        case uriTooLong = "uri_too_long"
        case invalidDatabaseName = "illegal_database_name"
        case illegalDocumentID = "illegal_docid"
        case documentValidation = "doc_validation"
        case queryParseError = "query_parse_error"
        case unknownError = "unknown_error"
        case internalServerError = "internal_server_error"
        case serviceUnavailable = "service_unavailable"
        case notImplemented = "not_implemented"
        case rangeNotSatisfiable = "requested_range_not_satisfiable"
        /// A resource CouchDB 3 removed (`_temp_view`).
        case gone
        /// CouchDB's name for a write every shard refused (`{"error":"error"}`, 500), which is how
        /// it answers an invalid `_security` object.
        case error
        case invalidJSON = "invalid_json"
        /// A partition name that cannot be (empty, or starting with `_`).
        case illegalPartition = "illegal_partition"
        /// A write that would grow a partition already at `[couchdb] max_partition_size`.
        case partitionOverflow = "partition_overflow"
        /// A design document whose options its database cannot honour (partitioning).
        case invalidDesignDocument = "invalid_design_doc"
        /// Couchette's: an attachment whose body a replication left on its source could not
        /// be fetched from there (502, as a gateway whose upstream failed).
        case attachmentNotDownloaded = "attachment_not_downloaded"
        /// The disk is full (or a file reached its size limit): 507, nothing was written.
        case insufficientStorage = "insufficient_storage"
        // A replication's failures, named as CouchDB's replicator names them.
        case databaseNotFound = "db_not_found"
        /// The peer could not be reached at all (refused, unresolved): the job goes offline.
        case peerUnreachable = "peer_unreachable"
        /// A request kept failing (5xx, reset, timeout) after its retries: the job restarts.
        case requestFailed = "http_request_failed"
        case checkpointCommitFailure = "checkpoint_commit_failure"
        case filterFetchError = "filter_fetch_error"
        /// The peer refused a whole request as too large (413): the writer halves the batch.
        case requestBodyTooLarge = "request_body_too_large"
        case stopped
        // Design-document functions (the JavaScript engine and native functions).
        case compilationError = "compilation_error"
        /// A function stopped by the time or memory limit.
        case osProcessError = "os_process_error"
    }

    public let kind: Kind
    public let reason: String
    /// An error name of the application's own (a JavaScript function that throws
    /// `TypeError`, or `["error", name, reason]`), answered with the kind's status.
    public private(set) var customName: String?

    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    /// An error a design-document function named itself: 500, as CouchDB answers it (or
    /// the status of `kind`, for the names CouchDB answers with another).
    public static func named(_ name: String, _ reason: String, status kind: Kind = .unknownError) -> CouchError {
        var error = CouchError(kind, reason)
        error.customName = name
        return error
    }

    /// An error with a name of its own answered with `kind`'s status (Mango's
    /// `no_usable_index`, `invalid_value`, ... are 400s with their own names).
    public init(_ kind: Kind, _ reason: String, name: String) {
        self.kind = kind
        self.reason = reason
        self.customName = name
    }

    public var error: String { customName ?? kind.rawValue }

    /// CouchDB's status for each error name.
    public var status: Int {
        switch kind {
        case .badRequest, .invalidDatabaseName, .illegalDocumentID, .documentValidation, .queryParseError, .invalidJSON,
             .compilationError, .illegalPartition, .invalidDesignDocument: 400
        case .unauthorized: 401
        case .forbidden, .partitionOverflow: 403
        case .notFound: 404
        case .methodNotAllowed: 405
        case .notAcceptable: 406
        case .conflict: 409
        case .gone: 410
        case .fileExists, .preconditionFailed, .missingStub: 412
        case .tooLarge, .documentTooLarge: 413
        case .uriTooLong: 414
        case .badContentType: 415
        case .headerTooLarge: 431
        case .rangeNotSatisfiable: 416
        case .unknownError, .internalServerError, .osProcessError, .error: 500
        // Replication failures are the server's to report, as CouchDB's `_replicate` does.
        case .databaseNotFound, .peerUnreachable, .requestFailed, .checkpointCommitFailure, .filterFetchError,
             .requestBodyTooLarge, .stopped: 500
        case .notImplemented: 501
        case .attachmentNotDownloaded: 502
        case .serviceUnavailable: 503
        case .insufficientStorage: 507
        }
    }

    public var description: String { "\(error): \(reason)" }

    /// CouchDB's wire form, `{"error": ..., "reason": ...}`.
    public var json: JSONValue { ["error": JSONValue(error), "reason": JSONValue(reason)] }
}

extension CouchError {
    public static func badRequest(_ reason: String) -> CouchError { CouchError(.badRequest, reason) }
    public static func notFound(_ reason: String = "missing") -> CouchError { CouchError(.notFound, reason) }
    public static let documentConflict = CouchError(.conflict, "Document update conflict.")
    public static let databaseMissing = CouchError(.notFound, "Database does not exist.")
    public static let databaseExists = CouchError(.fileExists, "The database could not be created, the file already exists.")
    public static func internalError(_ reason: String) -> CouchError { CouchError(.internalServerError, reason) }
    public static let storageFull = CouchError(.insufficientStorage, "There is no space left on the storage device.")
    /// Work stopped because its client hung up (`RequestCancellation`); nobody reads the answer.
    public static let clientGone = CouchError(.stopped, "The client closed the connection.")

    /// The error for a failed write of a file: `storageFull` when the disk (or the process's
    /// file size limit) is the cause, so clients can tell it from a fault of the server.
    public static func writeFailed(errno code: Int32, _ reason: String) -> CouchError {
        code == ENOSPC || code == EFBIG || code == EDQUOT ? storageFull : internalError(reason)
    }

    /// A revision named for an edit that the document does not have (attachment edits):
    /// CouchDB's `{{not_found, missing}, Rev}`, 409 `not_found` `missing_rev`.
    public static var missingRevision: CouchError {
        var error = CouchError(.conflict, "missing_rev")
        error.customName = "not_found"
        return error
    }
}
