import CouchCore
import Foundation

/// JSON index rows computed by reading every document, sorted in memory and kept until the
/// database changes. It stands in where no index engine is wired: correct, but each
/// change costs a full rebuild.
public final class MangoScanIndexReader: MangoIndexReader, @unchecked Sendable {
    private let lock = NSLock()
    private var built: [String: (sequence: Int, rows: [MangoIndexRow])] = [:]

    public init() {}

    public func rows(_ index: MangoIndex, in range: MangoKeyRange, descending: Bool, after: MangoIndexRow?, limit: Int,
                     update: Bool, source: MangoDocumentSource) throws -> [MangoIndexRow] {
        let all = try rows(of: index, source: source, update: update)
        var result: [MangoIndexRow] = []
        let ordered: AnySequence<MangoIndexRow> = descending ? AnySequence(all.reversed()) : AnySequence(all)
        for row in ordered {
            if let after {
                let c = MangoIndexRow.compare(row.key, row.id, after.key, after.id)
                if descending ? c >= 0 : c <= 0 { continue }
            }
            guard range.contains(row.key) else { continue }
            result.append(row)
            if result.count >= limit { break }
        }
        return result
    }

    private func rows(of index: MangoIndex, source: MangoDocumentSource, update: Bool) throws -> [MangoIndexRow] {
        let key = "\(index.designID ?? "")\u{0}\(index.name)\u{0}\(index.designRevision ?? "")"
        let sequence = source.updateSequence
        if let cached = lock.withLock({ built[key] }), cached.sequence == sequence || !update { return cached.rows }
        var rows: [MangoIndexRow] = []
        var after: String?
        while true {
            let page = try source.scan(start: nil, end: nil, after: after, descending: false, limit: 1000)
            for document in page.documents { if let row = index.row(for: document) { rows.append(row) } }
            guard let last = page.lastID else { break }
            after = last
        }
        rows.sort { MangoIndexRow.compare($0.key, $0.id, $1.key, $1.id) < 0 }
        lock.withLock { built[key] = (sequence, rows) }
        return rows
    }
}
