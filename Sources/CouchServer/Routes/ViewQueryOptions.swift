import CouchCore
import CouchIndex

/// A view query's parameters, read from the query string (text, JSON where CouchDB decodes
/// it) or from a POST body or a `queries` entry (JSON values), and checked as CouchDB's
/// `couch_mrview_http:parse_params` and `couch_mrview_util:validate_args` check them.
struct ViewQueryOptions: Sendable {
    enum Update: Sendable { case yes, no, lazy }

    var range = ViewRange()
    var keys: [JSONValue]?
    var limit: Int?
    var skip = 0
    var group: Bool?
    var groupLevel: Int?
    var reduce: Bool?
    var includeDocs = false
    var conflicts: Bool?
    var attachments = false
    var attachmentEncodingInfo = false
    var update = Update.yes
    var updateSequence = false
    var sorted = true
    /// Whether any of `key`, `startkey`, `endkey` was given (`keys` excludes them).
    private var rangeGiven = false

    /// A parameter as given: query-string text, or a JSON value from a body.
    enum Parameter {
        case text(String)
        case json(JSONValue)
    }

    init() {}

    /// From the query string.
    init(query: [(name: String, value: String)]) throws(CouchError) {
        for (name, value) in query { try set(name, .text(value)) }
    }

    /// From a JSON object (a POST body, an entry of `queries`), over the query string's.
    init(query: [(name: String, value: String)], body: JSONObject) throws(CouchError) {
        try self.init(query: query)
        for (name, value) in body { try set(name, .json(value)) }
    }

    /// A view POST's: the body's parameters, then the query string's over them (CouchDB's
    /// `parse_body_and_query`: the query string wins).
    init(body: JSONObject, query: [(name: String, value: String)]) throws(CouchError) {
        if let keys = body["keys"], keys.arrayValue == nil {
            throw CouchError(.badRequest, "`keys` member must be an array.")   // CouchDB's get_view_keys
        }
        for (name, value) in body { try set(name, .json(value)) }
        for (name, value) in query { try set(name, .text(value)) }
    }

    private mutating func set(_ name: String, _ parameter: Parameter) throws(CouchError) {
        switch name {
        case "key":
            let key = try json(parameter)
            range.startKey = key
            range.endKey = key
            rangeGiven = true
        case "keys":
            guard case .array(let list) = try json(parameter) else {
                throw CouchError(.queryParseError, "`keys` must be an array of strings.")
            }
            keys = list
        case "startkey", "start_key":
            range.startKey = try json(parameter)
            rangeGiven = true
        case "endkey", "end_key":
            range.endKey = try json(parameter)
            rangeGiven = true
        case "startkey_docid", "start_key_doc_id":
            range.startDocID = try docID(parameter, "start_key_docid")
        case "endkey_docid", "end_key_doc_id":
            range.endDocID = try docID(parameter, "end_key_docid")
        case "limit": limit = try positiveInt(parameter)
        case "skip": skip = try positiveInt(parameter)
        case "group": group = try bool(parameter)
        case "group_level": groupLevel = try positiveInt(parameter)
        case "reduce": reduce = try bool(parameter)
        case "include_docs": includeDocs = try bool(parameter)
        case "conflicts": conflicts = try bool(parameter)
        case "attachments": attachments = try bool(parameter)
        case "att_encoding_info": attachmentEncodingInfo = try bool(parameter)
        case "inclusive_end": range.inclusiveEnd = try bool(parameter)
        case "descending": range.descending = try bool(parameter)
        case "update_seq": updateSequence = try bool(parameter)
        case "sorted": sorted = try bool(parameter)
        case "stable": _ = try bool(parameter)
        case "update":
            switch text(parameter) {
            case "true": update = .yes
            case "false": update = .no
            case "lazy": update = .lazy
            default: throw CouchError(.queryParseError, "Invalid value for `update`.")
            }
        case "stale":
            switch text(parameter) {
            case "ok": update = .no
            case "update_after": update = .lazy
            default: throw CouchError(.queryParseError, "Invalid value for `stale`.")
            }
        default:
            break   // CouchDB keeps unknown parameters as "extra" and ignores them
        }
    }

    /// The checks CouchDB makes once it knows whether the view reduces.
    mutating func validate(viewReduces: Bool, collation: ViewCollation = .unicode) throws(CouchError) {
        let reduces = viewReduces && reduce != false
        if !viewReduces, reduce == true { throw CouchError(.queryParseError, "Reduce is invalid for map-only views.") }
        let level = try groupLevelSetting()
        if reduces, let keys, !keys.isEmpty, level != .exact {
            throw CouchError(.queryParseError, "Multi-key fetchs for reduce views must use `group=true`")
        }
        if let keys, !keys.isEmpty, rangeGiven {
            throw CouchError(.queryParseError, "`keys` is incompatible with `key`, `start_key` and `end_key`")
        }
        if !reduces, level != .level(0) {
            throw CouchError(.queryParseError, "Invalid use of grouping on a map view.")
        }
        if reduces, includeDocs { throw CouchError(.queryParseError, "`include_docs` is invalid for reduce") }
        if reduces, conflicts != nil { throw CouchError(.queryParseError, "`conflicts` is invalid for reduce views.") }
        try checkRange(collation)
    }

    enum GroupLevel: Equatable { case exact, level(Int) }

    /// CouchDB's `determine_group_level`.
    func groupLevelSetting() throws(CouchError) -> GroupLevel {
        switch (group, groupLevel) {
        case (nil, nil), (false?, nil): return .level(0)
        case (false?, let level?) where level > 0:
            throw CouchError(.queryParseError, "Can't specify group=false and group_level>0 at the same time")
        case (true?, nil): return .exact
        case (_, let level?): return .level(level)
        }
    }

    /// Whether this query reduces (the view has a reduce and `reduce` is not false).
    func reduces(viewReduces: Bool) -> Bool { viewReduces && reduce != false }

    /// A range that cannot match anything, as CouchDB refuses it (`check_range`).
    private func checkRange(_ collation: ViewCollation) throws(CouchError) {
        guard let start = range.startKey, let end = range.endKey else { return }
        var order = collation.compare(start, end)
        if order == 0 {
            if range.startDocID == nil && range.endDocID == nil { return }
            let highest = "\u{10FFFF}"
            let first = range.startDocID ?? (range.descending ? highest : "")
            let last = range.endDocID ?? (range.descending ? "" : highest)
            order = first == last ? 0 : (first.utf8.lexicographicallyPrecedes(last.utf8) ? -1 : 1)
        }
        if !range.descending, order > 0 {
            throw CouchError(.queryParseError,
                             "No rows can match your key range, reverse your start_key and end_key or set descending=true")
        }
        if range.descending, order < 0 {
            throw CouchError(.queryParseError,
                             "No rows can match your key range, reverse your start_key and end_key or set descending=false")
        }
    }

    // MARK: Reading parameters

    private func json(_ parameter: Parameter) throws(CouchError) -> JSONValue {
        switch parameter {
        case .json(let value): return value
        case .text(let text):
            do {
                return try JSONValue.parse(text)
            } catch {
                throw CouchError(.badRequest, "invalid UTF-8 JSON")
            }
        }
    }

    private func text(_ parameter: Parameter) -> String {
        switch parameter {
        case .text(let text): text
        case .json(let value): value.stringValue ?? value.serializedString()
        }
    }

    private func docID(_ parameter: Parameter, _ name: String) throws(CouchError) -> String {
        switch parameter {
        case .text(let text): return text
        case .json(let value):
            guard let id = value.stringValue else { throw CouchError(.queryParseError, "`\(name)` must be a string.") }
            return id
        }
    }

    private func bool(_ parameter: Parameter) throws(CouchError) -> Bool {
        if case .json(.bool(let flag)) = parameter { return flag }
        let value = text(parameter)
        switch value.lowercased() {
        case "true": return true
        case "false": return false
        default: throw CouchError(.queryParseError, "Invalid boolean parameter: \"\(value)\"")
        }
    }

    private func positiveInt(_ parameter: Parameter) throws(CouchError) -> Int {
        let value = text(parameter)
        guard let int = Int(value) else { throw CouchError(.queryParseError, "Invalid value for integer: \"\(value)\"") }
        guard int >= 0 else { throw CouchError(.queryParseError, "Invalid value for positive integer: \"\(value)\"") }
        return int
    }
}
