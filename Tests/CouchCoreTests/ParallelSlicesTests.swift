import CouchCore
import Foundation
import Testing

@Suite struct ParallelSlicesTests {
    @Test func slicesCoverTheArrayInOrder() {
        let numbers = Array(0..<1_001)
        let slices = numbers.transformInParallelSlices(minimumSlice: 10) { Array($0) }
        #expect(slices.flatMap { $0 } == numbers)
        #expect(slices.count == min(ProcessInfo.processInfo.activeProcessorCount, 100))
        #expect(numbers.transformInParallelSlices(minimumSlice: 10) { $0.map { $0 * 2 } }.flatMap { $0 } == numbers.map { $0 * 2 })
    }

    @Test func aSmallArrayIsOneSliceAndAnEmptyOneToo() {
        #expect([1, 2, 3].transformInParallelSlices(minimumSlice: 64) { Array($0) } == [[1, 2, 3]])
        #expect([Int]().transformInParallelSlices(minimumSlice: 64) { $0.count } == [0])
    }
}
