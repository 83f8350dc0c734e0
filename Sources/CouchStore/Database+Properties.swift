import CouchCore

/// Small named values kept with the database (`metadata` table) that the store does not
/// interpret: the cluster parameters a database was created with (`q`, `n`).
extension Database {
    static let clusterKey = "cluster"

    /// The `q` and `n` given at creation (`PUT /db?q=8&n=3`), or nil when none were.
    public func clusterParameters() throws -> JSONObject? {
        var stored: String?
        try readers.withConnection { connection in
            try connection.query("SELECT value FROM metadata WHERE key = ?", [.text(Self.clusterKey)]) {
                stored = $0.text(0)
            }
        }
        return stored.flatMap { try? JSONValue.parse(Array($0.utf8)).objectValue }
    }

    public func setClusterParameters(_ object: JSONObject) throws {
        let text = JSONValue.object(object).serializedString()
        try writer.perform { transaction in
            try transaction.connection.run("INSERT OR REPLACE INTO metadata (key, value) VALUES (?, ?)",
                                           [.text(Self.clusterKey), .text(text)])
        }
    }
}
