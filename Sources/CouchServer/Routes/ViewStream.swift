/// A view's answer written a page of rows at a time as the client reads it, so a view of
/// any size never sits in memory whole.
final class ViewStream: PagedListingStream, @unchecked Sendable {
    private let query: ViewQuery
    var output = StreamOutput()
    private var started = false
    private(set) var finished = false
    private var written = 0

    init(query: ViewQuery) { self.query = query }

    func produce() throws {
        if !started {
            started = true
            output.bytes = query.prelude
        }
        guard let rows = try query.nextRows() else {
            output.bytes.append(contentsOf: AllDocumentsStream.epilogue)
            finished = true
            return
        }
        for row in rows {
            output.bytes.append(contentsOf: written == 0 ? "\n".utf8 : ",\n".utf8)
            output.bytes.append(contentsOf: row)
            written += 1
        }
    }
}
