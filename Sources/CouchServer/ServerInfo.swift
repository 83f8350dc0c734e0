/// What Couchette says about itself.
public enum ServerInfo {
    public static let version = "0.1.0"
    /// The CouchDB version whose behaviour Couchette follows; clients pick features by it.
    public static let couchDBVersion = "3.3.3"
    /// The node's name in CouchDB's Erlang `name@host` form (`_membership`, `/_node/_local`).
    public static let nodeName = "couchette@127.0.0.1"
    public static let serverHeader = "Couchette/\(version) (CouchDB/\(couchDBVersion) compatible)"
}
