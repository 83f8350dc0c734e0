import CouchCore
import Foundation

/// `mango_execution_stats`.
public struct MangoExecutionStats: Sendable {
    public var keysExamined = 0
    public var docsExamined = 0
    public var resultsReturned = 0
    public var milliseconds = 0.0

    var json: JSONValue {
        .object(JSONObject([
            (key: "total_keys_examined", value: JSONValue(keysExamined)),
            (key: "total_docs_examined", value: JSONValue(docsExamined)),
            (key: "total_quorum_docs_examined", value: 0),
            (key: "results_returned", value: JSONValue(resultsReturned)),
            (key: "execution_time_ms", value: .number(JSONNumber(text: String(format: "%.3f", milliseconds)))),
        ]))
    }
}

/// A `_find` answer, written as CouchDB writes it (`mango_httpd`'s chunks).
public struct MangoFindResult: Sendable {
    public var documents: [JSONValue] = []
    public var bookmark = "nil"
    public var stats = MangoExecutionStats()
    public var includeStats = false
    public var warnings: [String] = []

    public var body: [UInt8] {
        var out = Array(#"{"docs":["#.utf8)
        for (i, document) in documents.enumerated() {
            out.append(contentsOf: (i == 0 ? "\r\n" : ",\r\n").utf8)
            document.write(to: &out)
        }
        out.append(contentsOf: "\r\n]".utf8)
        var extras: [(String, JSONValue)] = [("bookmark", JSONValue(bookmark))]
        if includeStats { extras.append(("execution_stats", stats.json)) }
        if !warnings.isEmpty { extras.append(("warning", JSONValue(warnings.joined(separator: "\n")))) }
        for (key, value) in extras {
            out.append(contentsOf: ",\r\n".utf8)
            JSONWriter.appendString(key, to: &out)
            out.append(contentsOf: ": ".utf8)
            value.write(to: &out)
        }
        out.append(contentsOf: "}\r\n".utf8)
        return out
    }
}

/// Runs `_find` and `_explain` over a database's indexes.
public struct MangoQuery: Sendable {
    public let options: MangoFindOptions
    public let indexes: [MangoIndex]
    public let plan: MangoPlan

    /// Plans the query; CouchDB's errors when no index can serve it.
    public init(_ options: MangoFindOptions, indexes: [MangoIndex]) throws(CouchError) {
        self.options = options
        self.indexes = indexes
        plan = try MangoPlanner.plan(options, indexes: indexes)
    }

    /// Documents to read at once from an index or `_all_docs`.
    static let batch = 200

    public func find(source: MangoDocumentSource, reader: MangoIndexReader,
                     text: MangoTextSearcher? = nil) throws -> MangoFindResult {
        let started = DispatchTime.now().uptimeNanoseconds
        var run = Run(options: options)
        switch plan.index.kind {
        case .special: try scanAllDocs(source, &run)
        case .json: try scanIndex(source, reader, &run)
        case .text:
            guard let text else { throw CouchError(.serviceUnavailable, "text", name: "required index service unavailable") }
            try text.search(plan.index, options: options, source: source, run: &run)
        }
        var result = MangoFindResult()
        result.documents = run.documents
        result.bookmark = run.bookmark.map(MangoBookmark.encode) ?? "nil"
        result.stats = run.stats
        result.stats.resultsReturned = run.documents.count
        result.stats.milliseconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1_000_000
        result.includeStats = options.executionStats
        result.warnings = warnings(stats: result.stats)
        return result
    }

    /// `mango_cursor:maybe_add_warning`.
    func warnings(stats: MangoExecutionStats) -> [String] {
        var warnings: [String] = []
        if plan.useIndexIgnored, let design = options.useIndex.first {
            let name = design.droppingBytePrefix("_design/")
            if options.useIndex.count == 2 {
                warnings.append("_design/\(name), \(options.useIndex[1]) was not used because it is not a valid index for this query.")
            } else {
                warnings.append("_design/\(name) was not used because it does not contain a valid index for this query.")
            }
        }
        if plan.index.kind == .special {
            warnings.append("No matching index found, create an index to optimize query time.")
        }
        let ratio = stats.resultsReturned == 0 ? Double(stats.docsExamined) : Double(stats.docsExamined) / Double(stats.resultsReturned)
        if ratio > 10 {
            warnings.append("The number of documents examined is high in proportion to the number of results returned. Consider adding a more specific index to improve this.")
        }
        return warnings
    }

    /// The state of one execution: skip and limit left, the rows returned, the bookmark.
    public struct Run: Sendable {
        let selector: MangoSelector
        let fields: MangoFields
        var skip: Int
        var limit: Int
        var documents: [JSONValue] = []
        var stats = MangoExecutionStats()
        var bookmark: JSONValue?
        let after: JSONValue?

        init(options: MangoFindOptions) {
            selector = options.selector
            fields = options.fields
            skip = options.skip
            limit = options.limit
            after = options.bookmark.flatMap(MangoBookmark.decode)
        }

        var isDone: Bool { limit <= 0 }

        /// Offers a document read at `position` (the bookmark that resumes after it).
        /// Answers false once the limit is reached.
        public mutating func offer(_ document: MangoDocument, position: JSONValue) -> Bool {
            stats.docsExamined += 1
            guard selector.matches(document.json) else { return !isDone }
            bookmark = position
            if skip > 0 {
                skip -= 1
                return true
            }
            documents.append(fields.extract(document.json))
            limit -= 1
            return !isDone
        }

        public mutating func keysExamined(_ count: Int) { stats.keysExamined += count }
        public var resumeAfter: JSONValue? { after }
        public var remaining: Int { limit }
    }

    // MARK: _all_docs

    private func scanAllDocs(_ source: MangoDocumentSource, _ run: inout Run) throws {
        guard !plan.keyRanges.isEmpty, !run.isDone, case .ranges(let list)? = plan.prefix.first,
              let range = plan.prefix.first?.hull ?? list.first else { return }
        // Document IDs are strings: a bound before every string is no bound, one after all is none.
        func bound(_ b: MangoBound, low: Bool) -> (String?, emptyResult: Bool) {
            switch b {
            case .min: return (nil, !low)
            case .max: return (nil, low)
            case .value(.string(let s)): return (s, false)
            case .value(.array), .value(.object): return (nil, low)
            case .value: return (nil, !low)
            }
        }
        let (low, lowEmpty) = bound(range.low, low: true)
        let (high, highEmpty) = bound(range.high, low: false)
        if lowEmpty || highEmpty { return }
        let descending = options.sort.descending
        var after = run.resumeAfter?.arrayValue?.last?.stringValue
        while !run.isDone {
            let page = try source.scan(start: descending ? high : low, end: descending ? low : high, after: after,
                                       descending: descending, limit: Self.batch)
            run.keysExamined(page.rowsRead)
            for document in page.documents where !run.offer(document, position: [JSONValue(document.id), JSONValue(document.id)]) {
                return
            }
            guard let last = page.lastID else { return }
            after = last
        }
    }

    // MARK: JSON indexes

    private func scanIndex(_ source: MangoDocumentSource, _ reader: MangoIndexReader, _ run: inout Run) throws {
        let descending = options.sort.descending
        let ranges = descending ? plan.keyRanges.reversed() : plan.keyRanges
        var resume: MangoIndexRow?
        if let after = run.resumeAfter?.arrayValue, after.count == 2, let key = after[0].arrayValue,
           let id = after[1].stringValue {
            resume = MangoIndexRow(key: key, id: id)
        }
        // The index is brought up to date once, before its first rows are read.
        var update = options.update
        for range in ranges where !run.isDone {
            var after = resume
            while !run.isDone {
                let rows = try reader.rows(plan.index, in: range, descending: descending, after: after, limit: Self.batch,
                                           partition: plan.index.partitioned ? options.partition : nil,
                                           update: update, source: source)
                update = false
                run.keysExamined(rows.count)
                guard let last = rows.last else { break }
                let documents = try source.documents(rows.map(\.id))
                for (row, document) in zip(rows, documents) {
                    guard let document else { continue }
                    if !run.offer(document, position: [.array(row.key), JSONValue(row.id)]) { return }
                }
                after = last
                if rows.count < Self.batch { break }
            }
        }
    }

    // MARK: _explain

    /// `mango_cursor:explain`.
    public func explain(database: String) -> JSONValue {
        let index = plan.index
        var mrargs: [JSONObject.Member] = [
            (key: "include_docs", value: true),
            (key: "view_type", value: "map"),
            (key: "reduce", value: false),
            (key: "partition", value: options.partition.isEmpty ? .null : JSONValue(options.partition)),
        ]
        func show(_ bound: MangoBound) -> JSONValue {
            switch bound {
            case .min: return .null
            case .max: return "<MAX>"
            case .value(let v): return v
            }
        }
        var start: JSONValue = .null, end: JSONValue = .null
        if index.kind == .special {
            if let range = plan.prefix.first?.hull, !plan.keyRanges.isEmpty {
                start = show(range.low)
                end = show(range.high)
            }
        } else if let first = plan.keyRanges.first, let last = plan.keyRanges.last {
            start = .array(first.start.map(show))
            end = .array(last.end.map(show))
        }
        let descending = options.sort.descending
        mrargs.append((key: "start_key", value: descending ? end : start))
        mrargs.append((key: "end_key", value: descending ? start : end))
        mrargs.append((key: "direction", value: descending ? "rev" : "fwd"))
        mrargs.append((key: "stable", value: .bool(options.stable)))
        mrargs.append((key: "update", value: .bool(options.update)))
        mrargs.append((key: "conflicts", value: options.conflicts ? true : "undefined"))
        let required = MangoPlanner.requiredFields(options)
        var members: [JSONObject.Member] = [
            (key: "dbname", value: JSONValue(database)),
            (key: "index", value: index.json),
            (key: "partitioned", value: .bool(index.partitioned)),
            (key: "selector", value: options.selector.normalized),
            (key: "opts", value: options.explainJSON),
            (key: "limit", value: JSONValue(options.limit)),
            (key: "skip", value: JSONValue(options.skip)),
            (key: "fields", value: options.fields.json),
            (key: "index_candidates", value: .array(plan.candidates)),
            (key: "selector_hints", value: .array([selectorHints])),
        ]
        if index.kind != .text {
            members.append((key: "mrargs", value: .object(JSONObject(mrargs))))
            members.append((key: "covering", value: .bool(MangoPlanner.covers(index, fields: required))))
        } else {
            // As `mango_cursor_text:explain`, with the FTS5 expression as the query.
            let text = (try? DatabaseTextSearcher.textQuery(options.selector.normalized)) ?? nil
            members.append((key: "query", value: text.flatMap(MangoTextQuery.fts5).map { JSONValue($0) } ?? .null))
            members.append((key: "partition", value: .null))
            members.append((key: "sort", value: "relevance"))
        }
        if plan.keyRanges.count > 1 {
            // Couchette's: the key ranges a `$in` was expanded into.
            members.append((key: "ranges", value: .array(plan.keyRanges.map { range in
                .object(JSONObject([(key: "start_key", value: .array(range.start.map(show))),
                                    (key: "end_key", value: .array(range.end.map(show)))]))
            })))
        }
        return .object(JSONObject(members))
    }

    private var selectorHints: JSONValue {
        let selector = options.selector.normalized
        let sortedUnique: ([String]) -> [String] = { Array(Set($0)).sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) } }
        let indexable = sortedUnique(MangoRangeAnalysis.indexableFields(selector))
        let all = sortedUnique(MangoRangeAnalysis.fields(selector))
        return .object(JSONObject([
            (key: "type", value: "json"),
            (key: "indexable_fields", value: .array(indexable.map { JSONValue($0) })),
            (key: "unindexable_fields", value: .array(all.filter { !indexable.contains($0) }.map { JSONValue($0) })),
        ]))
    }
}

/// Bookmarks: opaque to clients, base64url of `[key, id]` of the last row returned.
enum MangoBookmark {
    static func encode(_ position: JSONValue) -> String {
        let standard = Base64.encode(position.serialized())
        return String(standard.compactMap { c -> Character? in c == "+" ? "-" : c == "/" ? "_" : c == "=" ? nil : c })
    }

    static func decode(_ text: String) -> JSONValue? {
        var standard = String(text.map { c -> Character in c == "-" ? "+" : c == "_" ? "/" : c })
        while standard.utf8.count % 4 != 0 { standard += "=" }
        guard let bytes = Base64.decode(standard), let value = try? JSONValue.parse(bytes),
              case .array(let parts) = value, parts.count == 2 else { return nil }
        return value
    }

    /// Refuses a bookmark that is not one of ours, as CouchDB does.
    static func validate(_ text: String?) throws(CouchError) {
        guard let text, decode(text) == nil else { return }
        throw MangoErrors.named("invalid_bookmark", "Invalid bookmark value: \(MangoErrors.text(JSONValue(text)))")
    }
}

/// Answers `$text` queries from a text index (Couchette's, on SQLite FTS5).
public protocol MangoTextSearcher: Sendable {
    func search(_ index: MangoIndex, options: MangoFindOptions, source: MangoDocumentSource,
                run: inout MangoQuery.Run) throws
}
