import CouchCore
import Logging

/// One view of a design document: its name, map source and reduce (a built-in name such as
/// `_sum`, or JavaScript), as the index engine needs them.
public struct ViewFunctions: Sendable, Equatable {
    public let name: String
    public let map: String
    public let reduce: String?
}

extension DesignDocument {
    /// The design document's members as a JSON object (with `_id` and `_rev`).
    public var body: JSONObject {
        (try? JSONValue.parse(json))?.objectValue ?? JSONObject()
    }

    /// The views with a map function, in the document's order; none when the language is not
    /// one the workers run (a Mango index's `"language": "query"` is not run here).
    public var views: [ViewFunctions] {
        let body = self.body
        guard DesignDocument.runsInWorkers(body) else { return [] }
        return (body["views"]?.objectValue ?? JSONObject()).compactMap { member -> ViewFunctions? in
            guard let map = member.value["map"]?.stringValue else { return nil }
            return ViewFunctions(name: member.key, map: map, reduce: member.value["reduce"]?.stringValue)
        }
    }

    /// A view's members for CouchDB's 404s: `missing json key: views`, then the view's name.
    public func missingView(_ name: String) -> String? { missingKey("views", name) }

    /// The cache key of a view's map or reduce function in this revision.
    public func viewFunctionKey(_ name: String, reduce: Bool, database: DatabaseName) -> String {
        key(reduce ? .reduce : .map, name, database: database)
    }

    /// The design document's JSON: `this` of its functions.
    public var jsonBytes: [UInt8] { json }
}

private let viewLogger = Logger(label: "couchette.views")

/// Map and reduce on the runtime's contexts, for the index engine (`CouchIndex`).
extension FunctionRuntime {
    /// A map function to run: its cache key (`DesignDocument.viewFunctionKey`) and source.
    public typealias MapFunction = (key: String, source: String)

    /// Runs every map function over every document in one entry into the engine. Answers,
    /// per document, per function, its `[key, value]` pairs; a function that throws on a
    /// document emits nothing for it (logged, as CouchDB does) and the others still run.
    /// `documents` are JSON objects as map functions see them.
    public func map(_ functions: [MapFunction], design: [UInt8], documents: [[UInt8]],
                    database: DatabaseName) throws(CouchError) -> [[[(key: JSONValue, value: JSONValue)]]] {
        guard !documents.isEmpty else { return [] }
        let call = FunctionWorkerProtocol.Call(
            driver: "mapBatch", functions: functions.map { .init(key: $0.key, source: $0.source, design: design) },
            functionsAsArray: true,
            arguments: [Self.jsonArray(of: documents), Array((functions.count > 1 ? "true" : "false").utf8)])
        let result = try self.call(call, owner: database)
        guard case .array(let perDocument)? = result, perDocument.count == documents.count else {
            throw CouchError.internalError("map batch answered no result")
        }
        return perDocument.enumerated().map { index, entry in
            let perFunction = entry.arrayValue ?? []
            return (0..<functions.count).map { position -> [(key: JSONValue, value: JSONValue)] in
                guard position < perFunction.count else { return [] }
                switch perFunction[position] {
                case .array(let pairs):
                    return pairs.compactMap { pair in
                        guard case .array(let items) = pair, items.count == 2 else { return nil }
                        return (items[0], items[1])
                    }
                case .object(let failure):
                    let id = (try? JSONValue.parse(documents[index]))?["_id"]?.stringValue ?? "?"
                    viewLogger.info("map function raised exception (\(failure["error"]?.stringValue ?? "error")) with doc._id \(id)")
                    return []
                default:
                    return []
                }
            }
        }
    }

    /// One reduce (or rereduce) run: `keys` as `[[key, docid], ...]` (`null` when
    /// rereducing) and `values`, each JSON text.
    public typealias ReduceRun = (keys: [UInt8], values: [UInt8], rereduce: Bool)

    /// Runs a reduce function over several runs in one entry into the engine; its result
    /// for each, in order. A function that throws on any run fails the whole call.
    public func reduce(key: String, source: String, design: [UInt8], runs: [ReduceRun],
                       database: DatabaseName) throws(CouchError) -> [JSONValue] {
        guard !runs.isEmpty else { return [] }
        var argument: [UInt8] = [UInt8(ascii: "[")]
        for (index, run) in runs.enumerated() {
            if index > 0 { argument.append(UInt8(ascii: ",")) }
            argument.append(UInt8(ascii: "["))
            argument += run.keys
            argument.append(UInt8(ascii: ","))
            argument += run.values
            argument += Array((run.rereduce ? ",true]" : ",false]").utf8)
        }
        argument.append(UInt8(ascii: "]"))
        let call = FunctionWorkerProtocol.Call(driver: "reduceBatch", functions: [.init(key: key, source: source, design: design)],
                                               arguments: [argument])
        guard case .array(let results)? = try self.call(call, owner: database), results.count == runs.count else {
            throw CouchError.internalError("reduce batch answered no result")
        }
        return results
    }

    /// `filter=_view` with `view=ddoc/name` in the request's query: a document passes when
    /// the view's map function emits for it (a function that throws on it: it does not).
    /// CouchDB's 400 without `view`, 404s for a missing design document or view.
    func viewFilter(in database: any FunctionDatabase, request: JSONValue) throws(CouchError) -> DocumentFilter {
        guard let view = request["query"]?["view"]?.stringValue, !view.isEmpty else {
            throw CouchError.badRequest("`view` filter parameter is not provided.")
        }
        let parts = view.split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { throw CouchError.badRequest("`view` must be of the form `designname/viewname`") }
        let id = DocumentID(DocumentID.designPrefix + parts[0])
        guard let design = try designDocuments(database).first(where: { $0.id == id }) else { throw CouchError.notFound("missing") }
        if let missing = design.missingKey("views", String(parts[1])) {
            try design.refuseUnrunnableLanguage("views", String(parts[1]))
            throw CouchError.notFound(missing)
        }
        guard let map = design.views.first(where: { $0.name == parts[1] })?.map else { throw CouchError.notFound("missing") }
        // The map function inlined in a filter: its `emit` is the filter's local one.
        let source = """
            function(doc, req) { var __emitted = false; function emit() { __emitted = true; }
              try { (\(map)).call(this, doc); } catch (error) { return false; }
              return __emitted; }
            """
        let key = design.key(.map, String(parts[1]), database: database.name) + "/as-filter"
        return DocumentFilter(runtime: self, implementation: .script(key: key, source: source, design: design.json),
                              request: request, database: database.name)
    }
}
