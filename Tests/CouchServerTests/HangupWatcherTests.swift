@testable import CouchServer
import Foundation
import Synchronization
import Testing

/// A hang-up is reported to the connection that hung up, never to the one that took its
/// descriptor number after it: the watcher may hold an event for a descriptor that has since
/// been unwatched, closed and reused (a feed's client leaves while its answer is delivered,
/// and the next suspended request gets the same number).
@Suite struct HangupWatcherTests {
    @Test func aHangUpIsNeverReportedToTheConnectionThatTookItsDescriptor() throws {
        let watcher = HangupWatcher()
        defer { watcher.stop() }
        let wrongReports = Atomic<Int>(0)
        var reused = 0
        for _ in 0..<20_000 {
            var first: [Int32] = [0, 0]
            try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &first) == 0)
            watcher.watch(first[0]) {}
            close(first[1])   // its client hangs up: an event for first[0] is on its way
            watcher.unwatch(first[0])   // and its connection ends before the watcher gets to it
            close(first[0])
            var second: [Int32] = [0, 0]
            try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &second) == 0)
            if second[0] == first[0] { reused += 1 }
            // Its client is still there: no hang-up to report.
            watcher.watch(second[0]) { wrongReports.add(1, ordering: .relaxed) }
            watcher.unwatch(second[0])
            close(second[0])
            close(second[1])
        }
        #expect(reused > 2_000, "the descriptor numbers were reused (other tests open descriptors too)")
        #expect(wrongReports.load(ordering: .relaxed) == 0)

        // A real hang-up is still reported, once.
        var pair: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]) }
        let reports = Atomic<Int>(0)
        watcher.watch(pair[0]) { reports.add(1, ordering: .relaxed) }
        close(pair[1])
        let deadline = Date().addingTimeInterval(10)
        while reports.load(ordering: .relaxed) == 0, Date() < deadline { usleep(1_000) }
        usleep(200_000)
        #expect(reports.load(ordering: .relaxed) == 1)
    }
}
