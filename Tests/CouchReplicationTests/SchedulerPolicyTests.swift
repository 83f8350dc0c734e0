import CouchReplication
import Foundation
import Testing

/// The scheduler's rules alone, without I/O (after CouchDB's scheduler tests).
@Suite struct SchedulerPolicyTests {
    func job(_ n: Int, running: Bool, continuous: Bool = true) -> SchedulerPolicy.Candidate {
        .init(id: "job\(n)", isRunning: running, isContinuous: continuous, since: Date(timeIntervalSince1970: Double(n)))
    }

    @Test func waitingJobsStartInFreeSlotsOldestFirst() {
        let policy = SchedulerPolicy(maxJobs: 2, maxChurn: 20)
        let decision = policy.reschedule([job(7, running: false), job(2, running: false), job(5, running: false)], rotate: false)
        #expect(decision.start == ["job2", "job5"])
        #expect(decision.stop.isEmpty)
    }

    @Test func noJobStartsWhenMaxJobsIsZero() {
        #expect(SchedulerPolicy(maxJobs: 0).reschedule([job(1, running: false)], rotate: true) == .init())
    }

    @Test func excessStopsContinuousJobsFirstLongestRunningFirst() {
        let policy = SchedulerPolicy(maxJobs: 1, maxChurn: 20)
        let decision = policy.reschedule([job(1, running: true, continuous: false), job(3, running: true), job(2, running: true)],
                                         rotate: false)
        #expect(decision.stop == ["job2", "job3"])
        #expect(decision.start.isEmpty)
    }

    @Test func fullSchedulerRotatesAtMostMaxChurnContinuousJobs() {
        let policy = SchedulerPolicy(maxJobs: 2, maxChurn: 1)
        let jobs = [job(1, running: false), job(2, running: true), job(3, running: false), job(4, running: true)]
        #expect(policy.reschedule(jobs, rotate: false) == .init(), "only the periodic pass rotates")
        let decision = policy.reschedule(jobs, rotate: true)
        #expect(decision.stop == ["job2"])
        #expect(decision.start == ["job1"])
    }

    @Test func oneShotJobsAreNeverRotatedOut() {
        let policy = SchedulerPolicy(maxJobs: 1, maxChurn: 5)
        let decision = policy.reschedule([job(1, running: true, continuous: false), job(2, running: false)], rotate: true)
        #expect(decision == .init())
    }

    @Test func amongThousandsWaitingTheOldestStartFirst() {
        var generator = SystemRandomNumberGenerator()
        let waiting = (1...2_000).map { job($0, running: false) }.shuffled(using: &generator)
        for slots in [1, 3, 8, 9, 20] {
            let decision = SchedulerPolicy(maxJobs: slots).reschedule(waiting, rotate: false)
            #expect(decision.start == (1...slots).map { "job\($0)" })
        }
        let running = (2_001...2_500).map { job($0, running: true) }
        let rotated = SchedulerPolicy(maxJobs: 500, maxChurn: 20).reschedule((waiting + running).shuffled(using: &generator), rotate: true)
        #expect(rotated.stop == (2_001...2_020).map { "job\($0)" })
        #expect(rotated.start == (1...20).map { "job\($0)" })
    }

    @Test func nothingStopsWhileSlotsAreFree() {
        let policy = SchedulerPolicy(maxJobs: 3, maxChurn: 2)
        let decision = policy.reschedule([job(1, running: true), job(2, running: false)], rotate: true)
        #expect(decision.start == ["job2"])
        #expect(decision.stop.isEmpty)
    }
}
