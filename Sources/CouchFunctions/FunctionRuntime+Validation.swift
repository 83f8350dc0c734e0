import CouchCore

/// Validation, as the store's `DocumentValidator`: native validations, then every design
/// document's `validate_doc_update`. The writes of one request are validated together, in
/// one entry into the engine, as each entry costs more than a small function's work.
extension FunctionRuntime {
    public func validates(_ database: any FunctionDatabase) -> Bool {
        if !lock.withLock({ natives.validations(for: database.name).isEmpty }) { return true }
        return ((try? loaded(database).validations.isEmpty) ?? true) == false
    }

    public func validate(_ write: ProposedWrite, in database: any FunctionDatabase) throws(CouchError) {
        if let error = validate([write], in: database).first ?? nil { throw error }
    }

    /// CouchDB's checks of a design document's `options.partitioned`: only a partitioned
    /// database's design documents may be partitioned, and their views reduce only with built-ins.
    static func checkPartitioning(_ body: JSONObject, partitionedDatabase: Bool) throws(CouchError) {
        let option = body["options"]?["partitioned"]
        if let option, option.boolValue == nil {
            throw CouchError(.invalidDesignDocument, "`options.partitioned` field must have boolean type")
        }
        guard partitionedDatabase else {
            if option?.boolValue == true {
                throw CouchError(.invalidDesignDocument, "partitioned option cannot be true in a non-partitioned database.")
            }
            return
        }
        guard option?.boolValue != false else { return }
        for (_, view) in body["views"]?.objectValue ?? JSONObject() {
            if let reduce = view["reduce"]?.stringValue, !reduce.hasBytePrefix("_") {
                throw CouchError(.invalidDesignDocument, "Javascript reduces not supported in partitioned view.")
            }
        }
    }

    public func validate(_ writes: [ProposedWrite], in database: any FunctionDatabase) -> [CouchError?] {
        var results = [CouchError?](repeating: nil, count: writes.count)
        let natives = lock.withLock { self.natives.validations(for: database.name) }
        let scripts: [DesignDocument]
        do {
            scripts = try loaded(database).validations
        } catch {
            return results.map { _ in error }
        }
        let security = JSONValue.object(securityObjectProvider(database))
        var pending: [Int] = []
        for (index, write) in writes.enumerated() {
            // A design document is checked for functions that do not compile; validation
            // functions do not apply to it (only admins write it), as in CouchDB.
            if write.documentID.isDesign {
                if write.newDocument["_deleted"] != true {
                    do {
                        try checkDesignDocument(write.documentID, body: write.newDocument, in: database.name)
                        try Self.checkPartitioning(write.newDocument, partitionedDatabase: database.isPartitioned)
                    } catch {
                        results[index] = error
                    }
                }
                continue
            }
            let userContext = Self.userContext(write.user, database: database.name)
            do {
                for native in natives {
                    try native(ValidationArguments(newDocument: .object(write.newDocument),
                                                   oldDocument: write.oldDocument.map(JSONValue.object) ?? .null,
                                                   userContext: userContext, securityObject: security))
                }
                if !scripts.isEmpty { pending.append(index) }
            } catch let error as CouchError {
                results[index] = error
            } catch {
                results[index] = CouchError(.unknownError, String(describing: error))
            }
        }
        guard !pending.isEmpty else { return results }
        // [[newDoc, oldDoc, userCtx], ...]: one JSON text, one conversion into the engine.
        var entries: [UInt8] = [UInt8(ascii: "[")]
        for (position, index) in pending.enumerated() {
            let write = writes[index]
            if position > 0 { entries.append(UInt8(ascii: ",")) }
            entries += JSONValue.array([.object(write.newDocument), write.oldDocument.map(JSONValue.object) ?? .null,
                                        Self.userContext(write.user, database: database.name)]).serialized()
        }
        entries.append(UInt8(ascii: "]"))
        let securityJSON = security.serialized()
        do throws(CouchError) {
            let functions = scripts.map { design in
                FunctionWorkerProtocol.Function(key: design.key(.validation, "", database: database.name),
                                                source: design.validation ?? "", design: design.json)
            }
            let call = FunctionWorkerProtocol.Call(driver: "validateBatch", functions: functions, functionsAsArray: true,
                                                   arguments: [entries, securityJSON])
            guard case .array(let outcomes)? = try self.call(call, owner: database.name) else {
                throw CouchError.internalError("validation answered no result")
            }
            for (position, index) in pending.enumerated() {
                results[index] = Self.validationError(position < outcomes.count ? outcomes[position] : .null)
            }
        } catch {
            for index in pending { results[index] = error }
        }
        return results
    }

    /// CouchDB's reading of one validation's outcome (the JSON text `validateBatch` gives):
    /// `"pass"`, the only one that lets the write through; a thrown value (`{forbidden}` → 403,
    /// `{unauthorized}` → 401, another one-member object or a string → `unknown_error`,
    /// `["error", name, reason]` → that error, anything else → 500 `unnamed_error`); an `Error`
    /// (its name); a throw JSON cannot carry (CouchDB's answer: 500 `parse_error`). Anything
    /// unreadable refuses the write too.
    static func validationError(_ outcome: JSONValue) -> CouchError? {
        guard case .string(let text) = outcome else { return CouchError.internalError("validation answered no outcome") }
        if text == "pass" { return nil }
        guard let outcome = try? JSONValue.parse(Array(text.utf8)) else {
            return CouchError.internalError("validation answered an unreadable outcome")
        }
        if case .array(let error)? = outcome["error"], error.count == 2, let name = error[0].stringValue {
            return CouchError.named(name, "\(name): \(error[1].stringValue ?? "")")
        }
        if outcome["unserializable"] == true { return CouchError.named("parse_error", "bad_token") }
        guard let thrown = outcome["thrown"] else { return CouchError.internalError("validation answered no outcome") }
        switch thrown {
        case .object(let object):
            if let reason = object["forbidden"] { return CouchError(.forbidden, reason.stringValue ?? reason.serializedString()) }
            if let reason = object["unauthorized"] { return CouchError(.unauthorized, reason.stringValue ?? reason.serializedString()) }
            if let name = object["error"]?.stringValue, let reason = object["reason"] {
                return CouchError.named(name, reason.stringValue ?? reason.serializedString())
            }
            if object.count == 1 {
                for (_, reason) in object { return CouchError(.unknownError, reason.stringValue ?? reason.serializedString()) }
            }
        case .string(let reason):
            return CouchError(.unknownError, reason)
        case .array(let items) where items.count == 3 && items[0] == "error":
            if let name = items[1].stringValue { return CouchError.named(name, items[2].stringValue ?? items[2].serializedString()) }
        default:
            break
        }
        return CouchError.named("unnamed_error", thrown.serializedString())
    }
}
