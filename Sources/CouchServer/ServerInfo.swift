/// What Couchette says about itself.
public enum ServerInfo {
    public static let version = "0.1.0"
    /// The CouchDB version whose behaviour Couchette follows; clients pick features by it.
    public static let couchDBVersion = "3.3.3"
    public static let serverHeader = "Couchette/\(version) (CouchDB/\(couchDBVersion) compatible)"
}
