import CouchCore
import CouchIndex
import CouchStore

/// Mango's JSON indexes on the CouchIndex engine: each index is a one-view index whose
/// native mapper emits `[column values...]` for the documents that have every column and
/// pass the partial filter (`mango_native_proc`), stored, collated and updated like views.
public struct MangoJSONIndexes: MangoIndexReader {
    public let manager: IndexManager
    public let database: Database

    public init(manager: IndexManager, database: Database) {
        self.manager = manager
        self.database = database
    }

    /// What decides the rows: the columns, the partial filter and whether rows are kept per
    /// partition (not the names), so equal indexes share one file.
    public static func definition(_ index: MangoIndex) -> IndexDefinition {
        let summary: JSONValue = .object(JSONObject([
            (key: "mango", value: "json"),
            (key: "fields", value: .array(index.fields.map { JSONValue($0.name) })),
            (key: "partial_filter_selector", value: index.partialFilter ?? .object(JSONObject())),
        ] + (index.partitioned ? [(key: "partitioned", value: JSONValue(true))] : [])))
        return IndexDefinition(signature: Digest.hex(Digest.md5(summary.canonicalBytes)), viewNames: [index.name],
                               mapper: MangoJSONMapper(index: index), partitioned: index.partitioned)
    }

    public func rows(_ index: MangoIndex, in range: MangoKeyRange, descending: Bool, after: MangoIndexRow?, limit: Int,
                     partition: String?, update: Bool, source: MangoDocumentSource) throws -> [MangoIndexRow] {
        let view = try manager.index(for: Self.definition(index), in: database)
        if update { try view.update(from: database) } else if after == nil { manager.updateSoon(view, database: database) }
        var viewRange = ViewRange()
        viewRange.descending = descending
        viewRange.partition = partition
        viewRange.lowSortKey = Self.sortKey(range.start)
        viewRange.highSortKey = Self.sortKey(range.end)
        if let after { viewRange.after = (Collation.sortKey(.array(after.key)), after.id) }
        return try view.rows(view: 0, range: viewRange, limit: limit).map { row in
            MangoIndexRow(key: row.key.arrayValue ?? [], id: row.id.rawValue)
        }
    }

    /// A bound's bytes: an array of the values, ended by the byte above every value (`.max`)
    /// or by the array's end (a prefix sorts before its extensions).
    static func sortKey(_ bound: [MangoBound]) -> [UInt8] {
        var key: [UInt8] = [0x06]
        for part in bound {
            switch part {
            case .min: return key + [0x00]
            case .max: return key + Collation.greatestKey
            case .value(let value): Collation.appendSortKey(value, to: &key)
            }
        }
        return key + [0x00]
    }
}

/// `get_index_entries`: one row per document, its columns' values as the key.
struct MangoJSONMapper: DocumentMapper {
    let index: MangoIndex

    func map(_ documents: [MapInput]) throws(CouchError) -> [[[Emission]]] {
        documents.map { input in
            guard let json = try? JSONValue.parse(input.json),
                  let row = index.row(for: MangoDocument(id: input.id.rawValue, json: json)) else { return [[]] }
            return [[Emission(key: .array(row.key), value: .null)]]
        }
    }
}
