import CouchCore
import Foundation

/// A replication's identity, after CouchDB's replication ID version 4. The same
/// replication gets the same ID on every run, so it finds its checkpoints again; a
/// replication that differs in what it copies gets another.
///
/// The base ID is the lower-case hex MD5 of the canonical JSON (sorted keys) of the array
///
///     [server UUID, source, target, filter?, {"winning_revs_only": true}?, {"transform": name}?, {"since_seq": seq}?]
///
/// where an endpoint is `{"local": "name"}` or
/// `{"remote": {"user": "u" | null, "host": "h", "port": 1234 | "default", "path": "/db/",
/// "headers": {name: value, ...}}}` — the user but never the password, the port only when
/// it is not 80, 443 or 5984, custom headers but not the ones that carried credentials,
/// and no OAuth secrets (as CouchDB: changing a password keeps the checkpoints) — and the
/// filter is `{"filter_code": source, "query_params": {...}}` for a named filter (the
/// function's source as the source database holds it, so editing the function starts a new
/// replication), `{"doc_ids": [...]}` or `{"selector": {...}}`. CouchDB hashes Erlang's
/// `term_to_binary` of the same parts; IDs therefore differ from CouchDB's, but nothing
/// compares them across implementations (the server UUID alone already differs).
///
/// The job ID (`_local_id`, `replication_id` in `_active_tasks`) appends `+continuous` and
/// `+create_target` when set; the checkpoint document is `_local/<base ID>`.
public struct ReplicationID: Sendable, Hashable, CustomStringConvertible {
    public static let version = 4

    public let baseID: String
    public let extensions: String

    public init(baseID: String, extensions: String = "") {
        self.baseID = baseID
        self.extensions = extensions
    }

    public init(settings: ReplicationSettings, serverUUID: String, filterCode: String?) {
        var parts: [JSONValue] = [JSONValue(serverUUID), Self.describe(settings.source), Self.describe(settings.target)]
        switch settings.filter {
        case .none: break
        case .documentIDs(let ids): parts.append(["doc_ids": .array(ids.map { JSONValue($0) })])
        case .selector(let selector): parts.append(["selector": selector])
        case .named(let name, let parameters):
            parts.append(["filter_code": JSONValue(filterCode ?? name), "query_params": .object(parameters)])
        }
        if settings.winningRevisionsOnly { parts.append(["winning_revs_only": true]) }
        // What is written depends on it: another transform is another replication.
        if let transform = settings.transformName { parts.append(["transform": JSONValue(transform)]) }
        if let since = settings.sinceSequence { parts.append(["since_seq": since.json]) }
        baseID = Digest.hex(Digest.md5(JSONValue.array(parts).canonicalBytes))
        extensions = (settings.continuous ? "+continuous" : "") + (settings.createTarget ? "+create_target" : "")
    }

    /// `base+continuous+create_target`, the ID users see and cancel by.
    public var jobID: String { baseID + extensions }

    public var checkpointDocumentID: DocumentID { DocumentID(DocumentID.localPrefix + baseID) }

    public var description: String { jobID }

    /// Splits a job ID as users give it back (`+` may arrive as a space from a URL).
    public static func baseID(ofJobID jobID: String) -> String {
        let text = jobID.replacingOccurrences(of: " ", with: "+")
        return String(text.prefix { $0 != "+" })
    }

    static func describe(_ peer: ReplicationPeer) -> JSONValue {
        switch peer {
        case .local(let name):
            return ["local": JSONValue(name.rawValue)]
        case .remote(let remote):
            var headers = JSONObject()
            for header in remote.headers { headers[header.name] = JSONValue(header.value) }
            let port: JSONValue = remote.nonDefaultPort.map { JSONValue($0) } ?? "default"
            let user: JSONValue = (remote.urlUser ?? remote.credentials?.user).map { JSONValue($0) } ?? .null
            return ["remote": ["user": user, "host": JSONValue(remote.host.lowercased()), "port": port,
                               "path": JSONValue(remote.path), "headers": .object(headers)]]
        }
    }
}
