/// What Couchette says about itself.
public enum ServerInfo {
    public static let version = "0.1.0"
    /// The CouchDB version whose behaviour Couchette follows; clients pick features by it.
    public static let couchDBVersion = "3.4.3"
    /// The node's name when none is configured (`[couchette] node_name`), in CouchDB's
    /// Erlang `name@host` form (`_membership`, `/_node/{node}`).
    public static let defaultNodeName = "couchette@127.0.0.1"
    /// CouchDB's own form (`CouchDB/3.4.3 (Erlang OTP/25)`), which clients and CouchDB's test
    /// suite check starts with `CouchDB`; the parenthesis names what actually answers.
    public static let serverHeader = "CouchDB/\(couchDBVersion) (Couchette/\(version))"
    /// `GET /`'s `features`, as CouchDB 3.4 lists what it supports (sorted, as `config:features()`):
    /// `_access` members are accepted and kept, partitioned databases, `/_reshard` and the
    /// replication scheduler.
    public static let features = ["access-ready", "partitioned", "scheduler"]
}
