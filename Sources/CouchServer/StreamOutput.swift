/// The bytes a streamed response (a feed, `_all_docs`) has produced and not yet handed to
/// libmicrohttpd. Producers append to `bytes`; `copy(into:)` hands them out in the sizes the
/// connection asks for; once drained, the buffer is emptied and reused for the next batch.
struct StreamOutput {
    var bytes: [UInt8] = []
    private var offset = 0

    /// Whether every byte produced so far has been handed out.
    var isDrained: Bool { offset == bytes.count }

    /// Empties the buffer (keeping its capacity) for the producer to fill again.
    mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        offset = 0
    }

    /// Copies as many pending bytes as fit into `buffer`; 0 when none are pending.
    mutating func copy(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let count = min(buffer.count, bytes.count - offset)
        guard count > 0 else { return 0 }
        bytes.withUnsafeBytes { source in
            buffer.baseAddress!.copyMemory(from: source.baseAddress! + offset, byteCount: count)
        }
        offset += count
        return count
    }
}

/// A listing streamed a page at a time (`_all_docs`, a view): `produce` appends the next page
/// to `output` (or sets `finished`) whenever the connection has taken everything before it.
protocol PagedListingStream: ResponseStream {
    var output: StreamOutput { get set }
    var finished: Bool { get }
    func produce() throws
}

extension PagedListingStream {
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
}
