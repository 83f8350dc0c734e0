import CouchCore
import CouchFunctions
import Foundation

/// A view's reduce over the rows of one group, fed row by row so memory stays bounded:
/// CouchDB's built-ins (`_count`, `_sum`, `_stats`, `_approx_count_distinct`) and
/// JavaScript reduce functions (reduced in chunks, the chunks' results then rereduced).
public struct ViewReducer {
    enum Kind {
        case count
        case sum
        case stats
        case distinct
        case javascript(key: String, source: String, design: [UInt8], runtime: FunctionRuntime, database: DatabaseName)
    }

    private let kind: Kind
    private var count = 0
    private var sum: Accumulator?
    private var stats: [Statistics]?
    private var statsOfScalar = true
    private var distinctKeys = Set<[UInt8]>()
    private var pendingKeys: [UInt8] = [UInt8(ascii: "[")]
    private var pendingValues: [UInt8] = [UInt8(ascii: "[")]
    private var pendingCount = 0
    private var partials: [JSONValue] = []
    private static let chunk = 1000

    /// The reducer for a view's `reduce` member; nil for an unknown built-in name.
    public init?(reduce: String, design: DesignDocument, view: String, database: DatabaseName, runtime: FunctionRuntime) {
        switch reduce.trimmingCharacters(in: .whitespacesAndNewlines) {
        case let name where name.hasPrefix("_count"): kind = .count
        case let name where name.hasPrefix("_sum"): kind = .sum
        case let name where name.hasPrefix("_stats"): kind = .stats
        case let name where name.hasPrefix("_approx_count_distinct"): kind = .distinct
        case let name where name.hasPrefix("_"): return nil
        default:
            kind = .javascript(key: design.viewFunctionKey(view, reduce: true, database: database), source: reduce,
                               design: design.jsonBytes, runtime: runtime, database: database)
        }
    }

    /// Whether this is `_count` (a range's count is then read without visiting rows).
    public var isCount: Bool {
        if case .count = kind { return true }
        return false
    }

    /// Adds one row.
    public mutating func add(key: [UInt8], id: DocumentID, value: [UInt8]) throws(CouchError) {
        count += 1
        switch kind {
        case .count:
            break
        case .distinct:
            distinctKeys.insert(Collation.sortKey((try? JSONValue.parse(key)) ?? .null))
        case .sum:
            let parsed = (try? JSONValue.parse(value)) ?? .null
            sum = try Accumulator.add(parsed, to: sum ?? .number(NumberSum()))
        case .stats:
            try addStatistics((try? JSONValue.parse(value)) ?? .null)
        case .javascript:
            if pendingCount > 0 {
                pendingKeys.append(UInt8(ascii: ","))
                pendingValues.append(UInt8(ascii: ","))
            }
            pendingKeys.append(UInt8(ascii: "["))
            pendingKeys += key
            pendingKeys.append(UInt8(ascii: ","))
            JSONWriter.appendString(id.rawValue, to: &pendingKeys)
            pendingKeys.append(UInt8(ascii: "]"))
            pendingValues += value
            pendingCount += 1
            if pendingCount >= Self.chunk { try flush() }
        }
    }

    /// The group's reduction.
    public mutating func finish() throws(CouchError) -> JSONValue {
        switch kind {
        case .count: return JSONValue(count)
        case .distinct: return JSONValue(distinctKeys.count)
        case .sum: return (sum ?? .number(NumberSum())).json
        case .stats:
            guard let stats else { return .null }   // a group always has a row: not reached
            return statsOfScalar ? stats[0].json : .array(stats.map(\.json))
        case .javascript(let key, let source, let design, let runtime, let database):
            try flush()
            if partials.count == 1 { return partials[0] }
            if partials.isEmpty { return .null }
            let values = JSONValue.array(partials).serialized()
            return try runtime.reduce(key: key, source: source, design: design, keys: Array("null".utf8), values: values,
                                      rereduce: true, database: database)
        }
    }

    private mutating func flush() throws(CouchError) {
        guard case .javascript(let key, let source, let design, let runtime, let database) = kind, pendingCount > 0 else { return }
        pendingKeys.append(UInt8(ascii: "]"))
        pendingValues.append(UInt8(ascii: "]"))
        partials.append(try runtime.reduce(key: key, source: source, design: design, keys: pendingKeys,
                                           values: pendingValues, rereduce: false, database: database))
        pendingKeys = [UInt8(ascii: "[")]
        pendingValues = [UInt8(ascii: "[")]
        pendingCount = 0
    }

    // MARK: _stats

    private mutating func addStatistics(_ value: JSONValue) throws(CouchError) {
        switch value {
        case .number(let number):
            if stats == nil { stats = [Statistics()] }
            guard statsOfScalar else { throw Self.statsError(value) }
            stats![0].add(number)
        case .array(let items):
            let numbers = items.compactMap { item -> JSONNumber? in
                if case .number(let number) = item { return number }
                return nil
            }
            guard numbers.count == items.count else { throw Self.statsError(value) }
            if stats == nil {
                stats = []
                statsOfScalar = false
            }
            guard !statsOfScalar else { throw Self.statsError(value) }
            while stats!.count < numbers.count { stats!.append(Statistics()) }
            for (index, number) in numbers.enumerated() { stats![index].add(number) }
        default:
            throw Self.statsError(value)
        }
    }

    static func statsError(_ value: JSONValue) -> CouchError {
        CouchError.named("builtin_reduce_error",
                         "The _stats function requires that map values be numbers or arrays of numbers, not '\(value.serializedString())'")
    }

    static let sumError = """
        The _sum function requires that map values be numbers, arrays of numbers, or objects. \
        Objects cannot be mixed with other data structures. Objects can be arbitrarily nested, \
        provided that the values for all fields are themselves numbers, arrays of numbers, or objects.
        """
}

/// A sum of numbers that stays an exact integer while every addend is one (as Erlang's).
struct NumberSum {
    var integer = 0
    var double = 0.0
    var isInteger = true

    mutating func add(_ number: JSONNumber) {
        if isInteger, let value = number.intValue {
            let (result, overflow) = integer.addingReportingOverflow(value)
            if !overflow {
                integer = result
                return
            }
        }
        if isInteger {
            double = Double(integer)
            isInteger = false
        }
        double += number.doubleValue
    }

    var json: JSONValue {
        if isInteger { return JSONValue(integer) }
        return double.isFinite ? .number(JSONNumber(double)) : .null
    }
}

/// `_sum`'s running value: a number, an array summed element by element, or an object
/// summed member by member.
indirect enum Accumulator {
    case number(NumberSum)
    case array([Accumulator])
    case object([(String, Accumulator)])

    static func add(_ value: JSONValue, to accumulator: Accumulator) throws(CouchError) -> Accumulator {
        switch (value, accumulator) {
        case (.number(let number), .number(var sum)):
            sum.add(number)
            return .number(sum)
        case (.number, .array(let items)):
            return try add(.array([value]), to: .array(items))
        case (.array(let values), .number(let sum)):
            return try add(.array(values), to: .array([.number(sum)]))
        case (.array(let values), .array(var items)):
            for (index, item) in values.enumerated() {
                guard case .number = item else { throw error(value) }
                if index < items.count {
                    items[index] = try add(item, to: items[index])
                } else {
                    items.append(try add(item, to: .number(NumberSum())))
                }
            }
            return .array(items)
        case (.object(let members), .number(let sum)) where sum.isInteger && sum.integer == 0:
            return try add(.object(members), to: .object([]))
        case (.object(let members), .object(var fields)):
            for member in members {
                if let index = fields.firstIndex(where: { $0.0 == member.key }) {
                    fields[index].1 = try add(member.value, to: fields[index].1)
                } else {
                    let start: Accumulator = member.value.objectValue != nil ? .object([]) : .number(NumberSum())
                    fields.append((member.key, try add(member.value, to: start)))
                }
            }
            return .object(fields)
        default:
            throw error(value)
        }
    }

    static func error(_ value: JSONValue) -> CouchError {
        CouchError.named("builtin_reduce_error", ViewReducer.sumError)
    }

    var json: JSONValue {
        switch self {
        case .number(let sum): sum.json
        case .array(let items): .array(items.map(\.json))
        case .object(let fields): .object(JSONObject(fields.map { (key: $0.0, value: $0.1.json) }))
        }
    }
}

/// `_stats` of one position: sum, count, min, max, sum of squares.
struct Statistics {
    var sum = NumberSum()
    var count = 0
    var minimum: JSONNumber?
    var maximum: JSONNumber?
    var squares = NumberSum()

    mutating func add(_ number: JSONNumber) {
        sum.add(number)
        count += 1
        let value = number.doubleValue
        if minimum.map({ value < $0.doubleValue }) ?? true { minimum = number }
        if maximum.map({ value > $0.doubleValue }) ?? true { maximum = number }
        if let integer = number.intValue, case (let square, false) = integer.multipliedReportingOverflow(by: integer) {
            squares.add(JSONNumber(square))
        } else if (value * value).isFinite {
            squares.add(JSONNumber(value * value))
        }
    }

    var json: JSONValue {
        .object(JSONObject([
            (key: "sum", value: sum.json), (key: "count", value: JSONValue(count)),
            (key: "min", value: minimum.map(JSONValue.number) ?? .null), (key: "max", value: maximum.map(JSONValue.number) ?? .null),
            (key: "sumsqr", value: squares.json),
        ]))
    }
}
