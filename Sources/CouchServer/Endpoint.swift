import CouchCore

/// CouchDB's irregular URL grammar parsed once into a value: `_design/` and `_local/`
/// IDs (also written `_design%2Fx`), `%2F` inside IDs, attachment names with `/`.
public enum Endpoint: Sendable, Equatable {
    case server(ServerResource)
    case database(DatabaseName)
    case databaseResource(DatabaseName, DatabaseResource)
    case document(DatabaseName, DocumentID)
    case attachment(DatabaseName, DocumentID, String)
    /// A design document's sub-resource (`_view`, `_show`, ...), not served yet.
    case designResource(DatabaseName, DocumentID, String)
    /// `/_scheduler/...`
    case scheduler(SchedulerResource)
    /// `/db/_index/{ddoc}/{type}/{name}` and `/db/_index/_bulk_delete`: the path after `_index`.
    case index(DatabaseName, [String])
    /// `/db/_partition/{partition}[/...]`: a partition's information (no rest) or a query
    /// over its rows (`_all_docs`, ...), as written after the partition.
    case partition(DatabaseName, String, [String])

    public enum SchedulerResource: Sendable, Equatable {
        case jobs
        case job(String)
        /// `_scheduler/docs` (nil: every replicator database) and `_scheduler/docs/{db}`.
        case documents(DatabaseName?)
        case document(DatabaseName, DocumentID)
        /// Couchette's `_scheduler/docs/{db}/{docid}/_pending`: what a push job has not copied yet.
        case pending(DatabaseName, DocumentID)
    }
    /// `/_node/{node}/...`: the node name as written (`_local` or the real name) and what is asked.
    case node(String, NodeResource)
    /// `/_utils/...`: a file of the admin page, by its decoded path segments (empty: the folder).
    case utils([String])
    /// `/_reshard/...`: the path after `_reshard` (see `ReshardRoutes`).
    case reshard([String])

    public enum ServerResource: String, Sendable, CaseIterable {
        case root = ""
        case allDatabases = "_all_dbs"
        case uuids = "_uuids"
        case up = "_up"
        case session = "_session"
        case replicate = "_replicate"
        case activeTasks = "_active_tasks"
        case membership = "_membership"
        case databasesInfo = "_dbs_info"
        case databaseUpdates = "_db_updates"
        /// CouchDB 1's `/_stats` and `/_config`, gone in CouchDB 3 (see `ServerRoutes`).
        case legacyStats = "_stats"
        case legacyConfig = "_config"
    }

    /// What `/_node/{node}/...` names.
    public enum NodeResource: Sendable, Equatable {
        case name
        case config
        case configSection(String)
        case configKey(String, String)
        case configReload
        case stats([String])
        case system
        case versions
        case prometheus

        /// The resource of `/_node/{node}/` + `rest`; `not_found` when there is none.
        init(_ rest: ArraySlice<String>) throws(CouchError) {
            let parts = Array(rest)
            switch parts.first {
            case nil: self = .name
            case "_config":
                switch parts.count {
                case 1: self = .config
                case 2: self = parts[1] == "_reload" ? .configReload : .configSection(parts[1])
                case 3: self = .configKey(parts[1], parts[2])
                default: throw CouchError.notFound("missing")
                }
            case "_stats": self = .stats(Array(parts.dropFirst()))
            case "_system" where parts.count == 1: self = .system
            case "_versions" where parts.count == 1: self = .versions
            case "_prometheus" where parts.count == 1: self = .prometheus
            default: throw CouchError.notFound("missing")
            }
        }

        var route: NodeRoute {
            switch self {
            case .name: .name
            case .config: .config
            case .configSection: .configSection
            case .configKey: .configKey
            case .configReload: .configReload
            case .stats: .stats
            case .system: .system
            case .versions: .versions
            case .prometheus: .prometheus
            }
        }
    }

    /// A node resource without its parameters, the key of the route table.
    public enum NodeRoute: Sendable, Hashable {
        case name, config, configSection, configKey, configReload, stats, system, versions, prometheus
    }

    public enum DatabaseResource: String, Sendable, CaseIterable {
        case allDocuments = "_all_docs"
        case designDocuments = "_design_docs"
        case bulkDocuments = "_bulk_docs"
        case bulkGet = "_bulk_get"
        case changes = "_changes"
        case revisionsDifference = "_revs_diff"
        case missingRevisions = "_missing_revs"
        case compact = "_compact"
        case ensureFullCommit = "_ensure_full_commit"
        case revisionsLimit = "_revs_limit"
        case security = "_security"
        case purge = "_purge"
        case purgedInfosLimit = "_purged_infos_limit"
        case purgedInfos = "_purged_infos"
        case viewCleanup = "_view_cleanup"
        case allDocumentsQueries = "_all_docs/queries"
        case designDocumentsQueries = "_design_docs/queries"
        case find = "_find"
        case explain = "_explain"
        case index = "_index"
        case localDocuments = "_local_docs"
        case shards = "_shards"
    }

    /// `plusIsSpace`: CouchDB's `[chttpd] decode_plus_to_space` (a `+` in a segment is a space).
    public init(path: String, plusIsSpace: Bool = false) throws(CouchError) {
        // Empty segments are dropped, as CouchDB's `string:tokens(Path, "/")` drops them:
        // `/db//doc/` names `/db/doc`. Split on the byte, as CouchDB does, in one pass that
        // decodes each segment as it finds it (every request comes through here).
        let decoded = try Self.decodedSegments(path, plusIsSpace: plusIsSpace)
        guard let first = decoded.first else {
            self = .server(.root)
            return
        }
        if first.utf8.first == UInt8(ascii: "_") {
            // A server resource is named as it is, not percent-encoded.
            if decoded.count == 1, path.utf8.first(where: { $0 != UInt8(ascii: "/") }) == UInt8(ascii: "_"),
               let resource = ServerResource(rawValue: first) {
                self = .server(resource)
                return
            }
            switch first {
            case "_scheduler":
                self = .scheduler(try Self.schedulerResource(Array(decoded.dropFirst())))
                return
            case "_reshard":
                self = .reshard(Array(decoded.dropFirst()))
                return
            case "_utils":
                self = .utils(Array(decoded.dropFirst()))
                return
            case "_node":
                guard decoded.count > 1 else { throw CouchError.badRequest("Incomplete path to _node request") }
                self = .node(decoded[1], try NodeResource(decoded.dropFirst(2)))
                return
            default:
                break
            }
        }
        let database = try DatabaseName(decoded[0])
        guard decoded.count > 1 else {
            self = .database(database)
            return
        }
        let second = decoded[1]
        let rest = decoded.dropFirst(2)
        // A document, most often: every other resource of a database begins with `_`.
        guard second.utf8.first == UInt8(ascii: "_") else {
            self = Self.documentOrAttachment(database, try DocumentID.validated(second), Array(rest))
            return
        }
        switch second {
        // As CouchDB's `chttpd_db:db_req`: one name after `_local`, no attachments.
        case "_local", "_local/":
            guard second == "_local", let name = rest.first else { throw CouchError.badRequest("Invalid _local document id.") }
            guard rest.count == 1 else { throw CouchError.badRequest("_local documents do not accept attachments.") }
            self = .document(database, try DocumentID.validated(DocumentID.localPrefix + name))
        case "_design":
            guard let name = rest.first else { throw CouchError.badRequest("Missing _design document id") }
            // Validated as `_design%2F...` is: the same ID must be refused whichever way it is written.
            let id = try DocumentID.validated(DocumentID.designPrefix + name)
            self = Self.documentOrAttachment(database, id, Array(rest.dropFirst()))
        case "_partition":
            // CouchDB answers `/db/_partition` itself with this reason.
            guard let partition = rest.first else { throw CouchError.badRequest("invalid_partition_req") }
            self = .partition(database, partition, Array(rest.dropFirst()))
        case _ where second.hasBytePrefix(DocumentID.localPrefix):
            self = .document(database, try DocumentID.validated(([second] + rest).joined(separator: "/")))
        case _ where second.hasBytePrefix(DocumentID.designPrefix):
            self = Self.documentOrAttachment(database, try DocumentID.validated(second), Array(rest))
        // `POST /db/_compact/ddoc` compacts the design document's index.
        case "_compact" where rest.count == 1:
            self = .designResource(database, DocumentID(DocumentID.designPrefix + rest[rest.startIndex]), "_compact")
        case "_index" where !rest.isEmpty:
            self = .index(database, Array(rest))
        case "_temp_view":
            throw CouchError(.gone, "Temporary views are not supported in CouchDB")
        default:
            guard let resource = DatabaseResource(rawValue: ([second] + rest).joined(separator: "/")) else {
                throw CouchError(.illegalDocumentID, "Only reserved document ids may start with underscore.")
            }
            self = .databaseResource(database, resource)
        }
    }

    /// The path's segments between slashes, empty ones dropped, each percent-decoded.
    private static func decodedSegments(_ path: String, plusIsSpace: Bool) throws(CouchError) -> [String] {
        var segments: [String] = []
        segments.reserveCapacity(4)
        let bytes = path.utf8
        var start = bytes.startIndex
        while start != bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
            if end != start {
                guard let text = PercentDecoding.decode(path[start..<end], plusIsSpace: plusIsSpace) else {
                    throw CouchError.badRequest("Invalid URL encoding")
                }
                segments.append(text)
            }
            start = end == bytes.endIndex ? end : bytes.index(after: end)
        }
        return segments
    }

    /// CouchDB's `_scheduler` paths; a replicator database's `/` may be left unescaped
    /// (`/_scheduler/docs/a/b/_replicator/doc`), as `couch_replicator_httpd` allows.
    private static func schedulerResource(_ parts: [String]) throws(CouchError) -> SchedulerResource {
        switch parts.first {
        case "jobs"?:
            if parts.count == 1 { return .jobs }
            if parts.count == 2 { return .job(parts[1]) }
        case "docs"?:
            var rest = Array(parts.dropFirst())
            if rest.count >= 2, rest.last == "_pending" {
                rest.removeLast()
                guard case .document(let database, let id) = try schedulerResource(["docs"] + rest) else {
                    throw CouchError.badRequest("Invalid _scheduler/docs path")
                }
                return .pending(database, id)
            }
            if rest.isEmpty { return .documents(nil) }
            if rest.count == 1, let name = try? DatabaseName(rest[0]), name.isReplicator { return .documents(name) }
            if rest.count == 2, let name = try? DatabaseName(rest[0]), name.isReplicator {
                return .document(name, DocumentID(rest[1]))
            }
            guard let index = rest.firstIndex(of: "_replicator"), rest.count - index <= 2 else {
                throw CouchError.badRequest("Invalid _scheduler/docs path")
            }
            let name = try DatabaseName(rest[...index].joined(separator: "/"))
            return index + 1 < rest.count ? .document(name, DocumentID(rest[index + 1])) : .documents(name)
        default:
            break
        }
        throw CouchError(.notFound, "missing")
    }

    private static func documentOrAttachment(_ database: DatabaseName, _ id: DocumentID, _ rest: [String]) -> Endpoint {
        guard let first = rest.first else { return .document(database, id) }
        if id.isDesign, first.utf8.first == UInt8(ascii: "_") { return .designResource(database, id, first) }
        return .attachment(database, id, rest.joined(separator: "/"))
    }

    public var databaseName: DatabaseName? {
        switch self {
        case .server, .scheduler, .node, .utils, .reshard: nil
        case .database(let name), .databaseResource(let name, _), .document(let name, _),
             .attachment(let name, _, _), .designResource(let name, _, _), .index(let name, _),
             .partition(let name, _, _): name
        }
    }
}
