import CouchCore
@testable import CouchIndex
import CouchStore
import CouchTestSupport
import Foundation
import Testing

/// `ReductionTree` on a real index file, with small nodes so that a few thousand rows make a
/// deep tree: after every batch of random insertions, deletions and rewrites, the tree updated
/// node by node is exactly the tree built from the rows, and folds of random ranges and group
/// levels answer what the rows reduce to.
@Suite struct ReductionTreeTests {
    struct Row {
        let key: JSONValue
        let id: String
        let dup: Int
        let value: Int
        var sortKey: [UInt8] { Collation.sortKey(key) }
        var position: [UInt8] { RowPosition.encode(key: sortKey, docID: id, dup: dup) }
    }

    @Test(arguments: [(2, "_count"), (2, "_sum"), (3, "_stats"), (3, "_approx_count_distinct")])
    func updatedTreesEqualRebuiltOnesAndFoldsEqualTheRows(bits: Int, reduce: String) throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let connection = try SQLiteConnection(path: directory + "/index.sqlite", create: true)
        try connection.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;" + ViewIndex.schema)
        let kind: ViewReduction.Kind = switch reduce {
        case "_count": .count
        case "_sum": .sum
        case "_stats": .stats
        default: .distinct(partitioned: false)
        }
        let tree = ReductionTree(view: 0, reduction: ViewReduction(kind: kind), partitioned: false, seed: 7, bitsPerLevel: bits)
        var random = SeededRandom(seed: UInt64(bits * 100 + reduce.count))
        var rows: [[UInt8]: Row] = [:]
        var serial = 0
        func newRow() -> Row {
            serial += 1
            let group = JSONValue(["x", "y", "z"][random.next(3)])
            let key: JSONValue = switch random.next(6) {
            case 0: group
            case 1: .array([group])
            default: .array([group, JSONValue(random.next(40)), JSONValue(random.next(5))])
            }
            return Row(key: key, id: "d\(random.next(serial + 1))", dup: random.next(2), value: random.next(100))
        }

        for round in 0..<12 {
            var removed: [[UInt8]] = []
            var added: [[UInt8]] = []
            try connection.run("BEGIN")
            let operations = round == 0 ? 1000 : 1 + random.next(round % 4 == 0 ? 200 : 20)
            for _ in 0..<operations {
                let positions = Array(rows.keys)
                switch round == 0 || positions.isEmpty ? 0 : random.next(3) {
                case 0:
                    let row = newRow()
                    guard rows[row.position] == nil else { continue }
                    try connection.run("INSERT INTO rows (view, key, doc_id, dup, key_json, value) VALUES (0, ?, ?, ?, ?, ?)",
                                       [.blob(row.sortKey), .text(row.id), .int(row.dup), .blob(row.key.serialized()),
                                        .blob(Array(String(row.value).utf8))])
                    rows[row.position] = row
                    added.append(row.position)
                case 1:
                    // As an index batch does: a row inserted is not deleted again in the same batch.
                    let position = positions[random.next(positions.count)]
                    guard !added.contains(position) else { continue }
                    let row = rows.removeValue(forKey: position)!
                    try connection.run("DELETE FROM rows WHERE view = 0 AND key = ? AND doc_id = ? AND dup = ?",
                                       [.blob(row.sortKey), .text(row.id), .int(row.dup)])
                    removed.append(position)
                default:
                    // The same row written again with another value.
                    let position = positions[random.next(positions.count)]
                    let old = rows[position]!
                    let row = Row(key: old.key, id: old.id, dup: old.dup, value: random.next(100))
                    try connection.run("UPDATE rows SET value = ? WHERE view = 0 AND key = ? AND doc_id = ? AND dup = ?",
                                       [.blob(Array(String(row.value).utf8)), .blob(row.sortKey), .text(row.id), .int(row.dup)])
                    rows[position] = row
                    removed.append(position)
                    added.append(position)
                }
            }
            if round == 0 {
                try tree.rebuild(connection)
            } else {
                try tree.update(connection, removed: removed, added: added)
            }
            try connection.run("COMMIT")

            let updated = try snapshot(connection)
            try tree.rebuild(connection)
            let rebuilt = try snapshot(connection)
            let onlyUpdated = Set(updated).subtracting(rebuilt).sorted()
            let onlyRebuilt = Set(rebuilt).subtracting(updated).sorted()
            #expect(onlyUpdated.isEmpty && onlyRebuilt.isEmpty, "round \(round): updated only \(onlyUpdated.prefix(4)), rebuilt only \(onlyRebuilt.prefix(4))")
            if round == 0 { #expect(updated.contains { $0.hasPrefix("level 2 ") }, "a deep tree") }

            let ordered = rows.values.sorted { $0.position.lexicographicallyPrecedes($1.position) }
            for _ in 0..<6 {
                var bounds = [ordered[random.next(ordered.count)].position, ordered[random.next(ordered.count)].position]
                    .sorted { $0.lexicographicallyPrecedes($1) }
                switch random.next(4) {
                case 0: bounds[0] = []
                case 1: bounds[1] = [0xFF]
                default: break
                }
                let level: Int? = [nil, 0, 1, 2, 3][random.next(5)]
                let descending = random.next(2) == 0
                var folded: [JSONValue] = []
                try tree.fold(connection, lower: bounds[0], upper: bounds[1], descending: descending, groupLevel: level) { group throws(CouchError) in
                    var partials = group.partials
                    if !group.rows.isEmpty { partials += try tree.reduction.reduce([group.rows]) }
                    let value = try tree.reduction.finish(try tree.reduction.combine([partials])[0])
                    folded.append(.array([Self.groupKey(try! JSONValue.parse(group.keyJSON), level), value]))
                    return true
                }
                var covered = ordered.filter { !$0.position.lexicographicallyPrecedes(bounds[0]) && $0.position.lexicographicallyPrecedes(bounds[1]) }
                if descending { covered.reverse() }
                var expected: [(key: JSONValue, rows: [Row])] = []
                for row in covered {
                    let key = Self.groupKey(row.key, level)
                    if let last = expected.last, Collation.compare(last.key, key) == 0 {
                        expected[expected.count - 1].rows.append(row)
                    } else {
                        expected.append((key, [row]))
                    }
                }
                let reference = expected.map { JSONValue.array([$0.key, Self.reduce($0.rows, reduce)]) }
                #expect(folded == reference, "round \(round), level \(String(describing: level)), descending \(descending)")
            }
        }
    }

    private func snapshot(_ connection: SQLiteConnection) throws -> [String] {
        var nodes: [String] = []
        try connection.query("SELECT level, low, count, first, last, first_key, last_key, reduction, failure FROM reductions ORDER BY view, level, low") { row in
            nodes.append("level \(row.int(0)) " + (1...8).map { Digest.hex(row.blob(Int32($0))) }.joined(separator: " "))
        }
        return nodes
    }

    static func groupKey(_ key: JSONValue, _ level: Int?) -> JSONValue {
        guard let level else { return key }
        if level == 0 { return .null }
        if case .array(let items) = key, items.count > level { return .array(Array(items.prefix(level))) }
        return key
    }

    static func reduce(_ rows: [Row], _ reduce: String) -> JSONValue {
        let values = rows.map(\.value)
        switch reduce {
        case "_count": return JSONValue(rows.count)
        case "_sum": return JSONValue(values.reduce(0, +))
        case "_stats":
            return .object(JSONObject([(key: "sum", value: JSONValue(values.reduce(0, +))), (key: "count", value: JSONValue(values.count)),
                                       (key: "min", value: JSONValue(values.min()!)), (key: "max", value: JSONValue(values.max()!)),
                                       (key: "sumsqr", value: JSONValue(values.map { $0 * $0 }.reduce(0, +)))]))
        default:
            var sketch = HyperLogLog()
            for row in rows { sketch.insert(keyJSON: row.key.serialized(), partition: nil) }
            return JSONValue(sketch.cardinality)
        }
    }
}
