/// CouchDB's `"collation": "raw"` view option: keys in Erlang's term order of their decoded
/// JSON instead of `Collation`'s. JSON decodes to numbers < atoms (`false` < `null` < `true`,
/// alphabetically) < tuples (an object is `{[{Key, Value}, ...]}`) < lists (arrays) <
/// binaries (strings); strings compare byte by byte as UTF-8, so "B" < "a"; arrays element by
/// element and objects member by member (key, then value), a prefix first.
///
/// `sortKey` encodes it as `Collation.sortKey` encodes its order, with tags of its own (so
/// the two never mix, and `SortKeyElements` walks both):
///
///     number 0x10 + 8 bytes (as Collation's) · false 0x11 · null 0x12 · true 0x13
///     object 0x14 + (key as a string + value)... + 0x00 · array 0x15 + elements + 0x00
///     string 0x16 + each UTF-8 byte plus one + 0x00
///
/// UTF-8 never holds 0xFE or 0xFF, so a byte plus one is never 0x00 nor wraps, and the 0x00
/// ending a string sorts before any byte of a longer string that shares its start.
public enum RawCollation {
    public static func sortKey(_ value: JSONValue) -> [UInt8] {
        var key: [UInt8] = []
        appendSortKey(value, to: &key)
        return key
    }

    public static func appendSortKey(_ value: JSONValue, to key: inout [UInt8]) {
        switch value {
        case .number:
            // The same eight bytes as Collation's number (numbers compare by value in both).
            var bytes = Collation.sortKey(value)
            bytes[0] = 0x10
            key += bytes
        case .bool(let flag): key.append(flag ? 0x13 : 0x11)
        case .null: key.append(0x12)
        case .object(let object):
            key.append(0x14)
            for member in object.members {
                appendString(member.key, to: &key)
                appendSortKey(member.value, to: &key)
            }
            key.append(0x00)
        case .array(let items):
            key.append(0x15)
            for item in items { appendSortKey(item, to: &key) }
            key.append(0x00)
        case .string(let string):
            appendString(string, to: &key)
        }
    }

    private static func appendString(_ string: String, to key: inout [UInt8]) {
        key.append(0x16)
        for byte in string.utf8 { key.append(byte &+ 1) }
        key.append(0x00)
    }
}
