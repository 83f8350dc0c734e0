import CouchCore

/// A design document's functions, read once per revision: what `FunctionRuntime` compiles
/// (once per revision and context) and calls.
public struct DesignDocument: Sendable {
    public let id: DocumentID
    public let revision: String
    /// The whole document as JSON: `this` of its functions, and where `require` looks.
    let json: [UInt8]
    let validation: String?
    let filters: [String: String]
    /// `shows`, `lists` and `updates` by name.
    let shows: [String: String]
    let lists: [String: String]
    let updates: [String: String]
    /// Couchette's `transforms`: functions a replication may apply to each document it writes.
    let transforms: [String: String]
    /// `rewrites`: an array of rules, or a function's source.
    public let rewrites: JSONValue?
    /// Which of `filters` and `views` the document has, and its views' names: CouchDB's
    /// 404 reasons name the first member missing on the path.
    let members: Set<String>
    let viewNames: Set<String>
    /// Every function by kind and name, for the compilation check when it is saved.
    let functions: [(kind: FunctionKind, name: String, source: String)]

    public enum FunctionKind: String, Sendable {
        case validation = "validate_doc_update", filter, map, reduce, show, list, update, rewrite = "rewrites"
        case transform
    }

    /// Reduce functions CouchDB implements itself; never compiled. CouchDB reads a name by its
    /// prefix ("_sum" followed by a newline or a comment is `_sum`).
    static let builtInReduces = ["_sum", "_count", "_stats", "_approx_count_distinct"]

    /// Whether `reduce` names a built-in (CouchDB's prefix test); any other `_` name is refused.
    static func isBuiltInReduce(_ reduce: String) -> Bool {
        builtInReduces.contains { reduce.hasBytePrefix($0) }
    }

    public init(id: DocumentID, revision: String, body: JSONObject) {
        self.id = id
        self.revision = revision
        var document: JSONObject = ["_id": JSONValue(id.rawValue), "_rev": JSONValue(revision)]
        for (key, value) in body where key != "_id" && key != "_rev" { document[key] = value }
        json = JSONValue.object(document).serialized()
        // Functions in another language (`"language": "query"` for Mango indexes, ...) are
        // neither compiled nor run.
        let isJavaScript = Self.runsInWorkers(body)
        // Rewrite rules (an array) are not code: they apply whatever the language.
        let rules = body["rewrites"].flatMap { $0.arrayValue != nil || isJavaScript ? $0 : nil }
        let body = isJavaScript ? body : JSONObject()
        validation = body["validate_doc_update"]?.stringValue
        var functions: [(FunctionKind, String, String)] = []
        if let validation { functions.append((.validation, id.rawValue, validation)) }
        var filters: [String: String] = [:]
        for (name, value) in body["filters"]?.objectValue ?? JSONObject() {
            guard let source = value.stringValue else { continue }
            filters[name] = source
            functions.append((.filter, name, source))
        }
        self.filters = filters
        members = Set(["filters", "views"].filter { body[$0] != nil })
        var viewNames = Set<String>()
        for (name, view) in body["views"]?.objectValue ?? JSONObject() {
            viewNames.insert(name)
            if let map = view["map"]?.stringValue { functions.append((.map, name, map)) }
            if let reduce = view["reduce"]?.stringValue, !reduce.hasBytePrefix("_") {
                functions.append((.reduce, name, reduce))
            }
        }
        var rendering: [FunctionKind: [String: String]] = [:]
        for (member, kind) in [("shows", FunctionKind.show), ("lists", .list), ("updates", .update), ("transforms", .transform)] {
            for (name, value) in body[member]?.objectValue ?? JSONObject() {
                guard let source = value.stringValue else { continue }
                functions.append((kind, name, source))
                rendering[kind, default: [:]][name] = source
            }
        }
        shows = rendering[.show] ?? [:]
        lists = rendering[.list] ?? [:]
        updates = rendering[.update] ?? [:]
        transforms = rendering[.transform] ?? [:]
        rewrites = rules
        self.functions = functions
        self.viewNames = viewNames
    }

    /// CouchDB's `missing json key: ...` reason for `member`/`name`, or nil when present.
    public func missingKey(_ member: String, _ name: String) -> String? {
        guard members.contains(member) else { return "missing json key: \(member)" }
        let present = member == "views" ? viewNames.contains(name) : filters[name] != nil
        return present ? nil : "missing json key: \(name)"
    }

    /// Refuses a function that exists in a language no worker runs (`"language": "erlang"`) as a
    /// CouchDB without that query server does: 500 `unknown_query_language`. Mango's `query`
    /// design documents are not refused: they have no functions.
    public func refuseUnrunnableLanguage(_ member: String, _ name: String) throws(CouchError) {
        let body = (try? JSONValue.parse(json))?.objectValue ?? JSONObject()
        guard !Self.runsInWorkers(body), let language = body["language"]?.stringValue, language != "query",
              body[member]?[name] != nil else { return }
        throw CouchError.named("unknown_query_language", language)
    }

    /// Whether the design document's language is one the workers run: JavaScript, or
    /// CoffeeScript (compiled to JavaScript there).
    public static func runsInWorkers(_ body: JSONObject) -> Bool {
        ["javascript", "coffeescript"].contains(body["language"]?.stringValue ?? "javascript")
    }

    /// Whether the body holds JavaScript at all (else saving it compiles nothing).
    static func hasFunctions(_ body: JSONObject) -> Bool {
        guard runsInWorkers(body) else { return false }
        return ["validate_doc_update", "filters", "views", "shows", "lists", "updates", "transforms"].contains { body[$0] != nil }
    }

    /// The cache key of one function of this revision.
    func key(_ kind: FunctionKind, _ name: String, database: DatabaseName) -> String {
        "\(database.rawValue)/\(id.rawValue)@\(revision)/\(kind.rawValue)/\(name)"
    }

    /// CouchDB's reason when a function does not compile (its `try_compile` wording).
    static func compilationReason(_ kind: FunctionKind, _ name: String, _ error: String) -> String {
        switch kind {
        case .map, .reduce: "Compilation of the \(kind.rawValue) function in the '\(name)' view failed: \(error)"
        case .validation: "Compilation of the validate_doc_update function failed: \(error)"
        default: "Compilation of the \(kind.rawValue) function '\(name)' failed: \(error)"
        }
    }
}
