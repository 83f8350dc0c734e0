import CouchCore

/// One Mango index as `mango_idx` knows it: the special `_all_docs`, a JSON index (a view
/// of a `"language": "query"` design document) or a text index (its `indexes` member).
public struct MangoIndex: Sendable {
    public enum Kind: String, Sendable { case special, json, text }

    public let kind: Kind
    /// `_design/...`; nil for `_all_docs`.
    public let designID: String?
    public let name: String
    /// A JSON index's columns and directions (`_all_docs`: `_id`).
    public let fields: [(name: String, descending: Bool)]
    /// The normalised `partial_filter_selector` (nil when absent or `{}`).
    public let partialFilter: JSONValue?
    public let partialSelector: MangoSelector?
    /// A text index's definition.
    public let text: MangoTextDefinition?
    /// The revision of the design document the index was read from.
    public let designRevision: String?
    /// Members of the stored definition other than `fields` and `partial_filter_selector`
    /// (`def_to_json` passes them through).
    let extraDefinition: [JSONObject.Member]
    /// A partitioned index (a partitioned design document of a partitioned database): it
    /// serves partition queries only, its rows kept per partition; the others serve global ones.
    public internal(set) var partitioned = false

    public var columns: [String] {
        if let text { return text.fields?.map(\.name) ?? [] }
        return fields.map(\.name)
    }

    public static let allDocs = MangoIndex(kind: .special, designID: nil, name: "_all_docs",
                                           fields: [(name: "_id", descending: false)], partialFilter: nil,
                                           partialSelector: nil, text: nil, designRevision: nil, extraDefinition: [])

    /// Same index: same design document, name and type.
    public func isSame(_ other: MangoIndex) -> Bool {
        kind == other.kind && designID == other.designID && name == other.name
    }

    /// `mango_idx:to_json`, what `GET /db/_index` and `_explain` show.
    public var json: JSONValue {
        var members: [JSONObject.Member] = [
            (key: "ddoc", value: designID.map { JSONValue($0) } ?? .null),
            (key: "name", value: JSONValue(name)),
            (key: "type", value: JSONValue(kind.rawValue)),
        ]
        if kind != .special { members.append((key: "partitioned", value: .bool(partitioned))) }
        members.append((key: "def", value: .object(definitionJSON)))
        return .object(JSONObject(members))
    }

    var definitionJSON: JSONObject {
        if let text { return text.definitionJSON }
        var def: [JSONObject.Member] = [(key: "fields", value: MangoSort.fieldList(fields))]
        if let partialFilter { def.append((key: "partial_filter_selector", value: partialFilter)) }
        def.append(contentsOf: extraDefinition)
        return JSONObject(def)
    }

    /// Order of `GET /_index` (CouchDB sorts its index records): `_all_docs` first, then by
    /// design document and name.
    static func listedBefore(_ a: MangoIndex, _ b: MangoIndex) -> Bool {
        switch (a.designID, b.designID) {
        case (nil, nil): return a.name < b.name
        case (nil, _): return true
        case (_, nil): return false
        case let (x?, y?):
            if x != y { return Array(x.utf8).lexicographicallyPrecedes(Array(y.utf8)) }
            if a.name != b.name { return Array(a.name.utf8).lexicographicallyPrecedes(Array(b.name.utf8)) }
            return a.kind.rawValue < b.kind.rawValue
        }
    }

    // MARK: Reading design documents (mango_idx:from_ddoc)

    /// The indexes a design document defines; none unless its language is `query`.
    /// A definition that does not parse is skipped, as CouchDB logs and skips it. They are
    /// partitioned as the design document is: its `options.partitioned`, else the database's.
    public static func indexes(designID: String, revision: String?, body: JSONObject,
                               databasePartitioned: Bool = false) -> [MangoIndex] {
        guard body["language"]?.stringValue == "query" else { return [] }
        let partitioned = body["options"]?["partitioned"]?.boolValue ?? databasePartitioned
        return definedIndexes(designID: designID, revision: revision, body: body).map { index in
            var index = index
            // Couchette's text indexes are global: they serve no partition query.
            index.partitioned = partitioned && index.kind == .json
            return index
        }
    }

    private static func definedIndexes(designID: String, revision: String?, body: JSONObject) -> [MangoIndex] {
        var found: [MangoIndex] = []
        for (name, view) in body["views"]?.objectValue ?? JSONObject() {
            guard let map = view["map"]?.objectValue, view["options"]?.objectValue != nil || view["options"] == nil,
                  let fieldsJSON = map["fields"], let fields = parseFields(fieldsJSON) else { continue }
            var partial: JSONValue?
            var selector: MangoSelector?
            if let pfs = map["partial_filter_selector"], pfs != .object(JSONObject()) {
                guard let parsed = try? MangoSelector(pfs) else { continue }
                partial = parsed.normalized
                selector = parsed
            }
            let extra = map.members.filter { $0.key != "fields" && $0.key != "partial_filter_selector" }
            found.append(MangoIndex(kind: .json, designID: designID, name: name, fields: fields, partialFilter: partial,
                                    partialSelector: selector, text: nil, designRevision: revision,
                                    extraDefinition: extra))
        }
        for (name, entry) in body["indexes"]?.objectValue ?? JSONObject() {
            guard let def = entry["index"]?.objectValue, let text = MangoTextDefinition(stored: def) else { continue }
            found.append(MangoIndex(kind: .text, designID: designID, name: name, fields: [],
                                    partialFilter: text.partialFilter, partialSelector: text.partialSelector, text: text,
                                    designRevision: revision, extraDefinition: []))
        }
        return found
    }

    /// `fields` as stored (`{"a": "asc"}`) or as sent (`["a", {"b": "desc"}]`).
    static func parseFields(_ json: JSONValue) -> [(name: String, descending: Bool)]? {
        switch json {
        case .object(let object):
            var fields: [(name: String, descending: Bool)] = []
            for (name, direction) in object {
                guard let d = direction.stringValue, d == "asc" || d == "desc" else { return nil }
                fields.append((name: name, descending: d == "desc"))
            }
            return fields
        case .array:
            guard let sort = try? MangoSort(json: json) else { return nil }
            return sort.fields.map { (name: $0, descending: sort.descending) }
        default:
            return nil
        }
    }

    init(kind: Kind, designID: String?, name: String, fields: [(name: String, descending: Bool)],
         partialFilter: JSONValue?, partialSelector: MangoSelector?, text: MangoTextDefinition?,
         designRevision: String?, extraDefinition: [JSONObject.Member]) {
        self.kind = kind
        self.designID = designID
        self.name = name
        self.fields = fields
        self.partialFilter = partialFilter
        self.partialSelector = partialSelector
        self.text = text
        self.designRevision = designRevision
        self.extraDefinition = extraDefinition
    }
}

import CouchStore

extension MangoIndex {
    /// Every index of `database`: `_all_docs`, then those its `"language": "query"` design
    /// documents define, in `GET /_index`'s order. Read again only after a design document of
    /// the database was written or purged: every `_find` plans with the list, and reading it
    /// parsed every design document (7% of an indexed equality query).
    public static func list(in database: Database) throws -> [MangoIndex] {
        // Read before the design documents: a write while they are read leaves the entry stale.
        let generation = database.designGeneration
        let key = database.name.rawValue
        if let cached = listed.withLock({ $0[key] }), cached.generation == generation,
           cached.instance == database.instanceStartTime {
            return cached.indexes
        }
        var query = AllDocumentsQuery()
        query.startKey = "_design/"
        query.endKey = "_design0"
        query.includeBodies = true
        var found: [MangoIndex] = [.allDocs]
        for row in try database.allDocuments(query) {
            guard let body = row.body, case .object(let object)? = try? JSONValue.parse(body) else { continue }
            found.append(contentsOf: indexes(designID: row.id.rawValue, revision: row.winner.description, body: object,
                                             databasePartitioned: database.isPartitioned))
        }
        let indexes = found.sorted(by: listedBefore)
        listed.withLock { entries in
            // Databases come and go: past a thousand listed, the cache starts again.
            if entries.count >= maximumListed { entries.removeAll() }
            entries[key] = ListedIndexes(instance: database.instanceStartTime, generation: generation, indexes: indexes)
        }
        return indexes
    }

    private struct ListedIndexes {
        let instance: String
        let generation: Int
        let indexes: [MangoIndex]
    }

    private static let listed = Locked<[String: ListedIndexes]>([:])
    private static let maximumListed = 1_000
}
