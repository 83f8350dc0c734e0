import Dispatch
import Glibc

/// `transform` applied to consecutive chunks of an array, the first on the caller's thread
/// and the others on the machine's cores in the background; the results are taken in order,
/// each chunk's as soon as it is done.
///
/// Why: a consumer that must go in order (the single writer applying a `_bulk_docs` batch)
/// need not wait for the whole array to be transformed: it works through the first chunks
/// while the cores transform the rest.
public final class ParallelChunks<Result: Sendable>: @unchecked Sendable {
    private enum Chunks {
        /// One chunk, transformed at once (every single-document write comes this way).
        case done([Result])
        /// `ready` is signalled once per chunk when its results are in (not for the first,
        /// the caller's own); `background` holds the others' work.
        case inFlight(results: Locked<[[Result]?]>, ready: [DispatchSemaphore], background: DispatchGroup)
    }

    private let chunks: Chunks

    /// With one chunk's worth or fewer (or one core), everything is transformed here and now.
    public init<Element: Sendable>(_ elements: [Element], chunkSize: Int,
                                   transform: @escaping @Sendable (ArraySlice<Element>) -> [Result]) {
        let size = Swift.max(1, chunkSize)
        let count = Cores.online > 1 ? (elements.count + size - 1) / size : 1
        guard count > 1 else {
            chunks = .done(transform(elements[...]))
            return
        }
        let results = Locked([[Result]?](repeating: nil, count: count))
        let ready = (0..<count).map { _ in DispatchSemaphore(value: 0) }
        let background = DispatchGroup()
        let cancellation = RequestCancellation.current
        // The rest first, so the cores start on them while this thread does the first.
        DispatchQueue.global().async(group: background) {
            DispatchQueue.concurrentPerform(iterations: count - 1) { offset in
                let chunk = offset + 1
                let result = RequestCancellation.withCurrent(cancellation) {
                    transform(elements[(chunk * size)..<Swift.min(elements.count, (chunk + 1) * size)])
                }
                results.withLock { $0[chunk] = result }
                ready[chunk].signal()
            }
        }
        let first = transform(elements[0..<Swift.min(elements.count, size)])
        results.withLock { $0[0] = first }
        chunks = .inFlight(results: results, ready: ready, background: background)
    }

    /// Calls `body` with each result in order, each as soon as its chunk is done.
    public func forEach(_ body: (Result) throws -> Void) rethrows {
        switch chunks {
        case .done(let all):
            for result in all { try body(result) }
        case .inFlight(let results, let ready, _):
            for chunk in ready.indices {
                if chunk > 0 {
                    ready[chunk].wait()
                    ready[chunk].signal()  // for whoever looks again
                }
                for result in results.withLock({ $0[chunk]! }) { try body(result) }
            }
        }
    }

    /// Every result in order, once every chunk is done.
    public var all: [Result] {
        switch chunks {
        case .done(let all):
            return all
        case .inFlight(let results, _, let background):
            background.wait()
            return results.withLock { $0.flatMap { $0! } }
        }
    }
}

/// The cores work is spread over, read once (each read of it is a read of /sys).
enum Cores {
    static let online = Swift.max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
}
