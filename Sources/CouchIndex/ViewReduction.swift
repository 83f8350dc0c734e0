import CouchCore
import CouchFunctions
import Foundation

/// A reduction of a run of rows, as the index stores it: JSON text (a `_count`, `_sum` or
/// `_stats` value, or what a JavaScript reduce returned), `_approx_count_distinct`'s sketch,
/// or the error the function raised on those rows (answered by every query that covers them,
/// as the scan that reduced at query time answered it).
enum PartialReduction: Sendable {
    case value([UInt8])
    case failure(CouchError)
}

/// One row as a reduce function sees it.
struct ReductionRow {
    let keyJSON: [UInt8]
    let docID: String
    let valueJSON: [UInt8]
}

/// A view's reduce function, working on stored pieces: `reduce` turns runs of rows into
/// partial reductions, `combine` merges runs of partials (CouchDB's rereduce), `finish` makes
/// a partial the value a query answers. CouchDB's built-ins (`_count`, `_sum`, `_stats`,
/// `_approx_count_distinct`) run here; a JavaScript reduce runs in the function workers, many
/// runs to a call. A function's own failure becomes a `.failure` partial; what is not the
/// function's doing (a worker that could not run, a limit) is thrown.
public struct ViewReduction: Sendable {
    enum Kind: Sendable {
        case count
        case sum
        case stats
        case distinct(partitioned: Bool)
        case javascript(key: String, source: String, design: [UInt8], runtime: FunctionRuntime, database: DatabaseName)
    }

    let kind: Kind

    init(kind: Kind) { self.kind = kind }

    /// The reduction for a view's `reduce` member; nil for an unknown built-in name.
    public init?(source: String, design: DesignDocument, view: String, database: DatabaseName, runtime: FunctionRuntime,
                 partitioned: Bool) {
        switch source.trimmingCharacters(in: .whitespacesAndNewlines) {
        case let name where name.hasBytePrefix("_count"): kind = .count
        case let name where name.hasBytePrefix("_sum"): kind = .sum
        case let name where name.hasBytePrefix("_stats"): kind = .stats
        case let name where name.hasBytePrefix("_approx_count_distinct"): kind = .distinct(partitioned: partitioned)
        case let name where name.hasBytePrefix("_"): return nil
        default:
            kind = .javascript(key: design.viewFunctionKey(view, reduce: true, database: database), source: source,
                               design: design.jsonBytes, runtime: runtime, database: database)
        }
    }

    /// Whether the function runs in a worker (its calls are worth batching).
    var isJavaScript: Bool {
        if case .javascript = kind { return true }
        return false
    }

    // MARK: Reducing rows

    /// Each run of rows reduced.
    func reduce(_ runs: [[ReductionRow]]) throws(CouchError) -> [PartialReduction] {
        switch kind {
        case .javascript(let key, let source, let design, let runtime, let database):
            // The input as the query server reads it: `[[key, id], value]` per row.
            let size = { (rows: [ReductionRow]) in rows.reduce(0) { $0 + $1.keyJSON.count + $1.docID.utf8.count + $1.valueJSON.count + 8 } }
            return try Self.inWorkers(runs, inputSize: size) { batch throws(CouchError) in
                try runtime.reduce(key: key, source: source, design: design, runs: batch.map(Self.reduceRun), database: database)
            }
        default:
            return runs.map(reduceBuiltin)
        }
    }

    private static func reduceRun(_ rows: [ReductionRow]) -> FunctionRuntime.ReduceRun {
        var keys: [UInt8] = [UInt8(ascii: "[")]
        var values: [UInt8] = [UInt8(ascii: "[")]
        for (index, row) in rows.enumerated() {
            if index > 0 {
                keys.append(UInt8(ascii: ","))
                values.append(UInt8(ascii: ","))
            }
            keys.append(UInt8(ascii: "["))
            keys += row.keyJSON
            keys.append(UInt8(ascii: ","))
            JSONWriter.appendString(row.docID, to: &keys)
            keys.append(UInt8(ascii: "]"))
            values += row.valueJSON
        }
        keys.append(UInt8(ascii: "]"))
        values.append(UInt8(ascii: "]"))
        return (keys, values, false)
    }

    private func reduceBuiltin(_ rows: [ReductionRow]) -> PartialReduction {
        do throws(CouchError) {
            switch kind {
            case .count:
                return .value(Array(String(rows.count).utf8))
            case .sum:
                var sum = Accumulator.number(NumberSum())
                for row in rows { sum = try Accumulator.add(Self.parse(row.valueJSON), to: sum) }
                return .value(sum.json.serialized())
            case .stats:
                var stats = StatisticsRun()
                for row in rows { try stats.add(Self.parse(row.valueJSON)) }
                return .value(stats.json.serialized())
            case .distinct(let partitioned):
                var sketch = HyperLogLog()
                for row in rows {
                    sketch.insert(keyJSON: row.keyJSON, partition: partitioned ? DocumentID(row.docID).partition : nil)
                }
                return .value(sketch.encoded)
            case .javascript:
                preconditionFailure("JavaScript reduces in the workers")
            }
        } catch {
            return .failure(error)
        }
    }

    // MARK: Combining partials

    /// Each run of partials combined into one (a run of one is itself; a failure in a run is
    /// the run's result).
    func combine(_ runs: [[PartialReduction]]) throws(CouchError) -> [PartialReduction] {
        var results = [PartialReduction?](repeating: nil, count: runs.count)
        var pending: [(index: Int, values: [[UInt8]])] = []
        for (index, run) in runs.enumerated() {
            var values: [[UInt8]] = []
            for partial in run {
                switch partial {
                case .failure:
                    if results[index] == nil { results[index] = partial }
                case .value(let bytes):
                    values.append(bytes)
                }
            }
            if results[index] != nil { continue }
            if values.count == 1 {
                results[index] = .value(values[0])
            } else if values.isEmpty {
                results[index] = reduceNothing
            } else {
                pending.append((index, values))
            }
        }
        if case .javascript(let key, let source, let design, let runtime, let database) = kind {
            let size = { (values: [[UInt8]]) in values.reduce(0) { $0 + $1.count + 1 } }
            let combined = try Self.inWorkers(pending.map(\.values), inputSize: size) { batch throws(CouchError) in
                try runtime.reduce(key: key, source: source, design: design, runs: batch.map { values in
                    var array: [UInt8] = [UInt8(ascii: "[")]
                    for (position, value) in values.enumerated() {
                        if position > 0 { array.append(UInt8(ascii: ",")) }
                        array += value
                    }
                    array.append(UInt8(ascii: "]"))
                    return (Array("null".utf8), array, true)
                }, database: database)
            }
            for (entry, partial) in zip(pending, combined) { results[entry.index] = partial }
        } else {
            for entry in pending { results[entry.index] = combineBuiltin(entry.values) }
        }
        return results.map { $0! }
    }

    /// What no rows reduce to (a query that covers none answers no row; kept for completeness).
    private var reduceNothing: PartialReduction {
        switch kind {
        case .count: .value(Array("0".utf8))
        case .sum: .value(Array("0".utf8))
        case .distinct: .value(HyperLogLog().encoded)
        default: .value(Array("null".utf8))
        }
    }

    private func combineBuiltin(_ values: [[UInt8]]) -> PartialReduction {
        do throws(CouchError) {
            switch kind {
            case .count:
                var total = 0
                for value in values { total &+= try Self.parse(value).intValue ?? 0 }
                return .value(Array(String(total).utf8))
            case .sum:
                var sum = Accumulator.number(NumberSum())
                for value in values { sum = try Accumulator.add(Self.parse(value), to: sum) }
                return .value(sum.json.serialized())
            case .stats:
                var stats = StatisticsRun()
                for value in values { try stats.merge(Self.parse(value)) }
                return .value(stats.json.serialized())
            case .distinct:
                var sketch = HyperLogLog()
                for value in values {
                    guard let part = HyperLogLog(encoded: value) else { throw CouchError.internalError("bad stored sketch") }
                    sketch.merge(part)
                }
                return .value(sketch.encoded)
            case .javascript:
                preconditionFailure("JavaScript rereduces in the workers")
            }
        } catch {
            return .failure(error)
        }
    }

    // MARK: Answering

    /// The value a query answers for a group whose rows reduced to `partial`.
    func finish(_ partial: PartialReduction) throws(CouchError) -> JSONValue {
        switch partial {
        case .failure(let error):
            throw error
        case .value(let bytes):
            if case .distinct = kind {
                guard let sketch = HyperLogLog(encoded: bytes) else { throw CouchError.internalError("bad stored sketch") }
                return JSONValue(sketch.cardinality)
            }
            return try Self.parse(bytes)
        }
    }

    // MARK: Helpers

    private static func parse(_ bytes: [UInt8]) throws(CouchError) -> JSONValue {
        do {
            return try JSONValue.parse(bytes)
        } catch {
            throw CouchError.internalError("stored JSON unreadable")
        }
    }

    /// Errors that are not the function's doing: nothing is stored for them, they fail the
    /// work that met them.
    static func isTransient(_ error: CouchError) -> Bool {
        guard error.customName == nil else { return false }
        switch error.kind {
        case .osProcessError, .internalServerError, .serviceUnavailable, .insufficientStorage, .stopped: return true
        default: return false
        }
    }

    /// The error CouchDB's `reduce_limit` gives a JavaScript (re)reduce whose output grows:
    /// answered as the group's row (`{"key":null,"error":"reduce_overflow_error",...}`), and
    /// the result of every rereduce that meets it.
    public static let overflowName = "reduce_overflow_error"

    /// A result as stored: CouchDB's `reduce_limit` check (its query server's: more than 4096
    /// bytes of output that are more than half the input's) turns it into an overflow.
    private static func partial(_ result: JSONValue, inputSize: Int) -> PartialReduction {
        let bytes = result.serialized()
        guard bytes.count > 4096, bytes.count * 2 > inputSize else { return .value(bytes) }
        let reason = "Reduce output must shrink more rapidly: input size: \(inputSize) output size: \(bytes.count)"
        return .failure(CouchError.named(overflowName, reason))
    }

    /// Runs `call` over every run in batches; a function error that fails a batch is pinned on
    /// the run that raised it by running the batch's runs one at a time.
    private static func inWorkers<Run>(_ runs: [Run], inputSize: (Run) -> Int,
                                       _ call: ([Run]) throws(CouchError) -> [JSONValue])
        throws(CouchError) -> [PartialReduction] {
        var results: [PartialReduction] = []
        results.reserveCapacity(runs.count)
        var start = 0
        while start < runs.count {
            let batch = Array(runs[start..<min(runs.count, start + batchSize)])
            start += batch.count
            do {
                results += zip(batch, try call(batch)).map { partial($1, inputSize: inputSize($0)) }
            } catch where !isTransient(error) {
                for run in batch {
                    do {
                        results += try call([run]).map { partial($0, inputSize: inputSize(run)) }
                    } catch where !isTransient(error) {
                        results.append(.failure(error))
                    }
                }
            }
        }
        return results
    }

    /// Runs of rows (or partials) per call into a worker.
    static let batchSize = 256
}

/// `_stats` over rows or stored statistics: one `Statistics` for number values, one per
/// position for arrays of numbers (CouchDB's two forms, never mixed).
struct StatisticsRun {
    private var positions: [Statistics]?
    private var scalar = true

    mutating func add(_ value: JSONValue) throws(CouchError) {
        switch value {
        case .number(let number):
            if positions == nil { positions = [Statistics()] }
            guard scalar else { throw BuiltinReduction.statsError(value) }
            positions![0].add(number)
        case .array(let items):
            let numbers = items.compactMap { item -> JSONNumber? in
                if case .number(let number) = item { return number }
                return nil
            }
            guard numbers.count == items.count else { throw BuiltinReduction.statsError(value) }
            try becomeArray(value)
            while positions!.count < numbers.count { positions!.append(Statistics()) }
            for (index, number) in numbers.enumerated() { positions![index].add(number) }
        default:
            throw BuiltinReduction.statsError(value)
        }
    }

    /// Adds stored statistics (`json`'s form: an object, or an array of them).
    mutating func merge(_ value: JSONValue) throws(CouchError) {
        if let one = Statistics(value) {
            if positions == nil { positions = [Statistics()] }
            guard scalar else { throw BuiltinReduction.statsError(value) }
            positions![0].merge(one)
            return
        }
        guard case .array(let items) = value else { throw BuiltinReduction.statsError(value) }
        let parts = items.compactMap(Statistics.init)
        guard parts.count == items.count else { throw BuiltinReduction.statsError(value) }
        try becomeArray(value)
        while positions!.count < parts.count { positions!.append(Statistics()) }
        for (index, part) in parts.enumerated() { positions![index].merge(part) }
    }

    private mutating func becomeArray(_ value: JSONValue) throws(CouchError) {
        if positions == nil {
            positions = []
            scalar = false
        }
        guard !scalar else { throw BuiltinReduction.statsError(value) }
    }

    var json: JSONValue {
        guard let positions else { return .null }
        return scalar ? positions[0].json : .array(positions.map(\.json))
    }
}
