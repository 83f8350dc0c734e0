import CouchCore
import Foundation
import Logging

/// The one place design-document functions run, whoever calls them: validation on every
/// write (as the store's `DocumentValidator`), filters, map/reduce, show/list/update/rewrite.
/// JavaScript runs in worker processes, each owned by one database (`FunctionWorkerPool`),
/// compiled once per design-document revision in each; native Swift functions registered by
/// name stand beside it and behave the same.
public final class FunctionRuntime: DocumentValidator, @unchecked Sendable {
    let workers: FunctionWorkerPool
    let securityObjectProvider: @Sendable (any FunctionDatabase) -> JSONObject
    let lock = NSLock()
    var natives = NativeFunctions()
    private var designs: [DatabaseName: LoadedDesigns] = [:]

    /// The design documents of one database as of one design generation.
    struct LoadedDesigns {
        let instance: String
        let generation: Int
        let documents: [DesignDocument]
        var validations: [DesignDocument] { documents.filter { $0.validation != nil } }
    }

    /// - Parameters:
    ///   - contexts: how many worker processes may run at once (two per core, at least four, by
    ///     default); one database may keep half of them busy.
    ///   - securityObject: the `secObj` validation functions see (the server applies its default).
    ///   - worker: the `couchette-functions` executable (by default beside this process's own, or
    ///     on `PATH`, or named by `COUCHETTE_FUNCTIONS_WORKER`).
    public init(limits: FunctionLimits = FunctionLimits(), contexts: Int? = nil, worker: String? = nil,
                securityObject: @escaping @Sendable (any FunctionDatabase) -> JSONObject = { (try? $0.securityObject()) ?? [:] }) {
        workers = FunctionWorkerPool(limits: limits, capacity: contexts ?? max(4, 2 * ProcessInfo.processInfo.activeProcessorCount),
                                     executable: worker ?? Self.defaultWorker)
        securityObjectProvider = securityObject
    }

    /// Where the worker executable is when none is named.
    static let defaultWorker: String? = {
        let name = FunctionWorkerProtocol.executableName
        if let path = ProcessInfo.processInfo.environment["COUCHETTE_FUNCTIONS_WORKER"], !path.isEmpty { return path }
        var candidates: [String] = []
        if let own = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append((own as NSString).deletingLastPathComponent + "/" + name)
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append("\(directory)/\(name)")
        }
        return candidates.first { access($0, X_OK) == 0 }
    }()

    // MARK: Native functions

    /// Registers a validation run on every write to `database` (every database when nil),
    /// beside the design documents' `validate_doc_update`.
    public func registerValidation(_ name: String, database: DatabaseName? = nil, _ function: @escaping NativeValidation) {
        lock.withLock { natives.addValidation(name, database: database, function) }
    }

    /// Registers a filter under `ddoc/name`: `filter=ddoc/name` then runs it, whether or
    /// not a design document defines one.
    public func registerFilter(_ name: String, database: DatabaseName? = nil, _ function: @escaping NativeFilter) {
        lock.withLock { natives.addFilter(name, database: database, function) }
    }

    /// Whether `filter=name` on `database` runs a native function.
    public func hasNativeFilter(_ name: String, database: DatabaseName) -> Bool {
        lock.withLock { natives.filter(name, for: database) != nil }
    }

    // MARK: Design documents

    /// Compiles every function of a design document about to be saved into `database`:
    /// CouchDB's 400 `compilation_error` for the first that does not compile.
    public func checkDesignDocument(_ id: DocumentID, body: JSONObject, in database: DatabaseName) throws(CouchError) {
        guard DesignDocument.hasFunctions(body) else { return }
        for (_, view) in body["views"]?.objectValue ?? JSONObject() {
            if let reduce = view["reduce"]?.stringValue, reduce.hasBytePrefix("_"), !DesignDocument.isBuiltInReduce(reduce) {
                throw CouchError(.invalidDesignDocument, "`\(reduce)` is not a supported reduce function.")
            }
        }
        let design = DesignDocument(id: id, revision: "0-check", body: body)
        for function in design.functions {
            do {
                try run(.compile(source: function.source, design: design.json), owner: database)
            } catch where error.kind == .compilationError {
                throw CouchError(.compilationError, DesignDocument.compilationReason(function.kind, function.name, error.reason))
            } catch where error.error == "unknown_query_language" {
                return   // CouchDB saves a design document in a language it cannot run
            }
        }
    }

    /// The database's design documents, read again only after one of them was written.
    public func designDocuments(_ database: any FunctionDatabase) throws(CouchError) -> [DesignDocument] {
        try loaded(database).documents
    }

    func loaded(_ database: any FunctionDatabase) throws(CouchError) -> LoadedDesigns {
        let generation = database.designGeneration
        let cached = lock.withLock { designs[database.name] }
        if let cached, cached.generation == generation, cached.instance == database.instanceStartTime {
            return cached
        }
        // A database deleted and created again under its name is another tenant's.
        if let cached, cached.instance != database.instanceStartTime { workers.retire(owner: database.name.rawValue) }
        let documents = try database.designDocuments().compactMap { stored -> DesignDocument? in
            guard case .object(let members)? = try? JSONValue.parse(stored.body) else { return nil }
            return DesignDocument(id: stored.id, revision: stored.revision.description, body: members)
        }
        let loaded = LoadedDesigns(instance: database.instanceStartTime, generation: generation, documents: documents)
        lock.withLock { designs[database.name] = loaded }
        return loaded
    }

    /// `userCtx` as CouchDB builds it: `{db, name, roles}`.
    public static func userContext(_ user: UserContext, database: DatabaseName) -> JSONValue {
        .object(JSONObject([
            (key: "db", value: JSONValue(database.rawValue)),
            (key: "name", value: user.name.map { JSONValue($0) } ?? .null),
            (key: "roles", value: .array(user.roles.map { JSONValue($0) })),
        ]))
    }

    // MARK: Filters

    /// The filter `ddoc/name` of a database: a native one registered under that name, else
    /// the design document's. CouchDB's 404s for a missing design document or function.
    public func filter(_ name: String, in database: any FunctionDatabase, request: JSONValue) throws(CouchError) -> DocumentFilter {
        if name == "_view" { return try viewFilter(in: database, request: request) }
        let parts = name.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw CouchError.badRequest("filter parameter must be of the form `designname/filtername`")
        }
        if let native = lock.withLock({ natives.filter(name, for: database.name) }) {
            return DocumentFilter(runtime: self, implementation: .native(native), request: request, database: database.name)
        }
        let id = DocumentID(DocumentID.designPrefix + parts[0])
        guard let design = try designDocuments(database).first(where: { $0.id == id }) else {
            throw CouchError.notFound("missing")
        }
        if let missing = design.missingKey("filters", String(parts[1])) {
            try design.refuseUnrunnableLanguage("filters", String(parts[1]))
            throw CouchError.notFound(missing)
        }
        guard let source = design.filters[String(parts[1])] else { throw CouchError.notFound("missing") }
        let key = design.key(.filter, String(parts[1]), database: database.name)
        return DocumentFilter(runtime: self, implementation: .script(key: key, source: source, design: design.json),
                              request: request, database: database.name)
    }

    // MARK: Running

    /// Sends `request` to a worker of `owner`'s database; the JSON text of its answer.
    @discardableResult
    func run(_ request: FunctionWorkerProtocol.Request, owner: DatabaseName) throws(CouchError) -> [UInt8] {
        let cancellation = RequestCancellation.current
        return try workers.withWorker(owner: owner.rawValue) { worker throws(CouchError) in
            try worker.run(request, limits: workers.limits, cancellation: cancellation) { line in
                Self.logger.info("JavaScript log: \(line)")
            }
        }
    }

    /// Calls an environment driver; its answer parsed (nil for `undefined`).
    func call(_ call: FunctionWorkerProtocol.Call, owner: DatabaseName) throws(CouchError) -> JSONValue? {
        let answer = try run(.call(call), owner: owner)
        guard !answer.isEmpty else { return nil }
        do {
            return try JSONValue.parse(answer)
        } catch {
            throw CouchError.internalError("a function's answer is not JSON")
        }
    }

    private static let logger = Logger(label: "couchette.javascript")
}

/// A named filter ready to run over many documents, with its `req` object.
public struct DocumentFilter: Sendable {
    enum Implementation: Sendable {
        case native(NativeFilter)
        case script(key: String, source: String, design: [UInt8])
    }

    let runtime: FunctionRuntime
    let implementation: Implementation
    let request: JSONValue
    /// Whose worker runs it.
    let database: DatabaseName

    /// Which documents pass (each a JSON object with `_id`, `_rev`, `_deleted`...). One
    /// context serves the whole batch; `req` becomes an engine value once per batch.
    public func accepts(_ documents: [[UInt8]]) throws(CouchError) -> [Bool] {
        switch implementation {
        case .native(let function):
            do {
                return try documents.map { try function((try? JSONValue.parse($0)) ?? .null, request) }
            } catch let error as CouchError {
                throw error
            } catch {
                throw CouchError(.unknownError, String(describing: error))
            }
        case .script(let key, let source, let design):
            guard !documents.isEmpty else { return [] }
            let call = FunctionWorkerProtocol.Call(
                driver: "filterBatch", functions: [.init(key: key, source: source, design: design)],
                arguments: [FunctionRuntime.jsonArray(of: documents), request.serialized()])
            guard let flags = try runtime.call(call, owner: database)?.stringValue, flags.utf8.count == documents.count else {
                throw CouchError.internalError("filter batch answered no result")
            }
            return flags.utf8.map { $0 == UInt8(ascii: "1") }
        }
    }
}

extension FunctionRuntime {
    /// One JSON array of documents already serialized: one text, one conversion into the engine.
    static func jsonArray(of documents: [[UInt8]]) -> [UInt8] {
        var batch: [UInt8] = [UInt8(ascii: "[")]
        batch.reserveCapacity(documents.reduce(2) { $0 + $1.count + 1 })
        for (index, document) in documents.enumerated() {
            if index > 0 { batch.append(UInt8(ascii: ",")) }
            batch += document
        }
        batch.append(UInt8(ascii: "]"))
        return batch
    }
}
