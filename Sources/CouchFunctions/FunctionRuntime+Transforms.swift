import CouchCore

/// Couchette's transforms: `transforms.name` of a design document, a function a replication
/// applies to each document it writes (`"transform": "ddoc/name"`). It receives the document
/// (its members, `_id` included) and the direction (`push`, `pull`, `between`) and returns the
/// document to write (or changes the one it got and returns nothing); what it throws skips the
/// document.
extension FunctionRuntime {
    public func transform(_ name: String, in database: any FunctionDatabase) throws(CouchError) -> TransformFunction {
        let parts = name.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw CouchError.badRequest("transform must be of the form `designname/transformname`")
        }
        let id = DocumentID(DocumentID.designPrefix + parts[0])
        guard let design = try designDocuments(database).first(where: { $0.id == id }) else {
            throw CouchError.notFound("missing design document \(id.rawValue) for transform \(name)")
        }
        guard let source = design.transforms[String(parts[1])] else {
            throw CouchError.notFound("missing transforms function \(parts[1]) on design doc \(id.rawValue)")
        }
        return TransformFunction(runtime: self, function: .init(key: design.key(.transform, String(parts[1]), database: database.name),
                                                                source: source, design: design.json),
                                 database: database.name)
    }
}

/// A design document's transform, ready to run over batches of documents.
public struct TransformFunction: Sendable {
    let runtime: FunctionRuntime
    let function: FunctionWorkerProtocol.Function
    let database: DatabaseName

    /// Each document (a JSON object), transformed; a failure for each the function refused.
    public func apply(_ documents: [[UInt8]], direction: String) -> [Result<JSONObject, CouchError>] {
        guard !documents.isEmpty else { return [] }
        let call = FunctionWorkerProtocol.Call(driver: "transformBatch", functions: [function],
                                               arguments: [FunctionRuntime.jsonArray(of: documents),
                                                           JSONValue(direction).serialized()])
        let answer: JSONValue?
        do {
            answer = try runtime.call(call, owner: database)
        } catch {
            return documents.map { _ in .failure(error) }
        }
        let results = answer?.arrayValue ?? []
        return documents.indices.map { index in
            guard index < results.count else { return .failure(CouchError.internalError("the transform answered no result")) }
            if let document = results[index]["ok"]?.objectValue { return .success(document) }
            let error = results[index]["error"]?.arrayValue ?? []
            return .failure(CouchError.named(error.first?.stringValue ?? "transform_error",
                                             error.dropFirst().first?.stringValue ?? ""))
        }
    }
}
