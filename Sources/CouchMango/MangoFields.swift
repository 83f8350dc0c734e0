import CouchCore

/// The `fields` of a query (`mango_fields`): which members of each document are returned.
public struct MangoFields: Sendable, Equatable {
    /// Nil: the whole document (`fields` omitted or `[]`).
    public let names: [String]?

    public static let all = MangoFields(names: nil)

    init(names: [String]?) { self.names = names }

    public init(json: JSONValue) throws(CouchError) {
        guard case .array(let values) = json else {
            throw MangoErrors.named("invalid_fields", "Fields must be an array of strings, not: \(MangoErrors.text(json))")
        }
        var names: [String] = []
        for value in values {
            guard case .string(let name) = value else {
                throw MangoErrors.named("invalid_field", "Invalid JSON for field spec: \(MangoErrors.text(value))")
            }
            names.append(name)
        }
        self.names = names.isEmpty ? nil : names
    }

    /// `mango_fields:extract`: a new object with the requested paths, in the order asked;
    /// missing paths are left out; nested paths build nested objects.
    public func extract(_ document: JSONValue) -> JSONValue {
        guard let names else { return document }
        var result = JSONObject()
        for name in names {
            guard let path = try? MangoCollation.parseField(name), !path.isEmpty,
                  let value = MangoCollation.field(document, path) else { continue }
            Self.set(&result, path[...], value)
        }
        return .object(result)
    }

    private static func set(_ object: inout JSONObject, _ path: ArraySlice<String>, _ value: JSONValue) {
        guard let first = path.first else { return }
        if path.count == 1 {
            object[first] = value
            return
        }
        var child = object[first]?.objectValue ?? JSONObject()
        set(&child, path.dropFirst(), value)
        object[first] = .object(child)
    }

    var json: JSONValue { .array((names ?? []).map { JSONValue($0) }) }
}
