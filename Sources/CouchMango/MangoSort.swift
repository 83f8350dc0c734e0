import CouchCore

/// A `sort` specification (`mango_sort`): fields with one direction for all of them.
public struct MangoSort: Sendable, Equatable {
    public let fields: [String]
    /// True when every field is sorted `desc`.
    public let descending: Bool

    public static let none = MangoSort(fields: [], descending: false)

    init(fields: [String], descending: Bool) {
        self.fields = fields
        self.descending = descending
    }

    /// Parses `["a", {"b": "desc"}]`; CouchDB's errors for anything else.
    public init(json: JSONValue) throws(CouchError) {
        guard case .array(let specs) = json else {
            throw MangoErrors.named("invalid_sort_json", "Sort must be an array of sort specs, not: \(MangoErrors.text(json))")
        }
        var fields: [String] = []
        var directions: [String] = []
        for spec in specs {
            switch spec {
            case .string(let field):
                fields.append(field)
                directions.append("asc")
            case .object(let object) where object.count == 1:
                let member = object.members[0]
                guard case .string(let direction) = member.value, direction == "asc" || direction == "desc" else {
                    throw MangoErrors.named("invalid_sort_dir", "Invalid sort direction: \(MangoErrors.text(member.value))")
                }
                fields.append(member.key)
                directions.append(direction)
            default:
                throw MangoErrors.named("invalid_sort_field", "Invalid sort field: \(MangoErrors.text(spec))")
            }
        }
        if Set(directions).count > 1 {
            throw MangoErrors.named("unsupported_mixed_sort", "Sorts currently only support a single direction for all fields.")
        }
        self.fields = fields
        descending = directions.first == "desc"
    }

    /// `{"a": "asc", ...}` as `_explain`'s `opts` shows it (mango_sort's `{Props}`).
    var json: JSONValue {
        .object(JSONObject(fields.map { (key: $0, value: JSONValue(descending ? "desc" : "asc")) }))
    }

    /// `[{"a": "asc"}, ...]`, an index definition's `fields` as `_index` lists them.
    static func fieldList(_ fields: [(name: String, descending: Bool)]) -> JSONValue {
        .array(fields.map { .object(JSONObject([(key: $0.name, value: JSONValue($0.descending ? "desc" : "asc"))])) })
    }
}
