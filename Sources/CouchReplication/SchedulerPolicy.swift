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
    ///
    /// Every job added or finished runs a pass over all of them, so a pass sorts only what it
    /// picks from: ten thousand `_replicator` documents each sorting every job when one
    /// finished spent a quadratic time choosing the next.
    public func reschedule(_ candidates: [Candidate], rotate: Bool) -> Decision {
        var decision = Decision()
        var running = candidates.filter(\.isRunning)
        let waiting = candidates.filter { !$0.isRunning }

        // Too many running: stop continuous jobs first, longest running first.
        let excess = running.count - max(0, maxJobs)
        if excess > 0 {
            running.sort(by: Self.oldestFirst)
            let stoppable = running.filter(\.isContinuous) + running.filter { !$0.isContinuous }
            let stopped = stoppable.prefix(excess).map(\.id)
            decision.stop += stopped
            let stoppedIDs = Set(stopped)
            running.removeAll { stoppedIDs.contains($0.id) }
        }

        // Free slots go to those waiting longest.
        let free = max(0, maxJobs) - running.count
        let started = Self.oldest(min(free, waiting.count), of: waiting)
        decision.start += started.map(\.id)

        // Full and still waiting: rotate the longest-running continuous jobs out.
        if rotate, waiting.count > started.count, running.count + started.count >= maxJobs {
            let startedIDs = Set(decision.start)
            let rotatable = running.filter(\.isContinuous)
            let remaining = waiting.filter { !startedIDs.contains($0.id) }
            let count = min(remaining.count, rotatable.count, max(0, maxChurn))
            decision.stop += Self.oldest(count, of: rotatable).map(\.id)
            decision.start += Self.oldest(count, of: remaining).map(\.id)
        }
        return decision
    }

    private static func oldestFirst(_ a: Candidate, _ b: Candidate) -> Bool {
        a.since == b.since ? a.id < b.id : a.since < b.since
    }

    /// The `count` oldest candidates, oldest first: one scan when a few are wanted (a slot
    /// freed), a sort when many are.
    static func oldest(_ count: Int, of candidates: [Candidate]) -> [Candidate] {
        guard count > 0 else { return [] }
        guard count <= 8 else { return Array(candidates.sorted(by: oldestFirst).prefix(count)) }
        var chosen: [Candidate] = []
        for candidate in candidates {
            guard chosen.count < count || oldestFirst(candidate, chosen[chosen.count - 1]) else { continue }
            let index = chosen.firstIndex { oldestFirst(candidate, $0) } ?? chosen.count
            chosen.insert(candidate, at: index)
            if chosen.count > count { chosen.removeLast() }
        }
        return chosen
    }
}
