/// A view's answer written a page of rows at a time as the client reads it, so a view of
/// any size never sits in memory whole.
final class ViewStream: ResponseStream, @unchecked Sendable {
    private let query: ViewQuery
    private var output = StreamOutput()
    private var started = false
    private var finished = false
    private var written = 0

    init(query: ViewQuery) { self.query = query }

    func start(wake: @escaping @Sendable () -> Void) {}
    func close() {}

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamChunk {
        if output.isDrained {
            output.reset()
            if finished { return .end }
            do {
                try produce()
            } catch {
                // The status line is gone already; end the body where it stands.
                return .end
            }
        }
        let count = output.copy(into: buffer)
        return count > 0 ? .data(count) : .end
    }

    private func produce() throws {
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
