import CouchCore

/// A validation function written in Swift, run on every write as `validate_doc_update` is:
/// throw a `CouchError` (`.forbidden`, `.unauthorized`) to refuse the write.
public typealias NativeValidation = @Sendable (ValidationArguments) throws -> Void

/// A filter function written in Swift, used wherever `filter=ddoc/name` names it.
public typealias NativeFilter = @Sendable (_ document: JSONValue, _ request: JSONValue) throws -> Bool

/// `validate_doc_update(newDoc, oldDoc, userCtx, secObj)`'s arguments.
public struct ValidationArguments: Sendable {
    public let newDocument: JSONValue
    /// `null` for a new document.
    public let oldDocument: JSONValue
    public let userContext: JSONValue
    public let securityObject: JSONValue
}

/// Native functions registered by name, for every database or for one.
struct NativeFunctions: Sendable {
    private var validations: [(name: String, database: DatabaseName?, function: NativeValidation)] = []
    private var filters: [String: [(database: DatabaseName?, function: NativeFilter)]] = [:]

    mutating func addValidation(_ name: String, database: DatabaseName?, _ function: @escaping NativeValidation) {
        validations.removeAll { $0.name == name && $0.database == database }
        validations.append((name, database, function))
    }

    mutating func addFilter(_ name: String, database: DatabaseName?, _ function: @escaping NativeFilter) {
        filters[name, default: []].removeAll { $0.database == database }
        filters[name, default: []].append((database, function))
    }

    func validations(for database: DatabaseName) -> [NativeValidation] {
        validations.filter { $0.database == nil || $0.database == database }.map(\.function)
    }

    /// The database's own registration first, then one for every database.
    func filter(_ name: String, for database: DatabaseName) -> NativeFilter? {
        guard let candidates = filters[name] else { return nil }
        return (candidates.first { $0.database == database } ?? candidates.first { $0.database == nil })?.function
    }
}
