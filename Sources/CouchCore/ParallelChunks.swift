import Dispatch
import Glibc
import Synchronization

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
        /// the caller's own); `background` holds the workers' work; `transformNext` transforms
        /// the next chunk nobody has taken, false once every one is taken.
        case inFlight(results: Locked<[[Result]?]>, ready: [DispatchSemaphore], background: DispatchGroup,
                      transformNext: @Sendable () -> Bool)
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
        let next = Atomic<Int>(1)
        let transformNext: @Sendable () -> Bool = {
            let chunk = next.add(1, ordering: .relaxed).oldValue
            guard chunk < count else { return false }
            let result = RequestCancellation.withCurrent(cancellation) {
                transform(elements[(chunk * size)..<Swift.min(elements.count, (chunk + 1) * size)])
            }
            results.withLock { $0[chunk] = result }
            ready[chunk].signal()
            return true
        }
        // The rest first, so the cores start on them while this thread does the first: one
        // worker fewer than the cores, each taking the next chunk in order. The consumer keeps
        // a core of its own, and takes chunks itself when the one it needs is not done (with a
        // worker on every core, a writer consuming a `_bulk_docs` batch shared its core with
        // them; with the consumer only waiting, it waited for the one worker of two cores).
        for _ in 0..<Swift.min(count - 1, Swift.max(1, Cores.online - 1)) {
            DispatchQueue.global().async(group: background) {
                while transformNext() {}
            }
        }
        let first = transform(elements[0..<Swift.min(elements.count, size)])
        results.withLock { $0[0] = first }
        chunks = .inFlight(results: results, ready: ready, background: background, transformNext: transformNext)
    }

    /// Calls `body` with each result in order, each as soon as its chunk is done.
    public func forEach(_ body: (Result) throws -> Void) rethrows {
        switch chunks {
        case .done(let all):
            for result in all { try body(result) }
        case .inFlight(let results, let ready, _, let transformNext):
            for chunk in ready.indices {
                if chunk > 0 {
                    while results.withLock({ $0[chunk] == nil }), transformNext() {}
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
        case .inFlight(let results, _, let background, let transformNext):
            while transformNext() {}
            background.wait()
            return results.withLock { $0.flatMap { $0! } }
        }
    }
}

/// The cores work is spread over, read once (each read of it is a read of /sys).
enum Cores {
    static let online = Swift.max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
}
