// CouchDB Mango selectors (`_find`, `_changes?filter=_selector`), following Apache CouchDB 3.x
// src/mango/src/mango_selector.erl: a selector is validated and normalised once (norm_ops,
// norm_fields, norm_negations, exactly as CouchDB does them, because normalisation changes
// results: `{"$not": {"a": 1}}` becomes `{"a": {"$ne": 1}}`, which does not match a document
// without "a"), then compiled into a tree that `matches(_:)` evaluates.
//
// Deviations from CouchDB, on purpose:
// - `$regex` runs on RE2 (linear time) instead of PCRE: patterns RE2 does not offer
//   (backreferences, lookaround, possessive quantifiers, `\Z`) are refused as invalid.
// - `$mod` with a divisor of 0 is rejected at validation; CouchDB accepts it and then fails at
//   match time. `$mod`/`$size` arguments must fit in `Int`.
// - A `$nor` left inside `$elemMatch`/`$allMatch`/`$keyMapMatch` under a field (CouchDB does not
//   normalise there, and then errors with "Invalid operator: $nor" while matching) is evaluated
//   as "none of these match".
// - Invalid field paths ("a..b", "a.") are rejected at validation ("Invalid field name: a..b")
//   instead of failing while matching.
// - Duplicate keys in a selector object: the JSON parser keeps only the last one (CouchDB keeps
//   all and ANDs them).
// - Error texts render arguments as JSON rather than Erlang terms.

/// A selector that failed validation. `reason` reads like CouchDB's, e.g. "Invalid operator: $foo".
public struct MangoSelectorError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    public init(reason: String) { self.reason = reason }
    public var description: String { reason }
}

public struct MangoSelector: Sendable {
    let root: _MangoNode
    /// The selector after CouchDB's normalisation (what `_explain` shows); `{}` for the empty selector.
    public let normalized: JSONValue

    /// Validates and normalises `selector` once.
    public init(_ selector: JSONValue) throws(MangoSelectorError) {
        guard case .object(let object) = selector else {
            throw MangoSelectorError(reason: "Selector must be a JSON object")
        }
        if object.isEmpty {  // the empty selector matches everything
            root = .always
            normalized = .object(JSONObject())
            return
        }
        let ops = try _MangoSel.normOps(selector)
        let fields = try _MangoSel.normFields(ops, path: "")
        let negated = try _MangoSel.normNegations(fields)
        if case .field(let name, _) = negated, name.isEmpty {
            throw MangoSelectorError(reason: "One or more conditions is missing a field name.")
        }
        normalized = negated.json
        root = try negated.compile()
    }

    /// Whether `document` (the full document object, including `_id`, `_rev`, `_deleted`...) matches.
    public func matches(_ document: JSONValue) -> Bool {
        root.matches(document, raw: false)
    }
}

// MARK: - Normalisation (mango_selector.erl's norm_ops, norm_fields, norm_negations)

/// A terminal condition operator.
enum _MangoOp: Sendable {
    case lt(JSONValue), lte(JSONValue), eq(JSONValue), ne(JSONValue), gte(JSONValue), gt(JSONValue)
    case `in`([JSONValue]), nin([JSONValue])
    case exists(Bool)
    case type(String)
    case mod(divisor: Int, remainder: Int)
    case regex(MangoRegex)
    case size(Int)
    case all([JSONValue])
    case beginsWith(String)

    var json: JSONValue {
        func op(_ name: String, _ arg: JSONValue) -> JSONValue { .object(JSONObject([(key: name, value: arg)])) }
        switch self {
        case .lt(let v): return op("$lt", v)
        case .lte(let v): return op("$lte", v)
        case .eq(let v): return op("$eq", v)
        case .ne(let v): return op("$ne", v)
        case .gte(let v): return op("$gte", v)
        case .gt(let v): return op("$gt", v)
        case .in(let vs): return op("$in", .array(vs))
        case .nin(let vs): return op("$nin", .array(vs))
        case .exists(let b): return op("$exists", .bool(b))
        case .type(let t): return op("$type", .string(t))
        case .mod(let d, let r): return op("$mod", [JSONValue(d), JSONValue(r)])
        case .regex(let r): return op("$regex", .string(r.pattern))
        case .size(let n): return op("$size", JSONValue(n))
        case .all(let vs): return op("$all", .array(vs))
        case .beginsWith(let p): return op("$beginsWith", .string(p))
        }
    }
}

/// A selector in CouchDB's shapes, between the normalisation steps.
indirect enum _MangoSel: Sendable {
    case and([_MangoSel])
    case or([_MangoSel])
    case nor([_MangoSel])
    case not(_MangoSel)
    case field(String, _MangoSel)
    case elemMatch(_MangoSel)
    case allMatch(_MangoSel)
    case keyMapMatch(_MangoSel)
    case op(_MangoOp)
    /// `{"$default": arg}`, what `$text` normalises to; only valid at the root as `{"$default": {"$text": x}}`.
    case textDefault(JSONValue)

    var json: JSONValue {
        func single(_ key: String, _ value: JSONValue) -> JSONValue { .object(JSONObject([(key: key, value: value)])) }
        switch self {
        case .and(let args): return single("$and", .array(args.map(\.json)))
        case .or(let args): return single("$or", .array(args.map(\.json)))
        case .nor(let args): return single("$nor", .array(args.map(\.json)))
        case .not(let arg): return single("$not", arg.json)
        case .field(let name, let cond): return single(name, cond.json)
        case .elemMatch(let arg): return single("$elemMatch", arg.json)
        case .allMatch(let arg): return single("$allMatch", arg.json)
        case .keyMapMatch(let arg): return single("$keyMapMatch", arg.json)
        case .op(let op): return op.json
        case .textDefault(let arg): return single("$default", arg)
        }
    }

    static func badArg(_ op: String, _ arg: JSONValue) -> MangoSelectorError {
        MangoSelectorError(reason: "Bad argument for operator \(op): \(arg.serializedString())")
    }

    private static func integer(_ value: JSONValue) -> Int? {
        guard case .number(let n) = value, n.isIntegerLiteral else { return nil }
        return n.intValue
    }

    /// norm_ops: validates operators and makes implicit `$eq` and `$and` explicit.
    static func normOps(_ value: JSONValue) throws(MangoSelectorError) -> _MangoSel {
        guard case .object(let object) = value, !object.isEmpty else {
            return .op(.eq(value))  // a bare value (or {}) means equality
        }
        if object.count > 1 {  // implicit $and
            var parts: [_MangoSel] = []
            parts.reserveCapacity(object.count)
            for member in object { parts.append(try normOp(member.key, member.value)) }
            return .and(parts)
        }
        let member = object.members[0]
        return try normOp(member.key, member.value)
    }

    private static func normList(_ op: String, _ arg: JSONValue) throws(MangoSelectorError) -> [_MangoSel] {
        guard case .array(let args) = arg else { throw badArg(op, arg) }
        var result: [_MangoSel] = []
        result.reserveCapacity(args.count)
        for a in args { result.append(try normOps(a)) }
        return result
    }

    private static func normOp(_ key: String, _ arg: JSONValue) throws(MangoSelectorError) -> _MangoSel {
        switch key {
        case "$and": return .and(try normList(key, arg))
        case "$or": return .or(try normList(key, arg))
        case "$nor": return .nor(try normList(key, arg))
        case "$not":
            guard case .object = arg else { throw badArg(key, arg) }
            return .not(try normOps(arg))
        case "$in", "$nin":
            guard case .array(let values) = arg else { throw badArg(key, arg) }
            return .op(key == "$in" ? .in(values) : .nin(values))
        case "$exists":
            guard case .bool(let b) = arg else { throw badArg(key, arg) }
            return .op(.exists(b))
        case "$type":
            guard case .string(let t) = arg else { throw badArg(key, arg) }
            return .op(.type(t))
        case "$mod":
            guard case .array(let values) = arg, values.count == 2,
                  let divisor = integer(values[0]), let remainder = integer(values[1]), divisor != 0
            else { throw badArg(key, arg) }
            return .op(.mod(divisor: divisor, remainder: remainder))
        case "$regex":
            guard case .string(let pattern) = arg, let regex = MangoRegex(pattern) else { throw badArg(key, arg) }
            return .op(.regex(regex))
        case "$all":
            guard case .array(let values) = arg else { throw badArg(key, arg) }
            return .op(.all(values))
        case "$elemMatch", "$allMatch", "$keyMapMatch":
            guard case .object = arg else { throw badArg(key, arg) }
            let sub = try normOps(arg)
            return key == "$elemMatch" ? .elemMatch(sub) : key == "$allMatch" ? .allMatch(sub) : .keyMapMatch(sub)
        case "$size":
            guard let n = integer(arg), n >= 0 else { throw badArg(key, arg) }
            return .op(.size(n))
        case "$text":
            switch arg {
            case .string, .number, .bool: return .textDefault(.object(JSONObject([(key: "$text", value: arg)])))
            default: throw badArg(key, arg)
            }
        case "$beginsWith":
            guard case .string(let prefix) = arg else { throw badArg(key, arg) }
            return .op(.beginsWith(prefix))
        case "$default": return .textDefault(arg)
        case "$lt": return .op(.lt(arg))
        case "$lte": return .op(.lte(arg))
        case "$eq": return .op(.eq(arg))
        case "$ne": return .op(.ne(arg))
        case "$gte": return .op(.gte(arg))
        case "$gt": return .op(.gt(arg))
        case "$where", "$geoWithin", "$geoIntersects", "$near", "$nearSphere":
            throw MangoSelectorError(reason: "Unsupported operator: \(key)")
        default:
            if key.utf8.first == UInt8(ascii: "$") {
                throw MangoSelectorError(reason: "Invalid operator: \(key)")
            }
            return .field(key, try normOps(arg))  // a {Field: Cond} pair
        }
    }

    /// norm_fields: pushes field names down to the conditions, joining nested names with ".".
    static func normFields(_ sel: _MangoSel, path: String) throws(MangoSelectorError) -> _MangoSel {
        switch sel {
        case .and(let args): return .and(try normFieldsList(args, path))
        case .or(let args): return .or(try normFieldsList(args, path))
        case .nor(let args): return .nor(try normFieldsList(args, path))
        case .not(let arg): return .not(try normFields(arg, path: path))
        // Field names inside these are relative to the array element (or key): normalised independently.
        case .elemMatch(let arg): return .field(path, .elemMatch(try normFields(arg, path: "")))
        case .allMatch(let arg): return .field(path, .allMatch(try normFields(arg, path: "")))
        case .keyMapMatch(let arg): return .field(path, .keyMapMatch(try normFields(arg, path: "")))
        case .textDefault(let arg):
            if path.isEmpty, case .object(let o) = arg, o.count == 1, o.members[0].key == "$text" { return sel }
            throw MangoSelectorError(reason: "Invalid field normalization on selector: \(sel.json.serializedString())")
        case .op: return .field(path, sel)
        case .field(let name, let cond): return try normFields(cond, path: path.isEmpty ? name : path + "." + name)
        }
    }

    private static func normFieldsList(_ args: [_MangoSel], _ path: String) throws(MangoSelectorError) -> [_MangoSel] {
        var result: [_MangoSel] = []
        result.reserveCapacity(args.count)
        for a in args { result.append(try normFields(a, path: path)) }
        return result
    }

    /// norm_negations: moves `$not`/`$nor` down to the conditions (De Morgan, operator inversion).
    /// Like CouchDB, it does not look inside `{field: cond}` pairs.
    static func normNegations(_ sel: _MangoSel) throws(MangoSelectorError) -> _MangoSel {
        switch sel {
        case .not(let arg): return try negate(arg)
        case .nor(let args): return .and(try mapSel(args, negate))
        case .and(let args): return .and(try mapSel(args, normNegations))
        case .or(let args): return .or(try mapSel(args, normNegations))
        case .elemMatch(let arg): return .elemMatch(try normNegations(arg))
        case .allMatch(let arg): return .allMatch(try normNegations(arg))
        case .keyMapMatch(let arg): return .keyMapMatch(try normNegations(arg))
        case .field, .op, .textDefault: return sel
        }
    }

    static func negate(_ sel: _MangoSel) throws(MangoSelectorError) -> _MangoSel {
        switch sel {
        case .not(let arg): return try normNegations(arg)
        case .nor(let args): return .or(try mapSel(args, normNegations))
        case .and(let args): return .or(try mapSel(args, negate))
        case .or(let args): return .and(try mapSel(args, negate))
        case .textDefault: throw badArg("$not", sel.json)
        case .op(let op):
            switch op {
            case .lt(let v): return .op(.gte(v))
            case .lte(let v): return .op(.gt(v))
            case .eq(let v): return .op(.ne(v))
            case .ne(let v): return .op(.eq(v))
            case .gte(let v): return .op(.lt(v))
            case .gt(let v): return .op(.lte(v))
            case .in(let vs): return .op(.nin(vs))
            case .nin(let vs): return .op(.in(vs))
            case .exists(let b): return .op(.exists(!b))
            case .type, .mod, .regex, .size, .all, .beginsWith: return .not(sel)
            }
        case .elemMatch, .allMatch, .keyMapMatch: return .not(sel)
        case .field(let name, let cond): return .field(name, try negate(cond))
        }
    }

    private static func mapSel(
        _ args: [_MangoSel], _ transform: (_MangoSel) throws(MangoSelectorError) -> _MangoSel
    ) throws(MangoSelectorError) -> [_MangoSel] {
        var result: [_MangoSel] = []
        result.reserveCapacity(args.count)
        for a in args { result.append(try transform(a)) }
        return result
    }

    // MARK: Compilation

    func compile() throws(MangoSelectorError) -> _MangoNode {
        switch self {
        case .and(let args): return .and(try args.map { a throws(MangoSelectorError) in try a.compile() })
        case .or(let args): return .or(try args.map { a throws(MangoSelectorError) in try a.compile() })
        case .nor(let args): return .nor(try args.map { a throws(MangoSelectorError) in try a.compile() })
        case .not(let arg): return .not(try arg.compile())
        case .elemMatch(let arg): return .elemMatch(try arg.compile())
        case .allMatch(let arg): return .allMatch(try arg.compile())
        case .keyMapMatch(let arg): return .keyMapMatch(try arg.compile())
        case .op(let op): return .op(op)
        case .textDefault: return .always  // only a text index can answer $text; CouchDB trusts it
        case .field(let name, let cond):
            var existsFalse = false
            if case .op(.exists(false)) = cond { existsFalse = true }
            return .field(
                _MangoField(path: try _MangoSel.parseField(name), useRawOrder: name == "_id", missingMatches: existsFalse),
                try cond.compile())
        }
    }

    /// mango_util:parse_field: splits on dots not preceded by a backslash, then drops backslashes
    /// ("a\\.b" is the single key "a.b"). An empty segment ("a..b", ".a", "a.") is invalid.
    /// The empty name "" stands for the value itself (used inside `$elemMatch`).
    static func parseField(_ name: String) throws(MangoSelectorError) -> [String] {
        if name.isEmpty { return [] }
        let bytes = Array(name.utf8)
        var parts: [String] = []
        var start = 0
        var i = 0
        while i <= bytes.count {
            if i == bytes.count || (bytes[i] == UInt8(ascii: ".") && (i == 0 || bytes[i - 1] != UInt8(ascii: "\\"))) {
                let segment = bytes[start..<i]
                if segment.isEmpty { throw MangoSelectorError(reason: "Invalid field name: \(name)") }
                parts.append(String(decoding: segment.filter { $0 != UInt8(ascii: "\\") }, as: UTF8.self))
                start = i + 1
            }
            i += 1
        }
        return parts
    }
}
