import CouchCore

// The built-in reductions' running values: `_sum`'s and `_stats`'s, over rows and over other
// stored reductions of the same kind (a sum of sums, statistics of statistics).

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

    /// Adds another sum (a stored reduction's).
    mutating func add(_ other: NumberSum) {
        if other.isInteger {
            add(JSONNumber(other.integer))
            return
        }
        if isInteger {
            double = Double(integer)
            isInteger = false
        }
        double += other.double
    }

    /// A sum read back from its JSON.
    init(_ number: JSONNumber) {
        add(number)
    }

    init() {}

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
        CouchError.named("builtin_reduce_error", BuiltinReduction.sumError)
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

    /// Another run's statistics added to these.
    mutating func merge(_ other: Statistics) {
        sum.add(other.sum)
        count += other.count
        if let low = other.minimum, minimum.map({ low.doubleValue < $0.doubleValue }) ?? true { minimum = low }
        if let high = other.maximum, maximum.map({ high.doubleValue > $0.doubleValue }) ?? true { maximum = high }
        squares.add(other.squares)
    }

    init() {}

    /// Statistics read back from their JSON (`json`'s form); nil for anything else.
    init?(_ value: JSONValue) {
        guard case .object(let members) = value, case .number(let sum)? = members["sum"],
              let count = members["count"]?.intValue, case .number(let squares)? = members["sumsqr"] else { return nil }
        self.sum = NumberSum(sum)
        self.count = count
        if case .number(let low)? = members["min"] { minimum = low }
        if case .number(let high)? = members["max"] { maximum = high }
        self.squares = NumberSum(squares)
    }

    var json: JSONValue {
        .object(JSONObject([
            (key: "sum", value: sum.json), (key: "count", value: JSONValue(count)),
            (key: "min", value: minimum.map(JSONValue.number) ?? .null), (key: "max", value: maximum.map(JSONValue.number) ?? .null),
            (key: "sumsqr", value: squares.json),
        ]))
    }
}

/// The built-in reductions' errors, worded as CouchDB's.
enum BuiltinReduction {
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
