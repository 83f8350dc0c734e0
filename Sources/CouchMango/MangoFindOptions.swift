import CouchCore

/// The body of `_find` and `_explain`, validated as `mango_opts:validate_find` does: every
/// key known, each value checked, defaults filled in.
public struct MangoFindOptions: Sendable {
    public var selector: MangoSelector
    /// `use_index`: `[]`, `[ddoc]` or `[ddoc, name]` (ddoc without `_design/`).
    public var useIndex: [String] = []
    /// The bookmark as sent; nil for none (`null`, `""`).
    public var bookmark: String?
    public var limit: Int
    public var skip = 0
    public var sort = MangoSort.none
    public var fields = MangoFields.all
    public var partition = ""
    public var r = 1
    public var conflicts = false
    public var stale = false
    public var update = true
    public var stable = false
    public var executionStats = false
    public var allowFallback = true
    /// Whether the database is partitioned (not from the body): a partition query then uses
    /// partitioned indexes only, a global one global indexes only.
    public var databasePartitioned = false

    public static let defaultLimit = 25

    /// Reads `body`; CouchDB's error for the first bad key or value.
    public init(_ body: JSONObject, defaultLimit: Int = MangoFindOptions.defaultLimit) throws(CouchError) {
        let known: Set<String> = ["selector", "use_index", "bookmark", "limit", "skip", "sort", "fields", "partition", "r",
                                  "conflicts", "stale", "update", "stable", "execution_stats", "allow_fallback"]
        // CouchDB checks every known key first, then names the first unknown one.
        guard let selectorJSON = body["selector"] else { throw MangoErrors.missingRequiredKey("selector") }
        guard case .object = selectorJSON else {
            throw MangoErrors.named("invalid_selector_json", "Selector must be a JSON object, not: \(MangoErrors.text(selectorJSON))")
        }
        do {
            selector = try MangoSelector(selectorJSON)
        } catch {
            throw MangoErrors.selector(error)
        }
        limit = defaultLimit
        if let value = body["use_index"] { useIndex = try Self.useIndex(value) }
        if let value = body["bookmark"] {
            switch value {
            case .null: bookmark = nil
            case .string(let text): bookmark = text.isEmpty ? nil : text
            default: throw MangoErrors.named("invalid_bookmark", "Invalid bookmark value: \(MangoErrors.text(value))")
            }
            try MangoBookmark.validate(bookmark)
        }
        if let value = body["limit"] { limit = try Self.nonNegativeInteger(value) }
        if let value = body["skip"] { skip = try Self.nonNegativeInteger(value) }
        if let value = body["sort"] { sort = try MangoSort(json: value) }
        if let value = body["fields"] { fields = try MangoFields(json: value) }
        if let value = body["partition"] {
            guard case .string(let text) = value else { throw MangoErrors.invalidString(value) }
            partition = text
        }
        if let value = body["r"] {
            guard case .number(let n) = value, n.isIntegerLiteral, let int = n.intValue, int > 0 else {
                throw MangoErrors.invalidPositiveInteger(value)
            }
            r = int
        }
        if let value = body["conflicts"] { conflicts = try Self.boolean(value) }
        if let value = body["stale"] {
            guard value == .string("ok") || value == .bool(false) else {
                throw MangoErrors.named("invalid_value", "Invalid value for stale: \(MangoErrors.text(value))")
            }
            stale = value == .string("ok")
            if stale {
                stable = true
                update = false
            }
        }
        if let value = body["update"] { update = try Self.boolean(value) }
        if let value = body["stable"] { stable = try Self.boolean(value) }
        if let value = body["execution_stats"] { executionStats = try Self.boolean(value) }
        if let value = body["allow_fallback"] { allowFallback = try Self.boolean(value) }
        if let unknown = body.keys.first(where: { !known.contains($0) }) { throw MangoErrors.invalidKey(unknown) }
    }

    static func boolean(_ value: JSONValue) throws(CouchError) -> Bool {
        guard case .bool(let bool) = value else { throw MangoErrors.invalidBoolean(value) }
        return bool
    }

    static func nonNegativeInteger(_ value: JSONValue) throws(CouchError) -> Int {
        // Beyond Int the number is still a valid "no limit": saturate rather than refuse.
        guard case .number(let n) = value, n.isIntegerLiteral, !n.text.hasPrefix("-") else {
            throw MangoErrors.invalidNonNegativeInteger(value)
        }
        return n.intValue ?? Int.max
    }

    /// `mango_opts:validate_use_index`.
    static func useIndex(_ value: JSONValue) throws(CouchError) -> [String] {
        func invalid() -> CouchError { MangoErrors.named("invalid_index_name", "Invalid index name: \(MangoErrors.text(value))") }
        switch value {
        case .null: return []
        case .string(let name):
            let parts = name.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            if parts.count == 1 { return parts }
            if parts[0] == "_design" {
                let rest = parts[1].split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                return rest
            }
            return parts
        case .array(let items):
            let names = items.compactMap(\.stringValue)
            guard names.count == items.count, names.count <= 2 else { throw invalid() }
            return names
        default:
            throw invalid()
        }
    }

    /// `opts` as `_explain` shows them, in `validate_find`'s order.
    var explainJSON: JSONValue {
        .object(JSONObject([
            (key: "use_index", value: .array(useIndex.map { JSONValue($0) })),
            (key: "bookmark", value: JSONValue(bookmark ?? "nil")),
            (key: "limit", value: JSONValue(limit)),
            (key: "skip", value: JSONValue(skip)),
            (key: "sort", value: sort.json),
            (key: "fields", value: fields.json),
            (key: "partition", value: JSONValue(partition)),
            (key: "r", value: JSONValue(r)),
            (key: "conflicts", value: .bool(conflicts)),
            (key: "stale", value: .bool(stale)),
            (key: "update", value: .bool(update)),
            (key: "stable", value: .bool(stable)),
            (key: "execution_stats", value: .bool(executionStats)),
            (key: "allow_fallback", value: .bool(allowFallback)),
        ]))
    }
}
