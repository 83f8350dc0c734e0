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

    /// Starts handing out `next`; answers the buffer handed out before, for the producer to reuse.
    mutating func replace(with next: [UInt8]) -> [UInt8] {
        let previous = bytes
        bytes = next
        offset = 0
        return previous
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
