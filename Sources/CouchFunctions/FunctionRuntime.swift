import CouchCore
import Foundation

/// The one place design-document functions run, whoever calls them: validation on every
/// write (as the store's `DocumentValidator`), named filters, and (to come) map/reduce and
/// shows/lists on the same contexts. JavaScript is compiled once per design-document
/// revision in each pooled context; native Swift functions registered by name stand beside
/// it and behave the same.
public final class FunctionRuntime: DocumentValidator, @unchecked Sendable {
    let pool: ContextPool
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
    ///   - contexts: how many JavaScript contexts may run at once (two per core by default).
    ///   - securityObject: the `secObj` validation functions see (the server applies its default).
    public init(limits: FunctionLimits = FunctionLimits(), contexts: Int? = nil,
                securityObject: @escaping @Sendable (any FunctionDatabase) -> JSONObject = { (try? $0.securityObject()) ?? [:] }) {
        pool = ContextPool(limits: limits, capacity: contexts ?? max(4, 2 * ProcessInfo.processInfo.activeProcessorCount))
        securityObjectProvider = securityObject
    }

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

    /// Compiles every function of a design document about to be saved: CouchDB's 400
    /// `compilation_error` for the first that does not compile.
    public func checkDesignDocument(_ id: DocumentID, body: JSONObject) throws(CouchError) {
        guard DesignDocument.hasFunctions(body) else { return }
        let design = DesignDocument(id: id, revision: "0-check", body: body)
        try run { context in
            for function in design.functions {
                do {
                    try context.compile(function.source, designDocument: design.json)
                } catch let error as CouchError {
                    throw CouchError(.compilationError, DesignDocument.compilationReason(function.kind, function.name, error.reason))
                }
            }
        }
    }

    /// The database's design documents, read again only after one of them was written.
    public func designDocuments(_ database: any FunctionDatabase) throws(CouchError) -> [DesignDocument] {
        try loaded(database).documents
    }

    func loaded(_ database: any FunctionDatabase) throws(CouchError) -> LoadedDesigns {
        let generation = database.designGeneration
        if let cached = lock.withLock({ designs[database.name] }),
           cached.generation == generation, cached.instance == database.instanceStartTime {
            return cached
        }
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
            return DocumentFilter(runtime: self, implementation: .native(native), request: request)
        }
        let id = DocumentID(DocumentID.designPrefix + parts[0])
        guard let design = try designDocuments(database).first(where: { $0.id == id }) else {
            throw CouchError.notFound("missing")
        }
        if let missing = design.missingKey("filters", String(parts[1])) { throw CouchError.notFound(missing) }
        guard let source = design.filters[String(parts[1])] else { throw CouchError.notFound("missing") }
        let key = design.key(.filter, String(parts[1]), database: database.name)
        return DocumentFilter(runtime: self, implementation: .script(key: key, source: source, design: design.json),
                              request: request)
    }

    // MARK: Running

    /// Runs `body` with a pooled context, turning whatever it throws into a `CouchError`.
    func run<T>(_ body: (ScriptContext) throws -> T) throws(CouchError) -> T {
        do {
            return try pool.withContext(body)
        } catch let error as CouchError {
            throw error
        } catch {
            throw CouchError.internalError("JavaScript engine: \(error)")
        }
    }
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
            let batch = FunctionRuntime.jsonArray(of: documents)
            let requestJSON = request.serialized()
            return try runtime.run { context in
                let function = try context.function(key, source: source, designDocument: design)
                guard let driver = context.filterBatch else { throw CouchError.internalError("JavaScript environment is incomplete") }
                let requestValue = context.retain(context.value(json: requestJSON))
                let documentValues = context.retain(context.value(json: batch))
                defer { context.release(requestValue); context.release(documentValues) }
                let passed: JSONValue?
                do {
                    passed = context.json(try context.call(driver, arguments: [function, documentValues, requestValue]))
                } catch let thrown as ScriptThrow {
                    throw context.scriptError(thrown.value)
                }
                guard let flags = passed?.stringValue, flags.utf8.count == documents.count else {
                    throw CouchError.internalError("filter batch answered no result")
                }
                return flags.utf8.map { $0 == UInt8(ascii: "1") }
            }
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
