// Matching a normalised Mango selector against a document (mango_selector.erl's match/3),
// with CouchDB's value collation (couch_ejson_compare) and Erlang term order for `_id`.

/// A field reference in a compiled selector.
struct _MangoField: Sendable {
    /// Keys / array indices; empty means the value itself.
    let path: [String]
    /// `_id` is compared with Erlang term order (mango_json:cmp_raw), not view collation.
    let useRawOrder: Bool
    /// The condition is exactly `{"$exists": false}`: the only one a missing field satisfies.
    let missingMatches: Bool
}

/// A compiled, normalised selector.
indirect enum _MangoNode: Sendable {
    case always
    case and([_MangoNode])
    case or([_MangoNode])
    case nor([_MangoNode])
    case not(_MangoNode)
    case field(_MangoField, _MangoNode)
    case elemMatch(_MangoNode)
    case allMatch(_MangoNode)
    case keyMapMatch(_MangoNode)
    case op(_MangoOp)

    /// `raw`: compare with Erlang term order (under `_id`) instead of CouchDB collation.
    func matches(_ value: JSONValue, raw: Bool) -> Bool {
        switch self {
        case .always:
            return true
        case .and(let subs):
            for s in subs where !s.matches(value, raw: raw) { return false }
            return true
        case .or(let subs):
            if subs.isEmpty { return true }  // CouchDB: an empty $or is true
            for s in subs where s.matches(value, raw: raw) { return true }
            return false
        case .nor(let subs):
            for s in subs where s.matches(value, raw: raw) { return false }
            return true
        case .not(let sub):
            return !sub.matches(value, raw: raw)
        case .field(let field, let cond):
            if field.path.isEmpty { return cond.matches(value, raw: raw) }
            switch _mangoGetField(value, field.path) {
            case .found(let sub): return cond.matches(sub, raw: raw || field.useRawOrder)
            case .notFound: return field.missingMatches
            case .badPath: return false
            }
        case .elemMatch(let sub):
            guard case .array(let elements) = value else { return false }
            for e in elements where sub.matches(e, raw: raw) { return true }
            return false
        case .allMatch(let sub):
            guard case .array(let elements) = value, !elements.isEmpty else { return false }
            for e in elements where !sub.matches(e, raw: raw) { return false }
            return true
        case .keyMapMatch(let sub):
            guard case .object(let object) = value else { return false }
            for m in object where sub.matches(.string(m.key), raw: raw) { return true }
            return false
        case .op(let op):
            return op.matches(value, raw: raw)
        }
    }
}

extension _MangoOp {
    func matches(_ value: JSONValue, raw: Bool) -> Bool {
        @inline(__always) func cmp(_ a: JSONValue, _ b: JSONValue) -> Int {
            raw ? _erlangCompare(a, b) : _mangoCollate(a, b)
        }
        switch self {
        case .lt(let arg): return cmp(value, arg) < 0
        case .lte(let arg): return cmp(value, arg) <= 0
        case .eq(let arg): return cmp(value, arg) == 0
        case .ne(let arg): return cmp(value, arg) != 0
        case .gte(let arg): return cmp(value, arg) >= 0
        case .gt(let arg): return cmp(value, arg) > 0
        case .in(let args):
            // An array field matches if any of its elements equals any argument.
            if case .array(let elements) = value {
                return args.contains { a in elements.contains { cmp($0, a) == 0 } }
            }
            return args.contains { cmp(value, $0) == 0 }
        case .nin(let args):
            if case .array(let elements) = value {
                return args.allSatisfy { a in elements.allSatisfy { cmp($0, a) != 0 } }
            }
            return args.allSatisfy { cmp(value, $0) != 0 }
        case .exists(let shouldExist):
            return shouldExist  // reached only for a value that exists
        case .type(let name):
            return _mangoTypeName(value) == name
        case .mod(let divisor, let remainder):
            guard case .number(let n) = value, n.isIntegerLiteral, let i = n.intValue else { return false }
            // Erlang `rem` truncates like Swift's `%`; Int.min rem -1 is 0.
            return i.remainderReportingOverflow(dividingBy: divisor).partialValue == remainder
        case .regex(let regex):
            guard case .string(let s) = value else { return false }
            return regex.matches(s)
        case .size(let n):
            guard case .array(let elements) = value else { return false }
            return elements.count == n
        case .all(let args):
            if args.isEmpty { return false }
            // {"$all": [[1,2]]} also matches the array [1,2] itself.
            if args.count == 1, case .array = args[0], _erlangEqual(args[0], value, exact: false) { return true }
            guard case .array(let elements) = value else { return false }
            // lists:member, i.e. exact Erlang term equality (1 and 1.0 differ).
            return args.allSatisfy { a in elements.contains { _erlangEqual($0, a, exact: true) } }
        case .beginsWith(let prefix):
            guard case .string(let s) = value else { return false }
            return s.utf8.starts(with: prefix.utf8)
        }
    }
}

// MARK: - Field lookup (mango_doc:get_field)

enum _MangoLookup {
    case found(JSONValue)
    case notFound
    case badPath
}

func _mangoGetField(_ value: JSONValue, _ path: [String]) -> _MangoLookup {
    var current = value
    for name in path {
        switch current {
        case .object(let object):
            guard let next = object[name] else { return .notFound }
            current = next
        case .array(let elements):
            // The name may be an index into the array (list_to_integer: optional sign, digits).
            guard let i = _erlangListToInteger(name), i >= 0, i < elements.count else { return .badPath }
            current = elements[i]
        default:
            return .badPath
        }
    }
    return .found(current)
}

private func _erlangListToInteger(_ s: String) -> Int? {
    var utf8 = Substring(s).utf8[...]
    var negative = false
    if let first = utf8.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") {
        negative = first == UInt8(ascii: "-")
        utf8 = utf8.dropFirst()
    }
    guard !utf8.isEmpty else { return nil }
    var value = 0
    for b in utf8 {
        guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") else { return nil }
        let (m, o1) = value.multipliedReportingOverflow(by: 10)
        let (a, o2) = m.addingReportingOverflow(Int(b - UInt8(ascii: "0")))
        if o1 || o2 { return Int.max }  // too large to be a valid index anyway
        value = a
    }
    return negative ? -value : value
}

// MARK: - Types and comparison

func _mangoTypeName(_ value: JSONValue) -> String {
    switch value {
    case .null: return "null"
    case .bool: return "boolean"
    case .number: return "number"
    case .string: return "string"
    case .array: return "array"
    case .object: return "object"
    }
}

/// CouchDB's JSON collation (couch_ejson_compare): null < false < true < numbers < strings <
/// arrays < objects; arrays element by element then by length; objects member by member in
/// their order (key, then value), then by size.
///
/// Strings (and member names) compare with ICU's root collator (`Collation`), as CouchDB's
/// and as view and Mango indexes order keys, so an index range and the matcher agree.
func _mangoCollate(_ a: JSONValue, _ b: JSONValue) -> Int {
    let ra = _collationRank(a), rb = _collationRank(b)
    if ra != rb { return ra < rb ? -1 : 1 }
    switch (a, b) {
    case let (.number(x), .number(y)):
        return _compareNumbers(x, y)
    case let (.string(x), .string(y)):
        return Collation.compareStrings(x, y)
    case let (.array(x), .array(y)):
        for i in 0..<Swift.min(x.count, y.count) {
            let c = _mangoCollate(x[i], y[i])
            if c != 0 { return c }
        }
        return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
    case let (.object(x), .object(y)):
        let xm = x.members, ym = y.members
        for i in 0..<Swift.min(xm.count, ym.count) {
            let k = Collation.compareStrings(xm[i].key, ym[i].key)
            if k != 0 { return k }
            let c = _mangoCollate(xm[i].value, ym[i].value)
            if c != 0 { return c }
        }
        return xm.count == ym.count ? 0 : (xm.count < ym.count ? -1 : 1)
    default:
        return 0  // same rank: null/null, false/false, true/true
    }
}

private func _collationRank(_ v: JSONValue) -> Int {
    switch v {
    case .null: return 0
    case .bool(let b): return b ? 2 : 1
    case .number: return 3
    case .string: return 4
    case .array: return 5
    case .object: return 6
    }
}

/// Erlang term order on the decoded JSON (mango_json:cmp_raw, used for `_id`):
/// number < atom (false < null < true) < tuple (object) < list (array) < binary (string).
func _erlangCompare(_ a: JSONValue, _ b: JSONValue) -> Int {
    let ra = _erlangRank(a), rb = _erlangRank(b)
    if ra != rb { return ra < rb ? -1 : 1 }
    switch (a, b) {
    case let (.number(x), .number(y)):
        return _compareNumbers(x, y)
    case let (.string(x), .string(y)):
        return _utf8Compare(x, y)
    case let (.array(x), .array(y)):
        for i in 0..<Swift.min(x.count, y.count) {
            let c = _erlangCompare(x[i], y[i])
            if c != 0 { return c }
        }
        return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
    case let (.object(x), .object(y)):
        // {Props}: a list of {Key, Value} tuples.
        let xm = x.members, ym = y.members
        for i in 0..<Swift.min(xm.count, ym.count) {
            let k = _utf8Compare(xm[i].key, ym[i].key)
            if k != 0 { return k }
            let c = _erlangCompare(xm[i].value, ym[i].value)
            if c != 0 { return c }
        }
        return xm.count == ym.count ? 0 : (xm.count < ym.count ? -1 : 1)
    default:
        return 0
    }
}

private func _erlangRank(_ v: JSONValue) -> Int {
    switch v {
    case .number: return 0
    case .bool(let b): return b ? 3 : 1
    case .null: return 2
    case .object: return 4
    case .array: return 5
    case .string: return 6
    }
}

/// Erlang `=:=` (`exact`: 1 and 1.0 differ) or `==` (numbers compare by value) on decoded JSON.
/// Objects compare member by member in order, as Erlang proplists do.
func _erlangEqual(_ a: JSONValue, _ b: JSONValue, exact: Bool) -> Bool {
    switch (a, b) {
    case (.null, .null): return true
    case let (.bool(x), .bool(y)): return x == y
    case let (.number(x), .number(y)):
        if exact && x.isIntegerLiteral != y.isIntegerLiteral { return false }
        return _compareNumbers(x, y) == 0
    case let (.string(x), .string(y)): return _utf8Equal(x, y)
    case let (.array(x), .array(y)):
        guard x.count == y.count else { return false }
        for i in x.indices where !_erlangEqual(x[i], y[i], exact: exact) { return false }
        return true
    case let (.object(x), .object(y)):
        let xm = x.members, ym = y.members
        guard xm.count == ym.count else { return false }
        for i in xm.indices {
            if !_utf8Equal(xm[i].key, ym[i].key) || !_erlangEqual(xm[i].value, ym[i].value, exact: exact) { return false }
        }
        return true
    default:
        return false
    }
}

/// Numeric comparison: exact for integers of any size, by `Double` otherwise.
func _compareNumbers(_ x: JSONNumber, _ y: JSONNumber) -> Int {
    if x.isIntegerLiteral && y.isIntegerLiteral {
        if let a = x.intValue, let b = y.intValue { return a == b ? 0 : (a < b ? -1 : 1) }
        return _compareIntegerTexts(x.text, y.text)
    }
    let a = x.doubleValue, b = y.doubleValue
    return a < b ? -1 : (a > b ? 1 : 0)
}

/// Compares two integer literals of any length.
private func _compareIntegerTexts(_ x: String, _ y: String) -> Int {
    func split(_ s: String) -> (negative: Bool, digits: [UInt8]) {
        var bytes = Array(s.utf8)
        var negative = false
        if let f = bytes.first, f == UInt8(ascii: "-") || f == UInt8(ascii: "+") {
            negative = f == UInt8(ascii: "-")
            bytes.removeFirst()
        }
        let firstNonZero = bytes.firstIndex { $0 != UInt8(ascii: "0") } ?? bytes.count
        let digits = Array(bytes[firstNonZero...])
        return (digits.isEmpty ? false : negative, digits)
    }
    let a = split(x), b = split(y)
    if a.negative != b.negative { return a.negative ? -1 : 1 }
    var magnitude: Int
    if a.digits.count != b.digits.count {
        magnitude = a.digits.count < b.digits.count ? -1 : 1
    } else if a.digits == b.digits {
        magnitude = 0
    } else {
        magnitude = a.digits.lexicographicallyPrecedes(b.digits) ? -1 : 1
    }
    return a.negative ? -magnitude : magnitude
}

// MARK: - Public comparison entry points (the Mango planner and indexes use the matcher's orders)

public enum MangoCollation {
    /// CouchDB's JSON collation as the selector matcher applies it (see `_mangoCollate`).
    public static func compare(_ a: JSONValue, _ b: JSONValue) -> Int { _mangoCollate(a, b) }

    /// Erlang term order, which the matcher applies under `_id`.
    public static func compareRaw(_ a: JSONValue, _ b: JSONValue) -> Int { _erlangCompare(a, b) }

    /// `mango_doc:get_field`: the value at a parsed path, nil when missing or unreachable.
    public static func field(_ value: JSONValue, _ path: [String]) -> JSONValue? {
        if case .found(let found) = _mangoGetField(value, path) { return found }
        return nil
    }

    /// `mango_util:parse_field`: "a.b" is two keys, "a\\.b" one.
    public static func parseField(_ name: String) throws(MangoSelectorError) -> [String] {
        try _MangoSel.parseField(name)
    }
}
