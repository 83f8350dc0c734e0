import CouchCore

/// The database's security object (`/db/_security`), kept as CouchDB keeps it: an
/// opaque JSON object stored with the database. The store does not interpret it;
/// who may do what is decided by the server's authorization policy.
extension Database {
    static let securityKey = "security"

    /// The stored security object, or nil when none was ever set.
    public func securityObject() throws -> JSONObject? {
        if let cached = settingsLock.withLock({ cachedSecurityObject }) { return cached }
        var stored: String?
        try readers.withConnection { connection in
            try connection.query("SELECT value FROM metadata WHERE key = ?", [.text(Self.securityKey)]) {
                stored = $0.text(0)
            }
        }
        guard let stored else {
            settingsLock.withLock { cachedSecurityObject = .some(nil) }
            return nil
        }
        guard let object = try? JSONValue.parse(Array(stored.utf8)).objectValue else {
            throw CouchError.internalError("stored security object of \(name) is not a JSON object")
        }
        settingsLock.withLock { cachedSecurityObject = .some(object) }
        return object
    }

    /// Replaces the security object; durable when this returns.
    public func setSecurityObject(_ object: JSONObject) throws {
        let text = JSONValue.object(object).serializedString()
        try writer.perform { transaction in
            try transaction.connection.run("INSERT OR REPLACE INTO metadata (key, value) VALUES (?, ?)",
                                           [.text(Self.securityKey), .text(text)])
        }
        settingsLock.withLock { cachedSecurityObject = .some(object) }
    }
}
