/// A response whose body is read line by line as it arrives (a continuous change feed).
/// Lines come without their `\n` (or `\r\n`); an empty line is an empty array (a
/// heartbeat). Dropping the response, or `cancel()`, ends the transfer.
public final class StreamingResponse: Sendable {
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
        let (availability, resume) = transfer.availableLine()
        if resume { loop.resume(transfer) }
        switch availability {
        case .line(let line): return .line(line)
        case .pending: return .pending
        case .end: return .end
        case .failed(let error): throw error
        }
    }

    /// The next line, waiting for it if needed; nil once the body has ended.
    public func nextLine() async throws(HTTPClientError) -> [UInt8]? {
        do {
            let line = try await withTaskCancellationHandler {
                try await transfer.waitForLine()
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

    /// Reads the rest of the body.
    public func readToEnd() async throws(HTTPClientError) -> [UInt8] {
        var body: [UInt8] = []
        while let line = try await nextLine() {
            body.append(contentsOf: line)
            body.append(UInt8(ascii: "\n"))
        }
        return body
    }

    public func cancel() { loop.cancel(transfer) }
}
