extension Array where Element: Sendable {
    /// `transform` applied to consecutive slices of the array on the machine's cores at once,
    /// one result per slice, in the slices' order. With fewer than `minimumSlice` elements
    /// per core (or one core) the whole array is one slice, transformed on the caller's thread.
    /// Every slice runs with the caller's `RequestCancellation`.
    public func transformInParallelSlices<Result: Sendable>(
        minimumSlice: Int, _ transform: @Sendable (ArraySlice<Element>) -> Result) -> [Result] {
        let slices = Swift.max(1, Swift.min(Cores.online, count / Swift.max(1, minimumSlice)))
        if slices == 1 { return [transform(self[...])] }
        // The chunks are all done before this returns: the transform does not outlive the call.
        return withoutActuallyEscaping(transform) { transform in
            ParallelChunks(self, chunkSize: (count + slices - 1) / slices) { [transform($0)] }.all
        }
    }
}
