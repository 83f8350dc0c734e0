import CouchCore
import CouchTestSupport
import Foundation

/// A server with a database of documents of every shape Mango meets: numbers, strings,
/// null, booleans, arrays and objects under one field, missing fields, nested objects.
struct MangoFixture {
    let server: TestServer
    /// Every document written, by ID.
    var documents: [String: JSONValue] = [:]

    static let values: [JSONValue] = [
        1, 2, 2.5, 3, 4, 5, 7, 8, 10, -1, 0, "a", "apple", "b", "banana", "B", "", .null, true, false,
        [1, 2], [3], [], ["a", "b"], ["x": 1], [:],
    ]

    init(database: String = "db") throws {
        server = try TestServer()
        try server.createDatabase(database)
        var docs: [String] = []
        for (i, value) in Self.values.enumerated() {
            var body: JSONObject = ["_id": JSONValue(String(format: "d%03d", i)), "n": value,
                                    "age": JSONValue(20 + (i % 5) * 10),
                                    "kind": JSONValue(i % 2 == 0 ? "even" : "odd"),
                                    "address": ["city": JSONValue(["Paris", "Oslo", "Lima"][i % 3]), "zip": JSONValue(i)]]
            if i % 4 != 0 { body["name"] = JSONValue(String(UnicodeScalar(UInt8(97 + i % 26)))) }
            if i % 3 == 0 { body["tags"] = ["red", JSONValue(i % 2 == 0 ? "green" : "blue")] }
            docs.append(JSONValue.object(body).serializedString())
            documents[String(format: "d%03d", i)] = .object(body)
        }
        // Documents without `n` at all, and one deleted.
        for i in 0..<6 {
            let id = String(format: "m%03d", i)
            let body: JSONObject = ["_id": JSONValue(id), "age": JSONValue(25 + i), "kind": "missing",
                                    "address": ["city": "Paris"]]
            docs.append(JSONValue.object(body).serializedString())
            documents[id] = .object(body)
        }
        let (status, _) = try server.json("POST", "/\(database)/_bulk_docs", body: #"{"docs":[\#(docs.joined(separator: ","))]}"#)
        guard status == 201 else { throw TestServerError.unexpected("bulk_docs \(status)") }
        let rev = try server.put(database, "gone", #"{"n":1}"#)
        try server.request("DELETE", "/\(database)/gone?rev=\(rev)")
    }

    /// `POST /db/_find`: status, parsed body and raw text.
    func find(_ body: String, database: String = "db") throws -> (status: Int, json: JSONValue) {
        try server.json("POST", "/\(database)/_find", body: body)
    }

    /// The IDs a `_find` returns, failing on an error.
    func ids(_ body: String, database: String = "db") throws -> [String] {
        let (status, json) = try find(body, database: database)
        guard status == 200, let docs = json["docs"]?.arrayValue else {
            throw TestServerError.unexpected("_find \(body): \(status) \(json.serializedString())")
        }
        return docs.compactMap { $0["_id"]?.stringValue }
    }

    func createIndex(_ body: String, database: String = "db") throws -> JSONValue {
        let (status, json) = try server.json("POST", "/\(database)/_index", body: body)
        guard status == 200 else { throw TestServerError.unexpected("_index \(status) \(json.serializedString())") }
        return json
    }
}
