import CouchCore
import CouchReplication
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Runs blocking work (the test HTTP client) on a thread of its own, so that neither the
/// threads running Swift tasks nor Dispatch's pool are held by a test's waiting.
func offPool<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

extension TestServer {
    var url: String { "http://127.0.0.1:\(port)" }
    var replications: ReplicationManager { server.replications }

    /// A JSON request made off the task threads.
    @discardableResult
    func call(_ method: String, _ path: String, headers: [(String, String)] = [],
              body: JSONValue? = nil) async throws -> (status: Int, json: JSONValue) {
        try await offPool { try self.json(method, path, headers: headers, body: body?.serializedString()) }
    }

    /// `POST /_replicate`
    @discardableResult
    func replicate(_ body: JSONValue, headers: [(String, String)] = []) async throws -> (status: Int, json: JSONValue) {
        try await call("POST", "/_replicate", headers: headers, body: body)
    }

    func putDocuments(_ database: String, _ documents: [JSONValue], newEdits: Bool = true) async throws {
        let (status, json) = try await call("POST", "/\(database)/_bulk_docs",
                                            body: ["docs": .array(documents), "new_edits": JSONValue(newEdits)])
        #expect(status == 201, "\(json.serializedString())")
    }

    /// `n` small documents `doc000...` with a counter.
    func fill(_ database: String, count: Int, prefix: String = "doc") async throws {
        var documents: [JSONValue] = []
        for index in 0..<count {
            documents.append(["_id": JSONValue(String(format: "\(prefix)%05d", index)), "n": JSONValue(index), "kind": "small"])
            if documents.count == 1000 {
                try await putDocuments(database, documents)
                documents = []
            }
        }
        if !documents.isEmpty { try await putDocuments(database, documents) }
    }

    /// Every document (deleted ones too) with all its leaves and their histories, as
    /// `open_revs=all&revs=true` answers, leaves sorted by revision. Read over one kept-alive
    /// connection (a fresh one per document left thousands of sockets in TIME_WAIT).
    func revisionTrees(_ database: String) async throws -> [String: JSONValue] {
        try await offPool {
            let connection = try HTTPTestConnection(port: self.port)
            defer { connection.close() }
            let changes = try JSONValue.parse(connection.request("GET", "/\(database)/_changes?style=all_docs").body)
            var trees: [String: JSONValue] = [:]
            for row in changes["results"]?.arrayValue ?? [] {
                guard let id = row["id"]?.stringValue else { continue }
                let encoded = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id
                let leaves = try JSONValue.parse(connection.request("GET", "/\(database)/\(encoded)?open_revs=all&revs=true",
                                                                    headers: [("Accept", "application/json")]).body)
                let sorted = (leaves.arrayValue ?? []).sorted {
                    ($0["ok"]?["_rev"]?.stringValue ?? "") < ($1["ok"]?["_rev"]?.stringValue ?? "")
                }
                trees[id] = .array(sorted)
            }
            return trees
        }
    }

    /// The attachment bodies stored for `database` (its staging directories left out).
    func blobFiles(_ database: String) throws -> [String] {
        let store = try server.databases.database(DatabaseName(database)).attachments
        return ((try? FileManager.default.contentsOfDirectory(atPath: store.directory)) ?? []).filter { $0 != "staging" && $0 != "pending" }
    }

    func documentCount(_ database: String) async throws -> Int {
        try await call("GET", "/\(database)").json["doc_count"]?.intValue ?? -1
    }
}

/// Waits until `produce` gives a value, checking every 20 ms, for at most `seconds`.
func poll<Value: Sendable>(_ seconds: Double = 10, _ produce: @Sendable () async throws -> Value?) async throws -> Value? {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if let value = try await produce() { return value }
        try await Task.sleep(nanoseconds: 20_000_000)
    }
    return try await produce()
}

/// Waits until `condition` holds, checking every 20 ms, for at most `seconds`.
func eventually(_ seconds: Double = 10, _ condition: @Sendable () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return true }
        try await Task.sleep(nanoseconds: 20_000_000)
    }
    return try await condition()
}

extension JSONValue {
    /// An array's element, or nil.
    subscript(index: Int) -> JSONValue? {
        guard let array = arrayValue, array.indices.contains(index) else { return nil }
        return array[index]
    }
}
