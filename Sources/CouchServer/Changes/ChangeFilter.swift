import CouchCore
import CouchFunctions
import CouchStore

/// The one place a change feed decides which rows a client sees: the built-in filters
/// and named design-document (or native) filters.
protocol ChangeFilter: Sendable {
    /// Whether `accepts` needs the row's document (its body is then read with the row).
    var needsDocument: Bool { get }
    func accepts(_ row: ChangeRow, document: JSONValue?) -> Bool
    /// Which rows of a batch pass; a filter function that fails throws its error.
    func accepts(_ rows: [ChangeRow]) throws(CouchError) -> [Bool]
    /// Whether it runs code or patterns a client supplied: the feed then filters off the
    /// listener's threads (`ChangesFeed`).
    var runsClientCode: Bool { get }
}

extension ChangeFilter {
    var runsClientCode: Bool { false }

    func accepts(_ rows: [ChangeRow]) throws(CouchError) -> [Bool] {
        rows.map { accepts($0, document: needsDocument ? $0.documentValue : nil) }
    }
}

/// `filter=ddoc/name`: a design document's filter function, or a native one of that name,
/// called once per batch of rows.
struct DesignFunctionFilter: ChangeFilter {
    let filter: DocumentFilter
    var needsDocument: Bool { true }
    var runsClientCode: Bool { true }
    func accepts(_ row: ChangeRow, document: JSONValue?) -> Bool { (try? accepts([row]).first) == true }
    func accepts(_ rows: [ChangeRow]) throws(CouchError) -> [Bool] {
        try filter.accepts(rows.map {
            DocumentFilter.document(id: $0.id, revision: $0.winner, isDeleted: $0.isDeleted, body: $0.body)
        })
    }
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
    var runsClientCode: Bool { true }
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
