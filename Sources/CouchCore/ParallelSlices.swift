import Dispatch
import Glibc

extension Array where Element: Sendable {
    /// `transform` applied to consecutive slices of the array on the machine's cores at once,
    /// one result per slice, in the slices' order. With fewer than `minimumSlice` elements
    /// per core (or one core) the whole array is one slice, transformed on the caller's thread.
    /// Every slice runs with the caller's `RequestCancellation`.
    public func transformInParallelSlices<Result: Sendable>(
        minimumSlice: Int, _ transform: @Sendable (ArraySlice<Element>) -> Result) -> [Result] {
        // Too few for two slices: no need to ask how many cores (a read of /sys each time).
        guard count >= 2 * Swift.max(1, minimumSlice) else { return [transform(self[...])] }
        let cores = Swift.max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        let slices = Swift.max(1, Swift.min(cores, count / Swift.max(1, minimumSlice)))
        if slices == 1 { return [transform(self[...])] }
        let size = (count + slices - 1) / slices
        let results = Locked([Result?](repeating: nil, count: slices))
        let cancellation = RequestCancellation.current
        DispatchQueue.concurrentPerform(iterations: slices) { slice in
            let result = RequestCancellation.withCurrent(cancellation) {
                transform(self[(slice * size)..<Swift.min(count, (slice + 1) * size)])
            }
            results.withLock { $0[slice] = result }
        }
        return results.withLock { $0.map { $0! } }
    }
}
