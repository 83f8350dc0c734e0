import CouchCore
import CouchFunctions
import CouchStore

/// A design document's JavaScript views as an index: one index per design document holding
/// every view (as CouchDB's view group), named by a signature of what decides the rows.
public struct JavaScriptViews: Sendable {
    public let design: DesignDocument
    public let views: [ViewFunctions]
    public let definition: IndexDefinition

    /// - Parameter partitioned: whether the database is partitioned; its design documents
    ///   then are too, unless `options.partitioned` is false (CouchDB's rule).
    public init(design: DesignDocument, database: DatabaseName, runtime: FunctionRuntime, partitioned: Bool = false) {
        self.design = design
        views = design.views
        let functions = views.map { (key: design.viewFunctionKey($0.name, reduce: false, database: database), source: $0.map) }
        let isPartitioned = Self.isPartitioned(design, inPartitionedDatabase: partitioned)
        definition = IndexDefinition(signature: Self.signature(design, partitioned: isPartitioned), viewNames: views.map(\.name),
                                     mapper: JavaScriptMapper(runtime: runtime, functions: functions, design: design.jsonBytes,
                                                              database: database),
                                     includeDesign: design.body["options"]?["include_design"]?.boolValue == true,
                                     includeLocalSequence: design.body["options"]?["local_seq"]?.boolValue == true,
                                     partitioned: isPartitioned,
                                     reductions: views.map { view in
                                         view.reduce.flatMap { ViewReduction(source: $0, design: design, view: view.name, database: database,
                                                                             runtime: runtime, partitioned: isPartitioned) }
                                     },
                                     collations: views.map { Self.collation(design, view: $0.name) })
    }

    /// A partitioned database's design documents are partitioned unless `options.partitioned` is false.
    public static func isPartitioned(_ design: DesignDocument, inPartitionedDatabase: Bool) -> Bool {
        inPartitionedDatabase && design.body["options"]?["partitioned"]?.boolValue != false
    }

    /// The collation a view's `options` ask for.
    static func collation(_ design: DesignDocument, view: String) -> ViewCollation {
        ViewCollation(viewOptions: design.body["views"]?[view]?["options"])
    }

    /// The position of `name` among the views, or CouchDB's 404.
    public func view(_ name: String) throws(CouchError) -> (index: Int, functions: ViewFunctions) {
        if let missing = design.missingView(name) { throw CouchError.notFound(missing) }
        guard let index = views.firstIndex(where: { $0.name == name }) else { throw CouchError.notFound("missing json key: \(name)") }
        return (index, views[index])
    }

    /// MD5 of the canonical JSON of the views (names, map and reduce sources, a raw
    /// collation), the language, the options and the `views.lib` modules: what CouchDB's
    /// signature covers. The design document's ID and revision are not in it, so identical
    /// design documents share an index.
    public static func signature(_ design: DesignDocument, partitioned: Bool = false) -> String {
        let body = design.body
        let views = design.views.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }.map { view -> JSONValue in
            let raw: [JSONValue] = collation(design, view: view.name) == .raw ? ["raw"] : []
            return .array([JSONValue(view.name), JSONValue(view.map), view.reduce.map { JSONValue($0) } ?? .null] + raw)
        }
        let summary: JSONValue = .object(JSONObject([
            (key: "language", value: body["language"] ?? JSONValue("javascript")),
            (key: "options", value: body["options"] ?? .object(JSONObject())),
            (key: "views", value: .array(views)),
            (key: "lib", value: body["views"]?["lib"] ?? .null),
        ] + (partitioned ? [(key: "partitioned", value: JSONValue(true))] : [])))
        return Digest.hex(Digest.md5(summary.canonicalBytes))
    }
}

/// Map functions run in the JavaScript contexts of a `FunctionRuntime`.
struct JavaScriptMapper: DocumentMapper {
    let runtime: FunctionRuntime
    let functions: [FunctionRuntime.MapFunction]
    let design: [UInt8]
    let database: DatabaseName

    func map(_ documents: [MapInput]) throws(CouchError) -> [[[Emission]]] {
        try runtime.map(functions, design: design, documents: documents.map(\.json), database: database).map { perView in
            perView.map { rows in rows.map { Emission(key: $0.key, value: $0.value) } }
        }
    }
}
