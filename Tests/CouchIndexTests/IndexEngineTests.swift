import CouchCore
import CouchFunctions
import CouchIndex
import CouchStore
import CouchTestSupport
import Foundation
import Testing

/// The index engine on a real database file, with a native mapper as Mango's indexes use
/// it: incremental updates, collation order, ranges, restarts.
@Suite struct IndexEngineTests {
    /// Emits `[doc.field]` for documents that have `field`, as a Mango JSON index does.
    struct FieldMapper: DocumentMapper {
        let field: String
        func map(_ documents: [MapInput]) throws(CouchError) -> [[[Emission]]] {
            documents.map { input in
                guard let value = (try? JSONValue.parse(input.json))?[field] else { return [[]] }
                return [[Emission(key: .array([value]), value: .null)]]
            }
        }
    }

    private func write(_ database: Database, _ id: String, _ body: String) throws {
        let record = try database.record(DocumentID(id))
        let edit = DocumentEdit(id: DocumentID(id), revision: record?.winner, body: try JSONValue.parse(body).objectValue ?? [:])
        _ = try database.update(edit)
    }

    @Test func nativeMapperIndexesUpdatesIncrementallyAndScansRanges() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(DatabaseName("engine"))
        for (id, name) in [("1", "b"), ("2", "A"), ("3", "a"), ("4", "B")] {
            try write(database, id, #"{"name":"\#(name)"}"#)
        }
        try write(database, "5", #"{"other":1}"#)
        let indexes = IndexManager()
        let definition = IndexDefinition(signature: "by-name", viewNames: ["name"], mapper: FieldMapper(field: "name"))
        let index = try indexes.index(for: definition, in: database)
        try index.update(from: database)
        #expect(index.updateSequence == database.updateSequence)
        #expect(try index.totalRows(view: 0) == 4)
        let all = try index.rows(view: 0, range: ViewRange(), limit: 10)
        #expect(all.map(\.key) == [["a"], ["A"], ["b"], ["B"]].map { JSONValue.array($0.map(JSONValue.string)) })
        #expect(all.map(\.id.rawValue) == ["3", "2", "1", "4"])

        var range = ViewRange()
        range.startKey = ["A"]
        range.endKey = ["b"]
        range.inclusiveEnd = false
        #expect(try index.rows(view: 0, range: range, limit: 10).map(\.id.rawValue) == ["2"])
        range.descending = true
        range.startKey = ["b"]
        range.endKey = ["a"]
        range.inclusiveEnd = true
        #expect(try index.rows(view: 0, range: range, limit: 10).map(\.id.rawValue) == ["1", "2", "3"])
        #expect(try index.offset(view: 0, range: range) == 1)

        // A change moves a row; a deletion removes it; paging continues after a position.
        try write(database, "1", #"{"name":"z"}"#)
        let deleted = try database.record(DocumentID("4"))!.winner
        _ = try database.update(DocumentEdit(id: DocumentID("4"), revision: deleted, isDeleted: true))
        try index.update(from: database)
        let first = try index.rows(view: 0, range: ViewRange(), limit: 2)
        let rest = try index.rows(view: 0, range: ViewRange(), after: first.last!.position, limit: 10)
        #expect((first + rest).map(\.id.rawValue) == ["3", "2", "1"])
        #expect(try index.totalRows(view: 0) == 3)
    }

    @Test func javaScriptViewsMapDocumentsAndSkipOnesThatThrow() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(DatabaseName("js"))
        for number in 1...250 { try write(database, String(format: "d%03d", number), #"{"n":\#(number)}"#) }
        try write(database, "bad", #"{"text":"no n"}"#)
        let design = DesignDocument(id: DocumentID("_design/app"), revision: "1-a", body: try JSONValue.parse(#"""
            {"views": {"by_n": {"map": "function(doc) { if (doc.n === undefined) throw new Error('no n'); emit(doc.n % 10, doc.n); }"},
                       "all": {"map": "function(doc) { emit(doc._id, null); }"}}}
            """#).objectValue!)
        let views = JavaScriptViews(design: design, database: database.name, runtime: FunctionRuntime())
        let index = try IndexManager().index(for: views.definition, in: database)
        try index.update(from: database)
        let byN = try views.view("by_n").index
        // The document that throws in `by_n` is skipped there and still indexed by `all`.
        #expect(try index.totalRows(view: byN) == 250)
        #expect(try index.totalRows(view: try views.view("all").index) == 251)
        let zeros = try index.rows(view: byN, range: .key(0), limit: 100)
        #expect(zeros.map(\.value) == stride(from: 10, through: 250, by: 10).map { JSONValue($0) })
        #expect(throws: CouchError.self) { try views.view("missing") }
    }
}
