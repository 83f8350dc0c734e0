import CouchCore
import CouchStore

/// The one place a change feed decides which rows a client sees. Built-in filters now;
/// named design-document filters will implement the same protocol.
protocol ChangeFilter: Sendable {
    /// Whether `accepts` needs the row's document (its body is then read with the row).
    var needsDocument: Bool { get }
    func accepts(_ row: ChangeRow, document: JSONValue?) -> Bool
}

/// `filter=_doc_ids`
struct DocumentIDsFilter: ChangeFilter {
    let ids: Set<String>
    var needsDocument: Bool { false }
    func accepts(_ row: ChangeRow, document: JSONValue?) -> Bool { ids.contains(row.id.rawValue) }
}

/// `filter=_design`
struct DesignDocumentFilter: ChangeFilter {
    var needsDocument: Bool { false }
    func accepts(_ row: ChangeRow, document: JSONValue?) -> Bool { row.id.isDesign }
}

/// `filter=_selector` with a Mango selector.
struct SelectorFilter: ChangeFilter {
    let selector: MangoSelector
    var needsDocument: Bool { true }
    func accepts(_ row: ChangeRow, document: JSONValue?) -> Bool {
        guard let document else { return false }
        return selector.matches(document)
    }
}

extension ChangeRow {
    /// The winning revision as a JSON value with its special members, for filters.
    var documentValue: JSONValue? {
        guard let body, case .object(let members)? = try? JSONValue.parse(body) else { return nil }
        var document: JSONObject = ["_id": JSONValue(id.rawValue), "_rev": JSONValue(winner.description)]
        for (key, value) in members { document[key] = value }
        if isDeleted { document["_deleted"] = true }
        return .object(document)
    }
}
