import CouchCore

/// A `"type": "text"` index's definition (`mango_idx_text`'s options): which fields are
/// indexed and how, the `$default` field, and the partial filter.
public struct MangoTextDefinition: Sendable {
    /// Nil: every field (`"all_fields"`).
    public let fields: [(name: String, type: String)]?
    public let defaultAnalyzer: JSONValue
    public let defaultField: JSONValue
    public let selector: JSONValue
    public let partialFilter: JSONValue?
    public let partialSelector: MangoSelector?
    public let indexArrayLengths: Bool

    static let fieldTypes: Set<String> = ["boolean", "number", "string"]

    /// Whether `$default` (the whole-document text that `$text` searches) is indexed.
    public var defaultFieldEnabled: Bool {
        switch defaultField {
        case .bool(let enabled): return enabled
        case .object(let object): return object["enabled"]?.boolValue ?? true
        default: return true
        }
    }

    /// Reads a definition sent to `POST /_index`; CouchDB's errors.
    init(requested def: JSONObject) throws(CouchError) {
        let known: Set<String> = ["default_analyzer", "default_field", "selector", "partial_filter_selector", "fields",
                                  "index_array_lengths"]
        if let unknown = def.keys.first(where: { !known.contains($0) }) { throw MangoErrors.invalidKey(unknown) }
        defaultAnalyzer = def["default_analyzer"] ?? "keyword"
        defaultField = def["default_field"] ?? .object(JSONObject())
        selector = try Self.selector(def["selector"])
        let partial = try Self.selector(def["partial_filter_selector"])
        (partialFilter, partialSelector) = Self.partial(partial)
        if let value = def["index_array_lengths"] {
            indexArrayLengths = try MangoFindOptions.boolean(value)
        } else {
            indexArrayLengths = true
        }
        switch def["fields"] {
        case nil, .string("all_fields"):
            fields = nil
        case .array(let list) where list.isEmpty:
            fields = nil
        case .array(let list):
            var parsed: [(name: String, type: String)] = []
            for entry in list {
                guard let object = entry.objectValue, let name = object["name"]?.stringValue, !name.isEmpty,
                      let type = object["type"]?.stringValue, Self.fieldTypes.contains(type) else {
                    throw MangoErrors.named("invalid_index_fields_definition",
                                            "Text Index field definitions must be of the form {\"name\": \"non-empty fieldname\", \"type\": \"boolean,number, or string\"}. Def: \(MangoErrors.text(entry))")
                }
                parsed.append((name: name, type: type))
            }
            fields = parsed
        case let other?:
            throw MangoErrors.named("invalid_index_fields_definition",
                                    "Text Index field definitions must be of the form {\"name\": \"non-empty fieldname\", \"type\": \"boolean,number, or string\"}. Def: \(MangoErrors.text(other))")
        }
    }

    /// Reads a definition stored in a design document; nil when it does not parse.
    init?(stored def: JSONObject) {
        guard let parsed = try? MangoTextDefinition(requested: def) else { return nil }
        self = parsed
    }

    private static func selector(_ value: JSONValue?) throws(CouchError) -> JSONValue {
        guard let value else { return .object(JSONObject()) }
        guard case .object = value else {
            throw MangoErrors.named("invalid_selector_json", "Selector must be a JSON object, not: \(MangoErrors.text(value))")
        }
        do {
            return try MangoSelector(value).normalized
        } catch {
            throw MangoErrors.selector(error)
        }
    }

    private static func partial(_ normalized: JSONValue) -> (JSONValue?, MangoSelector?) {
        guard normalized != .object(JSONObject()), let selector = try? MangoSelector(normalized) else { return (nil, nil) }
        return (normalized, selector)
    }

    /// The definition as the design document stores it.
    var storedJSON: JSONValue {
        .object(JSONObject([
            (key: "default_analyzer", value: defaultAnalyzer),
            (key: "default_field", value: defaultField),
            (key: "selector", value: selector),
            (key: "partial_filter_selector", value: partialFilter ?? .object(JSONObject())),
            (key: "fields", value: fields.map { list in
                .array(list.map { .object(JSONObject([(key: "name", value: JSONValue($0.name)),
                                                      (key: "type", value: JSONValue($0.type))])) })
            } ?? "all_fields"),
            (key: "index_array_lengths", value: .bool(indexArrayLengths)),
        ]))
    }

    /// The analyzer member stored beside the definition (`construct_analyzer`).
    var analyzerJSON: JSONValue {
        if defaultField == .bool(false) { return defaultAnalyzer }
        let defaultFieldAnalyzer = defaultField.objectValue?["analyzer"] ?? "standard"
        return .object(JSONObject([
            (key: "name", value: "perfield"),
            (key: "default", value: defaultAnalyzer),
            (key: "fields", value: .object(JSONObject([(key: "$default", value: defaultFieldAnalyzer)]))),
        ]))
    }

    /// `def` as `_index` lists it.
    var definitionJSON: JSONObject {
        var members: [JSONObject.Member] = [
            (key: "default_analyzer", value: defaultAnalyzer),
            (key: "default_field", value: defaultField),
            (key: "selector", value: selector),
        ]
        if let partialFilter { members.append((key: "partial_filter_selector", value: partialFilter)) }
        members.append((key: "fields", value: .array((fields ?? []).map {
            .object(JSONObject([(key: $0.name, value: JSONValue($0.type))]))
        })))
        members.append((key: "index_array_lengths", value: .bool(indexArrayLengths)))
        return JSONObject(members)
    }
}
