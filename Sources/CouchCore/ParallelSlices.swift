import Dispatch
import Glibc

extension Array where Element: Sendable {
    /// `transform` applied to consecutive slices of the array on the machine's cores at once,
    /// one result per slice, in the slices' order. With fewer than `minimumSlice` elements
    /// per core (or one core) the whole array is one slice, transformed on the caller's thread.
    public func transformInParallelSlices<Result: Sendable>(
        minimumSlice: Int, _ transform: @Sendable (ArraySlice<Element>) -> Result) -> [Result] {
        let cores = Swift.max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        let slices = Swift.max(1, Swift.min(cores, count / Swift.max(1, minimumSlice)))
        if slices == 1 { return [transform(self[...])] }
        let size = (count + slices - 1) / slices
        let results = SliceResults<Result>(count: slices)
        DispatchQueue.concurrentPerform(iterations: slices) { slice in
            results.set(slice, transform(self[(slice * size)..<Swift.min(count, (slice + 1) * size)]))
        }
        return results.values.map { $0! }
    }
}

/// Each slot written by one slice's thread; read after all of them have finished.
private final class SliceResults<Value>: @unchecked Sendable {
    private var lock = pthread_mutex_t()
    private(set) var values: [Value?]

    init(count: Int) {
        values = Array(repeating: nil, count: count)
        pthread_mutex_init(&lock, nil)
    }

    deinit { pthread_mutex_destroy(&lock) }

    func set(_ index: Int, _ value: Value) {
        pthread_mutex_lock(&lock)
        values[index] = value
        pthread_mutex_unlock(&lock)
    }
}
