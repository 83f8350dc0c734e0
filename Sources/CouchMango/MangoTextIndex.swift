import CouchCore
import CouchStore
import Foundation

/// Couchette's `"type": "text"` indexes, on SQLite FTS5 (CouchDB needs a Lucene service,
/// Clouseau or Nouveau, for these). Each index is an FTS5 table in its own file beside the
/// database, brought up to date from the changes feed before a query, like views. `$text`
/// searches the text of the indexed fields (`$default`); the rest of the selector is
/// matched on each document found, so every operator keeps its meaning. Results come in
/// relevance order (FTS5's BM25).
public final class MangoTextIndexes: @unchecked Sendable {
    private let lock = NSLock()
    private var open: [String: MangoTextStore] = [:]

    public init() {}

    /// The searcher `_find` uses for `database`.
    public func searcher(for database: Database) -> MangoTextSearcher {
        DatabaseTextSearcher(indexes: self, database: database)
    }

    func store(for index: MangoIndex, text: MangoTextDefinition, in database: Database) throws -> MangoTextStore {
        let signature = text.signature
        let key = database.path + "|" + database.instanceStartTime + "|" + signature
        return try lock.withLock {
            if let store = open[key] { return store }
            let directory = database.indexDirectory
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let store = try MangoTextStore(path: directory + "/" + signature + ".text.sqlite", definition: text,
                                           instance: database.instanceStartTime)
            if open.count >= 64 { open.removeAll() }
            open[key] = store
            return store
        }
    }
}

struct DatabaseTextSearcher: MangoTextSearcher {
    let indexes: MangoTextIndexes
    let database: Database

    func search(_ index: MangoIndex, options: MangoFindOptions, source: MangoDocumentSource,
                run: inout MangoQuery.Run) throws {
        guard let text = index.text else { return }
        let query = try Self.textQuery(options.selector.normalized)
        let store = try indexes.store(for: index, text: text, in: database)
        if options.update { try store.update(from: database) }
        // A bookmark is the client's: bound its offset so no arithmetic on it can overflow.
        var offset = min(max(run.resumeAfter?.arrayValue?.first?.intValue ?? 0, 0), 1 << 40)
        while !run.isDone {
            let ids = try store.search(query, offset: offset, limit: MangoQuery.batch)
            run.keysExamined(ids.count)
            let documents = try source.documents(ids)
            for (i, (id, document)) in zip(ids, documents).enumerated() {
                guard let document else { continue }
                if !run.offer(document, position: [JSONValue(offset + i + 1), JSONValue(id)]) { return }
            }
            offset += ids.count
            if ids.count < MangoQuery.batch { return }
        }
    }

    /// The `$text` argument, when the selector has one where a text index can answer it:
    /// at the top, or directly under the top `$and`.
    static func textQuery(_ selector: JSONValue) throws(CouchError) -> String? {
        func text(_ node: JSONValue) -> String? {
            guard let (key, value) = MangoRangeAnalysis.single(node), key == "$default",
                  let (op, arg) = MangoRangeAnalysis.single(value), op == "$text" else { return nil }
            switch arg {
            case .string(let s): return s
            default: return arg.serializedString()
            }
        }
        if let found = text(selector) { return found }
        var found: String?
        if let (key, value) = MangoRangeAnalysis.single(selector), key == "$and", case .array(let args) = value {
            for arg in args { if let t = text(arg) { found = t } }
        }
        if found == nil, MangoRangeAnalysis.isTextSearch(selector) {
            throw MangoErrors.named("text_search_error", "$text is only supported at the top of the selector or in its top $and")
        }
        return found
    }
}

extension MangoTextDefinition {
    /// The name of the index's file: a digest of its definition.
    var signature: String { Digest.hex(Digest.sha1(Array("text\n".utf8) + storedJSON.canonicalBytes)) }
}

extension MangoIndex {
    /// The name of the index's file beside the database (`_view_cleanup` keeps it).
    public var signature: String? {
        switch kind {
        case .special: return nil
        case .json: return MangoJSONIndexes.definition(self).signature
        case .text: return text?.signature
        }
    }
}

/// One text index's FTS5 file: `ids(doc_id, row)` and `docs(text)` with `docs.rowid = row`.
final class MangoTextStore: @unchecked Sendable {
    private let connection: SQLiteConnection
    private let lock = NSLock()
    private let definition: MangoTextDefinition
    private var sequence: Int

    init(path: String, definition: MangoTextDefinition, instance: String) throws {
        self.definition = definition
        connection = try SQLiteConnection(path: path, create: true)
        try connection.execute("""
            PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
            CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS ids (doc_id TEXT PRIMARY KEY, row INTEGER NOT NULL UNIQUE);
            CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
            """)
        var stored: String?
        try connection.query("SELECT value FROM meta WHERE name = 'instance'") { stored = $0.text(0) }
        if stored != instance {
            try connection.execute("BEGIN; DELETE FROM ids; DELETE FROM docs; COMMIT;")
            try connection.run("INSERT OR REPLACE INTO meta (name, value) VALUES ('instance', ?)", [.text(instance)])
            try connection.run("INSERT OR REPLACE INTO meta (name, value) VALUES ('update_seq', '0')")
        }
        var seq = 0
        try connection.query("SELECT value FROM meta WHERE name = 'update_seq'") { seq = Int($0.text(0)) ?? 0 }
        sequence = seq
    }

    /// Indexes the documents changed since the last update, in batches of one transaction each
    /// (stopping between two when the client that asked has gone).
    func update(from database: Database) throws {
        try lock.withLock {
            while sequence < database.updateSequence {
                try RequestCancellation.checkCurrent()
                let changes = try database.changes(ChangesQuery(since: sequence, limit: 1000, includeBodies: true))
                guard let last = changes.last else { break }
                try connection.run("BEGIN")
                do {
                    for change in changes {
                        try remove(change.id.rawValue)
                        guard !change.isDeleted, !change.id.isDesign, let body = change.body,
                              case .object(var object) = try JSONValue.parse(body) else { continue }
                        object["_id"] = JSONValue(change.id.rawValue)
                        object["_rev"] = JSONValue(change.winner.description)
                        let document = JSONValue.object(object)
                        if let selector = definition.partialSelector, !selector.matches(document) { continue }
                        let text = Self.text(of: document, definition)
                        try connection.run("INSERT INTO docs (text) VALUES (?)", [.text(text)])
                        let row = try connection.scalarInt("SELECT last_insert_rowid()") ?? 0
                        try connection.run("INSERT INTO ids (doc_id, row) VALUES (?, ?)", [.text(change.id.rawValue), .int(row)])
                    }
                    try connection.run("INSERT OR REPLACE INTO meta (name, value) VALUES ('update_seq', ?)",
                                       [.text(String(last.sequence))])
                    try connection.run("COMMIT")
                } catch {
                    try? connection.run("ROLLBACK")
                    throw error
                }
                sequence = last.sequence
            }
        }
    }

    private func remove(_ id: String) throws {
        guard let row = try connection.scalarInt("SELECT row FROM ids WHERE doc_id = ?", [.text(id)]) else { return }
        try connection.run("DELETE FROM docs WHERE rowid = ?", [.int(row)])
        try connection.run("DELETE FROM ids WHERE doc_id = ?", [.text(id)])
    }

    /// Document IDs matching `query` (every indexed document when nil), best first.
    func search(_ query: String?, offset: Int, limit: Int) throws -> [String] {
        try lock.withLock {
            var ids: [String] = []
            guard let query else {
                try connection.query("SELECT doc_id FROM ids ORDER BY doc_id LIMIT ? OFFSET ?", [.int(limit), .int(offset)]) {
                    ids.append($0.text(0))
                }
                return ids
            }
            guard let match = MangoTextQuery.fts5(query) else { return [] }
            try connection.query(
                "SELECT ids.doc_id FROM docs JOIN ids ON ids.row = docs.rowid WHERE docs MATCH ? ORDER BY docs.rank, docs.rowid LIMIT ? OFFSET ?",
                [.text(match), .int(limit), .int(offset)]
            ) { ids.append($0.text(0)) }
            return ids
        }
    }

    /// The text `$text` searches in a document: the strings of the indexed fields (of every
    /// field not starting with `_` for an index of all fields), numbers and booleans as words.
    static func text(of document: JSONValue, _ definition: MangoTextDefinition) -> String {
        var parts: [String] = []
        func collect(_ value: JSONValue) {
            switch value {
            case .string(let s): parts.append(s)
            case .number(let n): parts.append(n.text)
            case .bool(let b): parts.append(b ? "true" : "false")
            case .array(let items): items.forEach(collect)
            case .object(let object): object.members.forEach { collect($0.value) }
            case .null: break
            }
        }
        if let fields = definition.fields {
            for field in fields {
                guard let path = try? MangoCollation.parseField(field.name),
                      let value = MangoCollation.field(document, path) else { continue }
                collect(value)
            }
        } else if case .object(let object) = document {
            for member in object.members where !member.key.hasBytePrefix("_") { collect(member.value) }
        }
        return parts.joined(separator: "\n")
    }
}

/// Lucene's query syntax, as far as FTS5 can follow it: words (any one may match; more
/// matches rank higher), `"phrases"`, `+required`, `-excluded`, `prefix*`, `field:word`
/// (searched in every indexed field). Each word becomes a quoted FTS5 string, so nothing
/// in the query can be read as FTS5 syntax.
enum MangoTextQuery {
    static func fts5(_ query: String) -> String? {
        var required: [String] = [], optional: [String] = [], excluded: [String] = []
        var scalars = Array(query.unicodeScalars)[...]
        while let first = scalars.first {
            if first.properties.isWhitespace {
                scalars = scalars.dropFirst()
                continue
            }
            var sign: Character?
            if first == "+" || first == "-" {
                sign = Character(first)
                scalars = scalars.dropFirst()
            }
            var term = ""
            var phrase = false
            if scalars.first == "\"" {
                scalars = scalars.dropFirst()
                let end = scalars.firstIndex(of: "\"") ?? scalars.endIndex
                term = String(String.UnicodeScalarView(scalars[..<end]))
                scalars = end < scalars.endIndex ? scalars[(end + 1)...] : scalars[end...]
                phrase = true
            } else {
                let end = scalars.firstIndex { $0.properties.isWhitespace } ?? scalars.endIndex
                term = String(String.UnicodeScalarView(scalars[..<end]))
                scalars = scalars[end...]
                if let colon = term.firstIndex(of: ":"), colon != term.startIndex { term = String(term[term.index(after: colon)...]) }
            }
            let prefix = !phrase && term.hasSuffix("*")
            if prefix { term.removeLast() }
            let words = term.unicodeScalars.split { !($0.properties.isAlphabetic || $0.properties.numericType != nil) }
                .map { String(String.UnicodeScalarView($0)) }
            guard !words.isEmpty else { continue }
            var expression = "\"" + words.joined(separator: " ") + "\""
            if prefix { expression += " *" }
            switch sign {
            case "+": required.append(expression)
            case "-": excluded.append(expression)
            default: optional.append(expression)
            }
        }
        var positive: String
        if !required.isEmpty {
            positive = required.joined(separator: " AND ")
        } else if !optional.isEmpty {
            positive = optional.joined(separator: " OR ")
        } else {
            return nil
        }
        positive = "(" + positive + ")"
        for term in excluded { positive += " NOT " + term }
        return positive
    }
}
