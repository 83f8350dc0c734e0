import CouchCore

/// A key range of an index scan, both ends inclusive (CouchDB's `start_key`/`end_key`):
/// JSON indexes compare arrays of column values, `.max` above everything.
public struct MangoKeyRange: Sendable {
    public var start: [MangoBound]
    public var end: [MangoBound]
}

/// Which index answers a query and how (`mango_cursor:create` and the cursors' `create`),
/// with the analysis `_explain` shows.
public struct MangoPlan: Sendable {
    public let index: MangoIndex
    /// The ranges of the index's leading columns the selector allows.
    public let prefix: [MangoFieldRanges]
    /// Key ranges to scan, in ascending key order; empty when nothing can match.
    public let keyRanges: [MangoKeyRange]
    /// `index_candidates` of `_explain`.
    public let candidates: [JSONValue]
    /// The `use_index` asked for could not be used.
    public let useIndexIgnored: Bool
}

enum MangoPlanner {
    /// Chooses the index for `options` among `indexes` (every index of the database,
    /// `_all_docs` included), or throws CouchDB's error when none can serve the query.
    static func plan(_ options: MangoFindOptions, indexes: [MangoIndex]) throws(CouchError) -> MangoPlan {
        let selector = options.selector.normalized
        let sortFields = options.sort.fields
        let global = indexes.filter { $0.partialFilter == nil }
        let userSpecified = filterByUseIndex(indexes, options.useIndex)
        var considered = global
        for index in userSpecified where !considered.contains(where: { $0.isSame(index) }) { considered.append(index) }
        // `filter_partition_indexes`: `_all_docs`, and the indexes of the query's kind.
        let partitionQuery = !options.partition.isEmpty
        if options.databasePartitioned {
            considered = considered.filter { $0.kind == .special || $0.partitioned == partitionQuery }
        }
        var usability: [(index: MangoIndex, reason: String?)] = []
        for index in considered { usability.append((index, unusableReason(index, selector: selector, sortFields: sortFields))) }
        let usable = usability.filter { $0.reason == nil }.map(\.index)
        if usable.isEmpty {
            if MangoRangeAnalysis.isTextSearch(selector) { throw MangoErrors.selectorUnsupported }
            // `mango_sort_error`.
            guard options.databasePartitioned else { throw MangoErrors.missingSortIndex }
            let kind = partitionQuery ? "partitioned" : "global"
            throw MangoErrors.named("no_usable_index", "No \(kind) index exists for this sort, try indexing by the sort fields.")
        }
        var filtered = filterByUseIndex(usable, options.useIndex)
        let useIndexIgnored = !options.useIndex.isEmpty && filtered.isEmpty
        if filtered.isEmpty { filtered = usable }
        // Preference by type: json, then text, then _all_docs.
        let kind: MangoIndex.Kind = filtered.contains { $0.kind == .json } ? .json
            : filtered.contains { $0.kind == .text } ? .text : .special
        let ofType = filtered.filter { $0.kind == kind }
        if kind == .special, !options.allowFallback, options.useIndex != ["_all_docs"] {
            throw MangoErrors.named("no_usable_index", "No global index exists for this selector, try indexing by the sort fields.")
        }
        if kind != .text, MangoRangeAnalysis.isTextSearch(selector) { throw MangoErrors.selectorUnsupported }
        if kind == .text, ofType.count > 1 {
            throw MangoErrors.named("multiple_text_indexes", "You must specify an index with the `use_index` parameter.")
        }

        var fieldRanges = MangoRangeAnalysis.fieldRanges(selector)
        if kind == .special {
            fieldRanges.append((field: "_id", ranges: .ranges([MangoFieldRange(lowOperator: "$gt", low: .value(.null),
                                                                               highOperator: "$lt", high: .max)])))
        }
        var composited: [(index: MangoIndex, prefix: [MangoFieldRanges], difference: Int)] = ofType.map { index in
            var prefix: [MangoFieldRanges] = []
            for column in index.columns {
                guard let found = fieldRanges.first(where: { $0.field == column }) else { break }
                prefix.append(found.ranges)
            }
            return (index, prefix, fieldRanges.count - prefix.count)
        }
        composited.sort { a, b in
            if a.difference != b.difference { return a.difference < b.difference }
            if a.index.columns.count != b.index.columns.count { return a.index.columns.count < b.index.columns.count }
            return MangoIndex.listedBefore(a.index, b.index)
        }
        let (winner, prefix, _) = composited[0]
        var keyRanges = keyRanges(for: winner, prefix: prefix)
        if isNoop(selector) { keyRanges = [] }
        let candidates = candidates(all: indexes, global: global, considered: considered, usability: usability,
                                    filtered: filtered, ofType: ofType, sorted: composited, winner: winner,
                                    fields: requiredFields(options))
        return MangoPlan(index: winner, prefix: prefix, keyRanges: keyRanges, candidates: candidates,
                         useIndexIgnored: useIndexIgnored)
    }

    /// `maybe_filter_indexes_by_ddoc`.
    static func filterByUseIndex(_ indexes: [MangoIndex], _ useIndex: [String]) -> [MangoIndex] {
        guard let first = useIndex.first else { return [] }
        if first == "_all_docs", useIndex.count == 1 { return indexes.filter { $0.kind == .special } }
        let design = first.hasBytePrefix("_design/") ? first : "_design/" + first
        return indexes.filter { $0.designID == design && (useIndex.count < 2 || $0.name == useIndex[1]) }
    }

    /// Nil when the index can serve the query, else CouchDB's reason code.
    static func unusableReason(_ index: MangoIndex, selector: JSONValue, sortFields: [String]) -> String? {
        switch index.kind {
        case .special:
            if sortFields.isEmpty { return nil }
            let usable = MangoRangeAnalysis.indexableFields(selector).contains("_id")
                && MangoRangeAnalysis.canUseSort(["_id"], sortFields, selector)
            return usable ? nil : "sort_order_mismatch"
        case .json:
            if MangoRangeAnalysis.isTextSearch(selector) { return "needs_text_search" }
            let columns = index.columns
            let required = Set(columns).subtracting(sortFields).subtracting(["_id", "_rev"])
                .sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            if !MangoRangeAnalysis.hasRequiredFields(selector, required) { return "field_mismatch" }
            if !MangoRangeAnalysis.canUseSort(columns, sortFields, selector) { return "sort_order_mismatch" }
            return nil
        case .text:
            if selector == .object(JSONObject()) { return "empty_selector" }
            if !sortFields.isEmpty { return "sort_order_mismatch" }
            // Couchette's: other conditions are matched on the documents `$text` finds.
            if MangoRangeAnalysis.isTextSearch(selector) { return nil }
            guard let names = index.text?.fields?.map(\.name) else { return nil }
            let mentioned = Set(MangoRangeAnalysis.fields(selector)).subtracting(["$default"])
            return mentioned.isSubset(of: Set(names)) ? nil : "field_mismatch"
        }
    }

    /// `maybe_noop_range`: `{"$or": []}` and friends match nothing.
    static func isNoop(_ selector: JSONValue) -> Bool {
        guard let (key, value) = MangoRangeAnalysis.single(selector), ["$all", "$and", "$or", "$in"].contains(key) else {
            return false
        }
        return value == .array([])
    }

    /// The fields a covering index would have to hold: `fields` and the selector's.
    static func requiredFields(_ options: MangoFindOptions) -> [String]? {
        guard let names = options.fields.names else { return nil }
        return Array(Set(names + MangoRangeAnalysis.fields(options.selector.normalized)))
    }

    /// `mango_idx_view:covers`: every needed field is a column (or `_id`).
    static func covers(_ index: MangoIndex, fields: [String]?) -> Bool {
        guard index.kind == .json, index.partialFilter == nil, let fields else { return false }
        return Set(fields).isSubset(of: Set(index.columns + ["_id"]))
    }

    // MARK: Key ranges

    /// CouchDB's `start_key`/`end_key` over the prefix; a `$in` column before which every
    /// column is a single value is expanded into one range per value.
    static func keyRanges(for index: MangoIndex, prefix: [MangoFieldRanges]) -> [MangoKeyRange] {
        if prefix.contains(.empty) { return [] }
        var alternatives: [[MangoFieldRange]] = [[]]
        var expanded = false
        for ranges in prefix {
            guard case .ranges(let list) = ranges, let hull = ranges.hull else { return [] }
            let onlyPointsBefore = alternatives.count == 1 && alternatives[0].allSatisfy(\.isPoint)
            if list.count > 1, onlyPointsBefore, !expanded {
                alternatives = list.map { alternatives[0] + [$0] }
                expanded = true
            } else {
                alternatives = alternatives.map { $0 + [list.count == 1 ? list[0] : hull] }
            }
        }
        return alternatives.map { MangoKeyRange(start: startKey($0), end: endKey($0)) }
    }

    static func startKey(_ ranges: [MangoFieldRange]) -> [MangoBound] {
        var key: [MangoBound] = []
        for range in ranges {
            if case .min = range.low { break }
            key.append(range.low)
        }
        return key
    }

    static func endKey(_ ranges: [MangoFieldRange]) -> [MangoBound] {
        var key: [MangoBound] = []
        for range in ranges {
            if case .max = range.high { return key + [.max] }
            key.append(range.high)
        }
        return key + [.max]
    }

    // MARK: _explain's candidates (mango_cursor:extract_candidate_indexes)

    static func candidates(all: [MangoIndex], global: [MangoIndex], considered: [MangoIndex],
                           usability: [(index: MangoIndex, reason: String?)], filtered: [MangoIndex],
                           ofType: [MangoIndex], sorted: [(index: MangoIndex, prefix: [MangoFieldRanges], difference: Int)],
                           winner: MangoIndex, fields: [String]?) -> [JSONValue] {
        func contains(_ list: [MangoIndex], _ index: MangoIndex) -> Bool { list.contains { $0.isSame(index) } }
        let usable = usability.filter { $0.reason == nil }.map(\.index)
        let partial = all.filter { !contains(global, $0) && !contains(considered, $0) }
        let notUsable = considered.filter { !contains(usable, $0) }
        let excluded = usable.filter { !contains(filtered, $0) }
        let unfavored = filtered.filter { !contains(ofType, $0) }
        let unfavoredRank = max(1, winner.kind == .json ? sorted.count : 0)
        let excludedRank = unfavoredRank + (unfavored.isEmpty ? 0 : 1)
        let notUsableRank = excludedRank + (excluded.isEmpty ? 0 : 1)
        let partialRank = notUsableRank + (notUsable.isEmpty ? 0 : 1)

        var entries: [(index: MangoIndex, usable: Bool, reason: String, ranking: Int)] = []
        for index in partial { entries.append((index, false, "is_partial", partialRank)) }
        for index in notUsable {
            let reason = usability.first { $0.index.isSame(index) }?.reason ?? "field_mismatch"
            entries.append((index, false, reason, notUsableRank))
        }
        for index in excluded { entries.append((index, true, "excluded_by_user", excludedRank)) }
        for index in unfavored { entries.append((index, true, "unfavored_type", unfavoredRank)) }
        if winner.kind == .json {
            let winnerWidth = winner.columns.count
            for (n, entry) in sorted.enumerated() where !entry.index.isSame(winner) {
                let reason = entry.difference > 0 ? "less_overlap"
                    : entry.index.columns.count > winnerWidth ? "too_many_fields" : "alphabetically_comes_after"
                entries.append((entry.index, true, reason, n))
            }
        }
        // CouchDB folds a map keyed by index records and prepends: descending record order.
        entries.sort { MangoIndex.listedBefore($1.index, $0.index) }
        return entries.map { entry in
            let covering: JSONValue = entry.index.kind == .json ? .bool(covers(entry.index, fields: fields)) : .null
            return .object(JSONObject([
                (key: "index", value: entry.index.json),
                (key: "analysis", value: .object(JSONObject([
                    (key: "usable", value: .bool(entry.usable)),
                    (key: "reasons", value: .array([.object(JSONObject([(key: "name", value: JSONValue(entry.reason))]))])),
                    (key: "ranking", value: JSONValue(entry.ranking)),
                    (key: "covering", value: covering),
                ]))),
            ]))
        }
    }
}
