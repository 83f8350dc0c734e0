import CouchCore

/// A `POST /db/_index` body validated as `mango_opts:validate_idx_create` and the index
/// modules do, and the design document edits that add or remove an index (CouchDB's
/// `mango_idx_view:add/remove`, `mango_idx_text:add/remove`).
public struct MangoIndexRequest: Sendable {
    public let kind: MangoIndex.Kind
    public let designID: String
    public let name: String
    /// The member stored under `views` (JSON) or `indexes` (text).
    let storedEntry: JSONValue
    /// `partitioned` as asked (nil: the database's default), set on a new design document.
    let partitioned: Bool?

    /// - Parameter databasePartitioned: whether the database is (`partitioned: true` needs it).
    public init(_ body: JSONObject, databasePartitioned: Bool = false) throws(CouchError) {
        let known: Set<String> = ["index", "type", "name", "ddoc", "w", "partitioned"]
        guard let index = body["index"] else { throw MangoErrors.missingRequiredKey("index") }
        var type = "json"
        if let value = body["type"] {
            guard case .string(let text) = value else { throw MangoErrors.invalidString(value) }
            type = text
        }
        var name: String?
        if let value = body["name"] {
            guard case .string(let text) = value else { throw MangoErrors.invalidString(value) }
            name = text
        }
        var ddoc: String?
        if let value = body["ddoc"] {
            guard case .string(let text) = value else { throw MangoErrors.invalidString(value) }
            ddoc = text
        }
        if let value = body["w"] {
            guard case .number(let n) = value, n.isIntegerLiteral, (n.intValue ?? 0) > 0 else {
                throw MangoErrors.invalidPositiveInteger(value)
            }
        }
        var partitioned: Bool?
        if let value = body["partitioned"] {
            guard case .bool(let flag) = value else { throw MangoErrors.invalidBoolean(value) }
            if flag, !databasePartitioned {
                throw MangoErrors.named("invalid_partition_database",
                                        "Database is not partitioned")
            }
            partitioned = flag
        }
        self.partitioned = partitioned
        if let unknown = body.keys.first(where: { !known.contains($0) }) { throw MangoErrors.invalidKey(unknown) }

        switch type {
        case "json":
            kind = .json
            guard case .object(let def) = index else {
                throw MangoErrors.named("invalid_index", "JSON indexes must be an object, not: \(MangoErrors.text(index))")
            }
            if let unknown = def.keys.first(where: { $0 != "fields" && $0 != "partial_filter_selector" }) {
                throw MangoErrors.invalidKey(unknown)
            }
            guard let fieldsJSON = def["fields"] else { throw MangoErrors.missingRequiredKey("fields") }
            let sort = try MangoSort(json: fieldsJSON)
            var partial: JSONValue = .object(JSONObject())
            if let pfs = def["partial_filter_selector"] {
                guard case .object = pfs else {
                    throw MangoErrors.named("invalid_selector_json", "Selector must be a JSON object, not: \(MangoErrors.text(pfs))")
                }
                do {
                    partial = try MangoSelector(pfs).normalized
                } catch {
                    throw MangoErrors.selector(error)
                }
            }
            let map = JSONValue.object(JSONObject([(key: "fields", value: sort.json), (key: "partial_filter_selector", value: partial)]))
            storedEntry = .object(JSONObject([
                (key: "map", value: map),
                (key: "reduce", value: "_count"),
                (key: "options", value: .object(JSONObject([(key: "def", value: index)]))),
            ]))
        case "text":
            kind = .text
            guard case .object(let def) = index else {
                throw MangoErrors.named("invalid_index", "Text indexes must be an object, not: \(MangoErrors.text(index))")
            }
            let text = try MangoTextDefinition(requested: def)
            storedEntry = .object(JSONObject([(key: "index", value: text.storedJSON), (key: "analyzer", value: text.analyzerJSON)]))
        default:
            throw MangoErrors.named("invalid_index", "Invalid type for index: \(type)")
        }
        // CouchDB names an index after a SHA-1 of its definition and options.
        let generated = Digest.hex(Digest.sha1(Array("\(type)\n".utf8) + index.canonicalBytes))
        self.name = name ?? generated
        let design = ddoc ?? generated
        designID = design.hasBytePrefix("_design/") ? design : "_design/" + design
    }

    /// The design document with this index added: nil when it is already there, exactly
    /// (`"result": "exists"`). `body` is the current document's body, nil when there is none.
    public func adding(to body: JSONObject?) throws(CouchError) -> JSONObject? {
        var document = body ?? JSONObject([(key: "language", value: "query")])
        if body != nil {
            guard case .string("query") = document["language"] else {
                let found = document["language"].map { value -> String in
                    if case .string(let text) = value { return "{<<\"language\">>,<<\"\(text)\">>}" }
                    return "{<<\"language\">>,\(MangoErrors.text(value))}"
                } ?? "false"
                throw MangoErrors.named("invalid_ddoc_lang", "Existing design doc has an invalid language: \(found)")
            }
        }
        // `set_ddoc_partitioned`: a new design document takes the option asked for; an
        // existing one must already say the same.
        let current = document["options"]?["partitioned"]?.boolValue
        if partitioned != current {
            guard body == nil else {
                throw MangoErrors.named("invalid_partitioned_option",
                                        "Requested partitioned option does not match existing value on design document \(designID)")
            }
            if let partitioned {
                var options = document["options"]?.objectValue ?? JSONObject()
                options["partitioned"] = .bool(partitioned)
                document["options"] = .object(options)
            }
        }
        let member = kind == .json ? "views" : "indexes"
        var entries = document[member]?.objectValue ?? JSONObject()
        if let existing = entries[name], existing.canonicalBytes == storedEntry.canonicalBytes { return nil }
        entries[name] = storedEntry
        document[member] = .object(entries)
        return document
    }

    /// The design document without index `name` of `kind`: nil when it has no such index;
    /// `.some(nil)` when nothing else is left in it (CouchDB then deletes the document).
    public static func removing(_ kind: MangoIndex.Kind, _ name: String, from body: JSONObject) -> JSONObject?? {
        let member = kind == .json ? "views" : "indexes"
        guard var entries = body[member]?.objectValue, entries[name] != nil else { return nil }
        entries.removeValue(forKey: name)
        var document = body
        if entries.isEmpty {
            document.removeValue(forKey: member)
        } else {
            document[member] = .object(entries)
        }
        if document.keys == ["language"] { return .some(nil) }
        return .some(document)
    }
}
