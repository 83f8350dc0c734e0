/// A response whose body is read as it arrives: line by line (a continuous change feed)
/// or in chunks (a large body). Lines come without their `\n` (or `\r\n`); an empty line
/// is an empty array (a heartbeat). Dropping the response, or `cancel()`, ends the transfer.
public final class StreamingResponse: Sendable {
    /// How the body is cut up for the reader.
    public enum Framing: Sendable {
        /// `nextLine()` returns one line at a time.
        case lines
        /// `nextChunk()` returns whatever arrived since the last call (at least one byte).
        case chunks
    }

    private let transfer: Transfer
    private let loop: TransferLoop

    init(transfer: Transfer, loop: TransferLoop) {
        self.transfer = transfer
        self.loop = loop
    }

    deinit { loop.cancel(transfer) }

    public var status: Int { transfer.responseStatus }
    public var headers: [(name: String, value: String)] { transfer.responseHeaders }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// What is there to read without waiting.
    public enum Availability: Sendable {
        case line([UInt8])
        /// Nothing buffered yet: the next `nextLine()` would wait for the peer.
        case pending
        case end
    }

    public func availableLine() throws(HTTPClientError) -> Availability {
        let (availability, resume) = transfer.availablePiece()
        if resume { loop.resume(transfer) }
        switch availability {
        case .piece(let line): return .line(line)
        case .pending: return .pending
        case .end: return .end
        case .failed(let error): throw error
        }
    }

    /// The next line (or chunk, with `.chunks` framing), waiting for it if needed; nil
    /// once the body has ended.
    public func nextLine() async throws(HTTPClientError) -> [UInt8]? {
        do {
            let line = try await withTaskCancellationHandler {
                try await transfer.waitForPiece()
            } onCancel: {
                loop.cancel(transfer)
            }
            if transfer.shouldResumeLocked() { loop.resume(transfer) }
            return line
        } catch let error as HTTPClientError {
            throw error
        } catch {
            throw .cancelled
        }
    }

    /// The next chunk of the body (`.chunks` framing), waiting for it if needed; nil once
    /// the body has ended.
    public func nextChunk() async throws(HTTPClientError) -> [UInt8]? {
        try await nextLine()
    }

    /// Reads the rest of the body.
    public func readToEnd() async throws(HTTPClientError) -> [UInt8] {
        var body: [UInt8] = []
        while let piece = try await nextLine() {
            body.append(contentsOf: piece)
            if transfer.mode == .lines { body.append(UInt8(ascii: "\n")) }
        }
        return body
    }

    public func cancel() { loop.cancel(transfer) }
}
