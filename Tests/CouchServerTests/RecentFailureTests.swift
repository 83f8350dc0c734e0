import CouchCore
import Foundation
import Testing
@testable import CouchServer

/// After one failed fetch of an on-demand body, an answer asks the source nothing more while
/// the failure is recent, then tries again (a continuous feed lives for hours).
@Suite struct RecentFailureTests {
    /// A clock the test moves by hand.
    final class Clock: @unchecked Sendable {
        private let lock = NSLock()
        private var nanoseconds: UInt64 = 1_000
        var now: UInt64 { lock.withLock { nanoseconds } }
        func advance(seconds: Double) { lock.withLock { nanoseconds += UInt64(seconds * 1e9) } }
    }

    @Test func aFailureIsRememberedForItsLifetimeThenForgotten() {
        let clock = Clock()
        let failure = RecentFailure(seconds: 30, now: { clock.now })
        #expect(failure.error == nil)
        failure.record(CouchError.notFound("first"))
        clock.advance(seconds: 29.9)
        #expect((failure.error as? CouchError)?.reason == "first")
        clock.advance(seconds: 0.2)
        #expect(failure.error == nil, "30 s after it, the next fetch is tried again")
        failure.record(CouchError.notFound("second"))
        #expect((failure.error as? CouchError)?.reason == "second")
    }
}
