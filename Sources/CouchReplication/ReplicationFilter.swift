import CouchCore

/// Which changes of the source a replication copies.
public enum ReplicationFilter: Sendable, Equatable {
    /// `doc_ids`: only these documents (`filter=_doc_ids`, the IDs in a POST body).
    case documentIDs([String])
    /// `selector`: documents a Mango selector matches (`filter=_selector`, POST body).
    case selector(JSONValue)
    /// `filter` (`ddoc/name`, run by the source) with `query_params` sent as query parameters.
    case named(String, queryParameters: JSONObject)

    /// The named filter's design document and function name (`ddoc/name`).
    var designFunction: (designDocument: DocumentID, name: String)? {
        guard case .named(let name, _) = self, !name.hasBytePrefix("_") else { return nil }
        let parts = name.split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        return (DocumentID(DocumentID.designPrefix + parts[0]), String(parts[1]))
    }

    /// A query parameter value from `query_params`, as CouchDB's `couch_util:to_list`
    /// writes it: strings as they are, anything else as JSON.
    static func parameterText(_ value: JSONValue) -> String {
        value.stringValue ?? value.serializedString()
    }
}
