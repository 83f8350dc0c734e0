import CouchCore

/// One end of a range: a JSON value, or the ends of the collation (`mango_json:min/max`).
public enum MangoBound: Sendable, Equatable {
    case min
    case value(JSONValue)
    case max

    static func compare(_ a: MangoBound, _ b: MangoBound) -> Int {
        switch (a, b) {
        case (.min, .min), (.max, .max): return 0
        case (.min, _), (_, .max): return -1
        case (_, .min), (.max, _): return 1
        case let (.value(x), .value(y)): return MangoCollation.compare(x, y)
        }
    }
}

/// The range a selector allows one field (`mango_idx_view:range`): a low end with `$gt`,
/// `$gte` or `$eq`, a high end with `$lt`, `$lte` or `$eq`.
public struct MangoFieldRange: Sendable, Equatable {
    public var lowOperator: String
    public var low: MangoBound
    public var highOperator: String
    public var high: MangoBound

    static let all = MangoFieldRange(lowOperator: "$gt", low: .min, highOperator: "$lt", high: .max)

    var isPoint: Bool { lowOperator == "$eq" && highOperator == "$eq" }
}

/// What a selector allows a field: nothing, or ranges in collation order (several only
/// for Couchette's `$in`: each value, then every array).
public enum MangoFieldRanges: Sendable, Equatable {
    case empty
    case ranges([MangoFieldRange])

    var hull: MangoFieldRange? {
        guard case .ranges(let list) = self, let first = list.first, let last = list.last else { return nil }
        return MangoFieldRange(lowOperator: first.lowOperator, low: first.low, highOperator: last.highOperator, high: last.high)
    }
}

/// CouchDB's range analysis of a normalised selector (`mango_idx_view:indexable_fields`,
/// `field_ranges`, `range`), with `$in` added as a set of ranges.
enum MangoRangeAnalysis {
    static let rangeOperators: Set<String> = ["$lt", "$lte", "$eq", "$gt", "$gte"]

    /// The selector's member as `(key, value)` when it is a one-member object.
    static func single(_ selector: JSONValue) -> (key: String, value: JSONValue)? {
        guard case .object(let object) = selector, object.count == 1 else { return nil }
        return object.members[0]
    }

    /// Fields a single index scan can narrow: those under (nested) `$and` with a range
    /// operator, or a `$in` of scalars; sorted, without duplicates.
    static func indexableFields(_ selector: JSONValue) -> [String] {
        var found = Set<String>()
        collect(selector, into: &found)
        return found.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    private static func collect(_ selector: JSONValue, into found: inout Set<String>) {
        guard let (key, value) = single(selector) else { return }
        if key == "$and", case .array(let args) = value {
            for arg in args { collect(arg, into: &found) }
            return
        }
        if key.hasPrefix("$") { return }
        if let (op, arg) = single(value), rangeOperators.contains(op) || (op == "$in" && scalarList(arg) != nil) {
            found.insert(key)
        }
    }

    private static func scalarList(_ value: JSONValue) -> [JSONValue]? {
        guard case .array(let values) = value else { return nil }
        for v in values {
            switch v {
            case .array, .object: return nil
            default: continue
            }
        }
        return values
    }

    /// `field_ranges`: each indexable field's ranges; as soon as one is empty, only it.
    static func fieldRanges(_ selector: JSONValue) -> [(field: String, ranges: MangoFieldRanges)] {
        var result: [(field: String, ranges: MangoFieldRanges)] = []
        for field in indexableFields(selector) {
            let ranges = ranges(selector, field: field)
            if ranges == .empty { return [(field: field, ranges: .empty)] }
            result.append((field: field, ranges: ranges))
        }
        return result
    }

    static func ranges(_ selector: JSONValue, field: String) -> MangoFieldRanges {
        guard let base = range(selector, field: field, MangoFieldRange.all) else { return .empty }
        guard base == MangoFieldRange.all, let values = inValues(selector, field: field) else { return .ranges([base]) }
        if values.isEmpty { return .empty }
        var sorted = values.sorted { MangoCollation.compare($0, $1) < 0 }
        var distinct: [JSONValue] = []
        for v in sorted where distinct.last.map({ MangoCollation.compare($0, v) != 0 }) ?? true { distinct.append(v) }
        sorted = distinct
        var list = sorted.map { MangoFieldRange(lowOperator: "$eq", low: .value($0), highOperator: "$eq", high: .value($0)) }
        // An array field matches `$in` when one of its elements does: every array key.
        list.append(MangoFieldRange(lowOperator: "$gte", low: .value(.array([])), highOperator: "$lt",
                                    high: .value(.object(JSONObject()))))
        return .ranges(list)
    }

    /// The first `$in` of scalars on `field` under the top-level `$and`s.
    private static func inValues(_ selector: JSONValue, field: String) -> [JSONValue]? {
        guard let (key, value) = single(selector) else { return nil }
        if key == "$and", case .array(let args) = value {
            for arg in args { if let found = inValues(arg, field: field) { return found } }
            return nil
        }
        guard key == field, let (op, arg) = single(value), op == "$in" else { return nil }
        return scalarList(arg)
    }

    /// `range/6`: narrows `current` by every condition on `field` under `$and`s; nil when empty.
    private static func range(_ selector: JSONValue, field: String, _ current: MangoFieldRange) -> MangoFieldRange? {
        guard let (key, value) = single(selector) else { return current }
        if key == "$and", case .array(let args) = value {
            var range = current
            for arg in args {
                guard let narrowed = self.range(arg, field: field, range) else { return nil }
                range = narrowed
            }
            return range
        }
        guard key == field, let (op, arg) = single(value), rangeOperators.contains(op) else { return current }
        return narrow(current, op, .value(arg))
    }

    private enum Position { case min, low, mid, high, max }

    private static func position(_ low: MangoBound, _ arg: MangoBound, _ high: MangoBound) -> Position {
        let c = MangoBound.compare(arg, low)
        if c < 0 { return .min }
        if c == 0 { return .low }
        let d = MangoBound.compare(arg, high)
        return d < 0 ? .mid : (d == 0 ? .high : .max)
    }

    /// `range/5`, case by case as CouchDB writes it.
    private static func narrow(_ r: MangoFieldRange, _ op: String, _ arg: MangoBound) -> MangoFieldRange? {
        let point = MangoFieldRange(lowOperator: "$eq", low: arg, highOperator: "$eq", high: arg)
        let pos = position(r.low, arg, r.high)
        switch op {
        case "$lt":
            switch pos {
            case .min, .low: return nil
            case .mid, .high: return MangoFieldRange(lowOperator: r.lowOperator, low: r.low, highOperator: "$lt", high: arg)
            case .max: return r
            }
        case "$lte":
            switch pos {
            case .min: return nil
            case .low: return r.lowOperator == "$gte" || r.lowOperator == "$eq" ? point : nil
            case .mid: return MangoFieldRange(lowOperator: r.lowOperator, low: r.low, highOperator: "$lte", high: arg)
            case .high, .max: return r
            }
        case "$eq":
            switch pos {
            case .min: return nil
            case .low: return r.lowOperator == "$gte" || r.lowOperator == "$eq" ? point : nil
            case .mid: return point
            case .high: return r.highOperator == "$lte" || r.highOperator == "$eq" ? point : nil
            case .max: return nil
            }
        case "$gte":
            switch pos {
            case .min, .low: return r
            case .mid: return MangoFieldRange(lowOperator: "$gte", low: arg, highOperator: r.highOperator, high: r.high)
            case .high: return r.highOperator == "$lte" || r.highOperator == "$eq" ? point : nil
            case .max: return nil
            }
        case "$gt":
            switch pos {
            case .min: return r
            case .low, .mid: return MangoFieldRange(lowOperator: "$gt", low: arg, highOperator: r.highOperator, high: r.high)
            case .high, .max: return nil
            }
        default:
            return r
        }
    }

    // MARK: Usability (mango_selector:has_required_fields, is_constant_field; mango_idx_view)

    /// Whether every document the selector matches must have each of `required`.
    static func hasRequiredFields(_ selector: JSONValue, _ required: [String]) -> Bool {
        remaining([selector], required).isEmpty
    }

    private static func remaining(_ selectors: [JSONValue], _ required: [String]) -> [String] {
        var required = required
        for selector in selectors {
            if required.isEmpty { return [] }
            guard let (key, value) = single(selector) else { continue }
            if key == "$and", case .array(let args) = value {
                required = remaining(args, required)
            } else if key == "$or", case .array(let args) = value {
                var left = Set<String>()
                for arg in args { left.formUnion(remaining([arg], required)) }
                required = required.filter { left.contains($0) }
            } else if value == .object(JSONObject([(key: "$exists", value: false)])) {
                continue
            } else {
                if let i = required.firstIndex(of: key) { required.remove(at: i) }
            }
        }
        return required
    }

    /// The selector asks a full-text search (`$text`, normalised to `$default`).
    static func isTextSearch(_ selector: JSONValue) -> Bool {
        switch selector {
        case .object(let object):
            return object.contains { $0.key == "$default" || isTextSearch($0.value) }
        case .array(let values):
            return values.contains(where: isTextSearch)
        default:
            return false
        }
    }

    static func isConstantField(_ selector: JSONValue, _ field: String) -> Bool {
        guard let (key, value) = single(selector) else { return false }
        if key == "$and", case .array(let args) = value { return args.contains { isConstantField($0, field) } }
        guard key == field, let (op, _) = single(value) else { return false }
        return op == "$eq"
    }

    static func canUseSort(_ columns: [String], _ sortFields: [String], _ selector: JSONValue) -> Bool {
        if sortFields.isEmpty { return true }
        guard let column = columns.first else { return false }
        if column == sortFields[0] { return sortFields.count <= columns.count && Array(columns.prefix(sortFields.count)) == sortFields }
        return isConstantField(selector, column) && canUseSort(Array(columns.dropFirst()), sortFields, selector)
    }

    /// Every field name the selector mentions (`mango_selector:fields`).
    static func fields(_ selector: JSONValue) -> [String] {
        guard let (key, value) = single(selector) else {
            guard case .object(let object) = selector else { return [] }
            return object.members.flatMap { fields(.object(JSONObject([$0]))) }
        }
        if key.hasPrefix("$") {
            guard case .array(let args) = value else { return [] }
            return args.flatMap(fields)
        }
        return [key]
    }
}
