/// A view's answer in pages (`ListingStream` sends them), as `ViewQuery` reads its rows.
final class ViewPages: ListingPages {
    private let query: ViewQuery
    private var started = false
    private var written = 0

    init(query: ViewQuery) { self.query = query }

    func nextPage(into output: inout [UInt8]) throws -> Bool {
        if !started {
            started = true
            output = query.prelude
        }
        guard let rows = try query.nextRows() else {
            output.append(contentsOf: AllDocumentsPages.epilogue)
            return true
        }
        for row in rows {
            output.append(literal: written == 0 ? "\n" : ",\n")
            output.append(contentsOf: row)
            written += 1
        }
        guard query.isExhausted else { return false }
        output.append(contentsOf: AllDocumentsPages.epilogue)
        return true
    }
}
