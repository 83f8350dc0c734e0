import CouchCore

/// Mango's errors as CouchDB's `mango_error:info/2` names them: each has its own error
/// name and status; the reasons render Erlang terms as JSON (see README's deviations).
enum MangoErrors {
    static func named(_ name: String, _ reason: String, status kind: CouchError.Kind = .badRequest) -> CouchError {
        CouchError(kind, reason, name: name)
    }

    static func text(_ value: JSONValue) -> String { value.serializedString() }

    static func invalidKey(_ key: String) -> CouchError {
        named("invalid_key", "Invalid key \(key) for this request.")
    }

    static func missingRequiredKey(_ key: String) -> CouchError {
        named("missing_required_key", "Missing required key: \(key)")
    }

    static func invalidBoolean(_ value: JSONValue) -> CouchError {
        named("invalid_boolean", "Invalid boolean value: \(text(value))")
    }

    static func invalidPositiveInteger(_ value: JSONValue) -> CouchError {
        named("invalid_pos_integer", "\(text(value)) is not an integer greater than zero")
    }

    static func invalidNonNegativeInteger(_ value: JSONValue) -> CouchError {
        named("invalid_non_neg_integer", "\(text(value)) is not an integer greater than or equal to zero")
    }

    static func invalidString(_ value: JSONValue) -> CouchError {
        named("invalid_string", "Invalid string: \(text(value))")
    }

    static let missingSortIndex = named("no_usable_index", "No index exists for this sort, try indexing by the sort fields.")
    static let selectorUnsupported = named("no_usable_index", "There is no index available for this selector.")

    /// A selector that failed validation: the error name follows the reason, as
    /// `mango_selector` throws them.
    static func selector(_ error: MangoSelectorError) -> CouchError {
        let reason = error.reason
        let name: String
        if reason.hasPrefix("Invalid operator") {
            name = "invalid_operator"
        } else if reason.hasPrefix("Bad argument") {
            name = "bad_arg"
        } else if reason.hasPrefix("Unsupported operator") {
            name = "not_supported"
        } else if reason.hasPrefix("Invalid field normalization") {
            name = "bad_field"
        } else if reason.hasPrefix("Selector must be") {
            name = "invalid_selector_json"
        } else {
            name = "invalid_selector"
        }
        return named(name, reason)
    }
}
