import CouchCore
import Dispatch
import Foundation
import Testing

@Suite struct ParallelChunksTests {
    @Test func resultsComeInOrderOnceEach() {
        let numbers = Array(0..<1_001)
        let chunks = ParallelChunks(numbers, chunkSize: 64) { slice in slice.map { $0 * 2 } }
        var seen: [Int] = []
        chunks.forEach { seen.append($0) }
        #expect(seen == numbers.map { $0 * 2 })
        #expect(chunks.all == numbers.map { $0 * 2 })
        var again: [Int] = []
        chunks.forEach { again.append($0) }
        #expect(again == seen)
    }

    @Test func smallAndEmptyArraysAreDoneAtOnce() {
        #expect(ParallelChunks([1, 2, 3], chunkSize: 64) { Array($0) }.all == [1, 2, 3])
        let empty = ParallelChunks([Int](), chunkSize: 64) { Array($0) }
        var seen = 0
        empty.forEach { _ in seen += 1 }
        #expect(seen == 0 && empty.all.isEmpty)
    }

    /// The consumer has the first chunk's results while the last chunk is still being
    /// transformed: here the last waits until the consumer has seen the first (it would wait
    /// out its 10 s if the results came only once all were done).
    @Test func theFirstChunkIsTakenBeforeTheLastIsDone() {
        guard ProcessInfo.processInfo.activeProcessorCount > 1 else { return }
        let firstSeen = DispatchSemaphore(value: 0)
        let waitedOut = Locked(false)
        let chunks = ParallelChunks(Array(0..<400), chunkSize: 100) { slice in
            if slice.startIndex == 300, firstSeen.wait(timeout: .now() + 10) == .timedOut {
                waitedOut.withLock { $0 = true }
            }
            return Array(slice)
        }
        var seen: [Int] = []
        chunks.forEach { number in
            if number == 0 { firstSeen.signal() }
            seen.append(number)
        }
        #expect(seen == Array(0..<400))
        #expect(waitedOut.withLock { $0 } == false)
    }

    /// The consumer, waiting for a chunk, transforms the chunks no worker has taken yet: here
    /// each chunk a worker takes waits until the consumer has transformed one (it would wait
    /// out its 10 s if the consumer only waited).
    @Test func theConsumerTransformsChunksNoWorkerHasTaken() {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        guard cores > 1 else { return }
        let consumer = pthread_self()
        let consumerTransformed = DispatchSemaphore(value: 0)
        let waitedOut = Locked(false)
        let numbers = Array(0..<(100 * (cores + 2)))
        let chunks = ParallelChunks(numbers, chunkSize: 100) { slice in
            if pthread_equal(pthread_self(), consumer) != 0 {
                if slice.startIndex > 0 { consumerTransformed.signal() }
            } else {
                if consumerTransformed.wait(timeout: .now() + 10) == .timedOut { waitedOut.withLock { $0 = true } }
                consumerTransformed.signal()  // for the next worker
            }
            return Array(slice)
        }
        var seen: [Int] = []
        chunks.forEach { seen.append($0) }
        #expect(seen == numbers)
        #expect(waitedOut.withLock { $0 } == false)
    }
}
