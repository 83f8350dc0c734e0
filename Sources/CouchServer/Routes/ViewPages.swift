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
        let more = try query.appendNextRows(to: &output) { [self] output in
            output.append(literal: written == 0 ? "\n" : ",\n")
            written += 1
        }
        guard more else {
            output.append(contentsOf: AllDocumentsPages.epilogue)
            return true
        }
        guard query.isExhausted else { return false }
        output.append(contentsOf: AllDocumentsPages.epilogue)
        return true
    }
}
