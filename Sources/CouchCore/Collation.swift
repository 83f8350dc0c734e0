import CCollation

/// CouchDB's view collation (`couch_ejson_compare`): null < false < true < numbers < strings
/// < arrays < objects. Numbers compare by value (1 == 1.0); strings by ICU's root collator
/// (the Unicode Collation Algorithm, as CouchDB's NIF compares them, not by code point);
/// arrays element by element, a shorter prefix first; objects member by member, key then
/// value, fewer members first.
///
/// `sortKey` encodes a value into bytes whose plain byte order (memcmp, SQLite's BLOB
/// order) is this collation, so an index can keep keys in a B-tree and scan ranges without
/// calling back into Swift:
///
///     null 0x01 · false 0x02 · true 0x03 · number 0x04 + 8 bytes (IEEE 754, sign-flipped, big-endian)
///     string 0x05 + ICU sort key (ends with its one 0x00) · array 0x06 + elements + 0x00
///     object 0x07 + (key as a string + value)... + 0x00
///
/// The 0x00 closing an array or object sorts before any element's tag, so a prefix comes
/// first; an ICU sort key holds no 0x00 before its end, so a string never runs into what
/// follows it.
public enum Collation {
    /// -1, 0 or 1.
    public static func compare(_ a: JSONValue, _ b: JSONValue) -> Int {
        let (rankA, rankB) = (rank(a), rank(b))
        if rankA != rankB { return rankA < rankB ? -1 : 1 }
        switch (a, b) {
        case let (.number(x), .number(y)):
            let (u, v) = (x.doubleValue, y.doubleValue)
            return u < v ? -1 : (u > v ? 1 : 0)
        case let (.string(x), .string(y)):
            return compareStrings(x, y)
        case let (.array(x), .array(y)):
            for (u, v) in zip(x, y) {
                let order = compare(u, v)
                if order != 0 { return order }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        case let (.object(x), .object(y)):
            for (u, v) in zip(x.members, y.members) {
                let keyOrder = compareStrings(u.key, v.key)
                if keyOrder != 0 { return keyOrder }
                let valueOrder = compare(u.value, v.value)
                if valueOrder != 0 { return valueOrder }
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        default:
            return 0   // null/null, or booleans of the same rank
        }
    }

    /// Two strings as ICU's root collator orders them (-1, 0, 1).
    public static func compareStrings(_ a: String, _ b: String) -> Int {
        if _utf8Equal(a, b) { return 0 }
        var a = a, b = b
        let result = a.withUTF8 { x in
            b.withUTF8 { y in
                x.withMemoryRebound(to: CChar.self) { x in
                    y.withMemoryRebound(to: CChar.self) { y in
                        couchette_collate_utf8(Collator.shared.pointer, x.baseAddress, Int32(clamping: x.count),
                                               y.baseAddress, Int32(clamping: y.count))
                    }
                }
            }
        }
        // ICU failing (it does not on valid UTF-8) falls back to code point order.
        return result == 2 ? _utf8Compare(a, b).signum() : Int(result)
    }

    /// Bytes that order as `compare` orders values (see the type's notes).
    public static func sortKey(_ value: JSONValue) -> [UInt8] {
        var key: [UInt8] = []
        appendSortKey(value, to: &key)
        return key
    }

    public static func appendSortKey(_ value: JSONValue, to key: inout [UInt8]) {
        switch value {
        case .null: key.append(0x01)
        case .bool(let flag): key.append(flag ? 0x03 : 0x02)
        case .number(let number):
            key.append(0x04)
            var double = number.doubleValue
            if double == 0 || double.isNaN { double = 0 }   // -0 sorts with 0
            let bits = double.bitPattern
            let ordered = bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
            for shift in stride(from: 56, through: 0, by: -8) { key.append(UInt8(truncatingIfNeeded: ordered >> UInt64(shift))) }
        case .string(let string):
            key.append(0x05)
            appendStringKey(string, to: &key)
        case .array(let items):
            key.append(0x06)
            for item in items { appendSortKey(item, to: &key) }
            key.append(0x00)
        case .object(let object):
            key.append(0x07)
            for member in object.members {
                key.append(0x05)
                appendStringKey(member.key, to: &key)
                appendSortKey(member.value, to: &key)
            }
            key.append(0x00)
        }
    }

    /// The sort key of the smallest value of a type rank above every value: a bound for
    /// "everything" in range scans (no JSON value's key starts with 0xFF).
    public static let greatestKey: [UInt8] = [0xFF]

    /// The root collator's version as CouchDB writes it ("153.112": ICU's four numbers,
    /// trailing zeros dropped), what a view's `_info` lists in `collator_versions`.
    public static var collatorVersion: String {
        var version: [UInt8] = [0, 0, 0, 0]
        couchette_collator_version(Collator.shared.pointer, &version)
        while version.count > 1, version.last == 0 { version.removeLast() }
        return version.map(String.init).joined(separator: ".")
    }

    /// The version of ICU that orders strings (for `_node/_local/_versions`).
    public static var icuVersion: String { String(cString: couchette_icu_version()) }

    private static func rank(_ value: JSONValue) -> Int {
        switch value {
        case .null: 0
        case .bool(let flag): flag ? 2 : 1
        case .number: 3
        case .string: 4
        case .array: 5
        case .object: 6
        }
    }

    private static func appendStringKey(_ string: String, to key: inout [UInt8]) {
        let text = Array(string.utf16)
        let collator = Collator.shared.pointer
        var capacity = max(32, text.count * 4 + 16)
        while true {
            var buffer = [UInt8](repeating: 0, count: capacity)
            let length = text.withUnsafeBufferPointer { text in
                couchette_sort_key(collator, text.baseAddress, Int32(clamping: text.count), &buffer, Int32(clamping: capacity))
            }
            if length <= 0 {
                // No key (ICU failed): code points, escaped so no 0x00 appears inside, then the end.
                for byte in string.utf8 { key.append(max(byte, 1)) }
                key.append(0)
                return
            }
            if Int(length) <= capacity {
                key.append(contentsOf: buffer[..<Int(length)])
                return
            }
            capacity = Int(length)
        }
    }
}

/// The one root collator. ICU's comparison and sort-key functions only read it, and are
/// safe to call from several threads at once.
private final class Collator: @unchecked Sendable {
    let pointer: UnsafeRawPointer

    static let shared = Collator()

    private init() {
        guard let pointer = couchette_collator_open() else {
            fatalError("ICU's root collator cannot be opened: is libicu's data installed?")
        }
        self.pointer = pointer
    }
}
