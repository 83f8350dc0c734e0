import CouchCore

/// A replication's failures are `CouchError`s like every other error, named as CouchDB's
/// replicator names them (`db_not_found`, `checkpoint_commit_failure`, ...). Reasons never
/// contain credentials: URLs in them are the redacted display form.
public typealias ReplicationError = CouchError

extension CouchError {
    /// Errors after which the job restarts by itself (with back-off) rather than fail.
    public var isTransient: Bool {
        switch kind {
        case .peerUnreachable, .requestFailed, .checkpointCommitFailure: true
        default: false
        }
    }
}

extension CouchError.Kind {
    /// The replicator's name for a failure it cannot classify.
    public static let unknown = CouchError.Kind.unknownError
}
