/// The life of one replication job as a value: events in, actions out, no I/O. The job
/// (`Replication`) feeds it what happened and performs what it returns, so every rule
/// about states, retries and endings lives here and is tested without a network.
///
/// States, as Couchbase Lite named them and `_active_tasks` shows them:
/// - `active`: a session is running and has work (opening peers, copying changes);
/// - `idle`: a continuous session has copied everything and waits for new changes;
/// - `offline`: a peer could not be reached; a new session starts after a back-off;
/// - `crashing`: a session failed otherwise (5xx after retries, reset, checkpoint
///   failure); a new session starts after a back-off;
/// - `stopped`: not running — before the start, and for good once finished.
///
/// Transient failures are retried forever, with exponential back-off, once the job has
/// reached its peers; a one-shot replication that cannot reach them at all fails, as
/// CouchDB's `_replicate` does. Permanent failures (`db_not_found`, `unauthorized`, ...)
/// end the job.
public struct ReplicationStateMachine: Sendable {
    public enum State: String, Sendable {
        case stopped, offline, idle, active, crashing
    }

    public enum Event: Sendable, Equatable {
        case start
        /// The session reached both peers and is copying.
        case sessionOpened
        /// A continuous session has nothing left to do for now.
        case caughtUp
        /// New changes arrived after `caughtUp`.
        case changesArrived
        /// Changes were written: the job is healthy again.
        case progressed
        /// A one-shot session copied everything and wrote its last checkpoint.
        case sessionCompleted
        case sessionFailed(ReplicationError)
        case retryTimerFired
        case stop
        /// Ends the job with a permanent failure found outside its sessions (a local
        /// database deleted under it).
        case fail(ReplicationError)
    }

    public enum Outcome: Sendable, Equatable {
        case completed
        case failed(ReplicationError)
        case cancelled
    }

    public enum Action: Sendable, Equatable {
        case startSession
        /// Stop the running session (it writes a last checkpoint).
        case stopSession
        case scheduleRetry(afterMilliseconds: Int)
        case cancelRetry
        case finish(Outcome)
    }

    public private(set) var state = State.stopped
    public private(set) var lastError: ReplicationError?
    public private(set) var isFinished = false
    public let continuous: Bool
    public private(set) var backoff: Backoff
    /// Whether any session of this job has reached both peers.
    public private(set) var hasOpened = false

    /// Whether transient failures are retried before the job ever reached its peers (jobs
    /// of `_replicator` documents, which nobody waits on); a one-shot `_replicate` fails.
    public let retriesBeforeOpening: Bool

    public init(continuous: Bool, backoff: Backoff = .job, retriesBeforeOpening: Bool = false) {
        self.continuous = continuous
        self.backoff = backoff
        self.retriesBeforeOpening = retriesBeforeOpening
    }

    private var sessionRunning: Bool { state == .active || state == .idle }

    public mutating func handle(_ event: Event) -> [Action] {
        guard !isFinished else { return [] }
        switch event {
        case .start:
            guard state == .stopped else { return [] }
            state = .active
            return [.startSession]

        case .sessionOpened:
            guard sessionRunning else { return [] }
            hasOpened = true
            return []

        case .caughtUp:
            guard continuous, state == .active else { return [] }
            state = .idle
            backoff.reset()
            lastError = nil
            return []

        case .changesArrived:
            guard state == .idle else { return [] }
            state = .active
            return []

        case .progressed:
            guard sessionRunning else { return [] }
            backoff.reset()
            return []

        case .sessionCompleted:
            guard sessionRunning else { return [] }
            return finish(.completed)

        case .sessionFailed(let error):
            guard sessionRunning else { return [] }
            lastError = error
            guard error.isTransient, continuous || hasOpened || retriesBeforeOpening else { return finish(.failed(error)) }
            state = error.kind == .peerUnreachable ? .offline : .crashing
            return [.scheduleRetry(afterMilliseconds: backoff.next())]

        case .retryTimerFired:
            guard state == .offline || state == .crashing else { return [] }
            state = .active
            return [.startSession]

        case .stop:
            var actions: [Action] = []
            if sessionRunning { actions.append(.stopSession) }
            if state == .offline || state == .crashing { actions.append(.cancelRetry) }
            return actions + finish(.cancelled)

        case .fail(let error):
            lastError = error
            var actions: [Action] = []
            if sessionRunning { actions.append(.stopSession) }
            if state == .offline || state == .crashing { actions.append(.cancelRetry) }
            return actions + finish(.failed(error))
        }
    }

    private mutating func finish(_ outcome: Outcome) -> [Action] {
        state = .stopped
        isFinished = true
        return [.finish(outcome)]
    }
}
