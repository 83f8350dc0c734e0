import Foundation

/// Which jobs run, as a value: the scheduler hands it every job it could run and the
/// limits of `[replicator]`, and gets back which to start and which to stop. No I/O, so
/// the rules are tested alone (after CouchDB's `couch_replicator_scheduler`):
/// - at most `maxJobs` run; beyond that the excess stops, continuous jobs first, those
///   running longest first (a one-shot job is never stopped for another);
/// - free slots go to waiting jobs, those waiting longest first;
/// - when every slot is taken and jobs wait, up to `maxChurn` continuous jobs that have
///   run longest make way for as many waiting ones (each `interval`), so every job
///   makes progress even with more jobs than slots.
public struct SchedulerPolicy: Sendable, Equatable {
    public var maxJobs: Int
    public var maxChurn: Int

    public init(maxJobs: Int = 500, maxChurn: Int = 20) {
        self.maxJobs = maxJobs
        self.maxChurn = maxChurn
    }

    public struct Candidate: Sendable, Equatable {
        public let id: String
        public let isRunning: Bool
        public let isContinuous: Bool
        /// When it last started (running jobs) or began waiting (waiting ones).
        public let since: Date

        public init(id: String, isRunning: Bool, isContinuous: Bool, since: Date) {
            self.id = id
            self.isRunning = isRunning
            self.isContinuous = isContinuous
            self.since = since
        }
    }

    public struct Decision: Sendable, Equatable {
        public var start: [String] = []
        public var stop: [String] = []
        public init(start: [String] = [], stop: [String] = []) {
            self.start = start
            self.stop = stop
        }
    }

    /// `rotate`: whether this is the periodic pass (`interval`), the only one that churns.
    public func reschedule(_ candidates: [Candidate], rotate: Bool) -> Decision {
        var decision = Decision()
        let oldestFirst = { (a: Candidate, b: Candidate) in a.since == b.since ? a.id < b.id : a.since < b.since }
        var running = candidates.filter(\.isRunning).sorted(by: oldestFirst)
        var waiting = candidates.filter { !$0.isRunning }.sorted(by: oldestFirst)

        // Too many running: stop continuous jobs first, longest running first.
        let excess = running.count - max(0, maxJobs)
        if excess > 0 {
            let stoppable = running.filter(\.isContinuous) + running.filter { !$0.isContinuous }
            let stopped = Array(stoppable.prefix(excess))
            decision.stop += stopped.map(\.id)
            running.removeAll { job in stopped.contains { $0.id == job.id } }
        }

        // Free slots go to those waiting longest.
        let free = max(0, maxJobs) - running.count
        if free > 0 {
            let started = Array(waiting.prefix(free))
            decision.start += started.map(\.id)
            waiting.removeFirst(started.count)
            running += started
        }

        // Full and still waiting: rotate the longest-running continuous jobs out.
        if rotate, !waiting.isEmpty, running.count >= maxJobs {
            let rotatable = running.filter { $0.isContinuous && !decision.start.contains($0.id) }
            let count = min(waiting.count, rotatable.count, max(0, maxChurn))
            decision.stop += rotatable.prefix(count).map(\.id)
            decision.start += waiting.prefix(count).map(\.id)
        }
        return decision
    }
}
