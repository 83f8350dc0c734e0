import CouchCore
import CouchStore

/// A range of CouchDB's 32-bit hash ring, written as mem3 writes it: `00000000-7fffffff`.
struct ShardRange: Hashable, Sendable {
    let begin: UInt32
    let end: UInt32

    var name: String { Self.hex(begin) + "-" + Self.hex(end) }

    init(begin: UInt32, end: UInt32) {
        self.begin = begin
        self.end = end
    }

    /// `XXXXXXXX-XXXXXXXX` (hexadecimal), the first below the second; nil otherwise.
    init?(_ text: String) {
        let halves = text.split(separator: "-", omittingEmptySubsequences: false)
        guard text.utf8.count == 17, halves.count == 2, halves.allSatisfy({ $0.utf8.count == 8 }),
              let begin = UInt32(halves[0], radix: 16), let end = UInt32(halves[1], radix: 16), begin < end else { return nil }
        self.init(begin: begin, end: end)
    }

    /// The two halves a split makes (mem3's split in two); nil for a range of one hash.
    var halves: [ShardRange]? {
        guard end > begin else { return nil }
        let size = (UInt64(end) - UInt64(begin) + 1) / 2
        let middle = UInt32(UInt64(begin) + size - 1)
        return [ShardRange(begin: begin, end: middle), ShardRange(begin: middle + 1, end: end)]
    }

    /// The ring cut in `q` ranges, as CouchDB's `mem3_util:make_key_ranges` cuts it (the last
    /// one takes the remainder).
    static func ring(q: Int) -> [ShardRange] {
        let top: UInt64 = 1 << 32
        let increment = top / UInt64(max(1, min(q, 1 << 16)))
        var ranges: [ShardRange] = []
        var start: UInt64 = 0
        while start < top {
            let end = start + 2 * increment > top ? top - 1 : start + increment - 1
            ranges.append(ShardRange(begin: UInt32(start), end: UInt32(end)))
            start = end + 1
        }
        return ranges
    }

    private static func hex(_ value: UInt32) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: 8 - text.count) + text
    }
}

/// A database's shard map as CouchDB shows it. Couchette keeps a database in one file, so
/// the map is a description only: the ranges of `q` (`PUT /db?q=`), or those splits
/// (`_reshard`) left, kept with `q` in the database's cluster parameters.
enum ShardMap {
    static func ranges(of database: Database) throws -> [ShardRange] {
        let cluster = try database.clusterParameters()
        if let stored = cluster?["ranges"]?.arrayValue {
            let ranges = stored.compactMap { $0.stringValue.flatMap(ShardRange.init) }
            if !ranges.isEmpty { return ranges }
        }
        return ShardRange.ring(q: cluster?["q"]?.intValue ?? 1)
    }

    /// Replaces `range` by its halves; false when the map no longer holds it.
    static func split(_ range: ShardRange, of database: Database) throws -> Bool {
        var ranges = try Self.ranges(of: database)
        guard let index = ranges.firstIndex(of: range), let halves = range.halves else { return false }
        ranges.replaceSubrange(index...index, with: halves)
        var cluster = try database.clusterParameters() ?? JSONObject()
        cluster["ranges"] = .array(ranges.map { JSONValue($0.name) })
        cluster["q"] = JSONValue(ranges.count)   // CouchDB's `q` is the number of ranges
        try database.setClusterParameters(cluster)
        return true
    }

    /// mem3's name of a shard: `shards/00000000-7fffffff/db.1795736167` (creation second).
    static func shardName(_ range: ShardRange, of database: Database) -> String {
        "shards/\(range.name)/\(database.name.rawValue).\((Int(database.instanceStartTime) ?? 0) / 1_000_000)"
    }

    /// The database and range a shard name names (`mem3:dbname`); nil when it is not one.
    static func parse(shardName: String) -> (database: String, range: ShardRange)? {
        let parts = shardName.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "shards", let range = ShardRange(String(parts[1])),
              let dot = parts[2].lastIndex(of: ".") else { return nil }
        return (String(parts[2][..<dot]), range)
    }
}
