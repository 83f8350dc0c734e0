/// The life of one replication job as a value: events in, actions out, no I/O. The job
/// (`Replication`) feeds it what happened and performs what it returns, so every rule
/// about states, retries and endings lives here and is tested without a network.
///
/// States, as Couchbase Lite named them and `_active_tasks` shows them:
/// - `active`: a session is running and has work (opening peers, copying changes);
/// - `idle`: a continuous session has copied everything and waits for new changes;
/// - `offline`: a peer could not be reached; a new session starts after a back-off that
///   stops growing at a few seconds (`offlineProbeMilliseconds`), so a peer that comes back
///   after an outage of any length is noticed within seconds; the job stays `offline`
///   while such a session tries to reach its peers, so its status does not flicker;
/// - `crashing`: a session failed otherwise (5xx after retries, reset, checkpoint
///   failure); a new session starts after a back-off;
/// - `stopped`: not running — before the start, and for good once finished.
///
/// Failures that can heal are retried forever, with exponential back-off, once the job has
/// reached its peers (a `_replicator` job, which nobody waits on, from the start): a peer
/// unreachable, failing (5xx), rate-limiting (429), a checkpoint that could not be written,
/// and — as CouchDB 3's scheduler keeps such jobs `crashing` — a database that is missing
/// (deleted, perhaps to be created again). A one-shot `_replicate` that cannot reach its peers
/// at all fails, as CouchDB's does. What cannot heal (`unauthorized` after fresh credentials,
/// `forbidden`, a filter that does not exist, a peer's refusal) ends the job.
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
        /// A failure found outside the job's sessions (a local database deleted under it):
        /// ends the job, or (when it can heal) stops the session and retries later.
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
    /// Whether a session runs (also while `offline`: it probes the peers).
    private var sessionRunning = false
    /// The longest wait between two attempts to reach a peer that could not be reached:
    /// an attempt costs a `GET` of each database, and an outage may last hours.
    public static let offlineProbeMilliseconds = 5_000

    /// Whether transient failures are retried before the job ever reached its peers (jobs
    /// of `_replicator` documents, which nobody waits on); a one-shot `_replicate` fails.
    public let retriesBeforeOpening: Bool

    public init(continuous: Bool, backoff: Backoff = .job, retriesBeforeOpening: Bool = false) {
        self.continuous = continuous
        self.backoff = backoff
        self.retriesBeforeOpening = retriesBeforeOpening
    }

    public mutating func handle(_ event: Event) -> [Action] {
        guard !isFinished else { return [] }
        switch event {
        case .start:
            guard state == .stopped else { return [] }
            state = .active
            sessionRunning = true
            return [.startSession]

        case .sessionOpened:
            guard sessionRunning else { return [] }
            hasOpened = true
            if state == .offline { state = .active }
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
            guard heals(error) else { return finish(.failed(error)) }
            sessionRunning = false
            let wait = backoff.next()
            if error.kind == .peerUnreachable {
                state = .offline
                return [.scheduleRetry(afterMilliseconds: min(wait, Self.offlineProbeMilliseconds))]
            }
            state = .crashing
            return [.scheduleRetry(afterMilliseconds: wait)]

        case .retryTimerFired:
            guard !sessionRunning, state == .offline || state == .crashing else { return [] }
            // Offline stays offline until the new session reaches the peers.
            if state == .crashing { state = .active }
            sessionRunning = true
            return [.startSession]

        case .stop:
            return stopActions() + finish(.cancelled)

        case .fail(let error):
            lastError = error
            guard heals(error) else { return stopActions() + finish(.failed(error)) }
            // Already waiting for a retry: that retry will meet the failure, or not.
            guard sessionRunning else { return [] }
            sessionRunning = false
            state = .crashing
            return [.stopSession, .scheduleRetry(afterMilliseconds: backoff.next())]
        }
    }

    /// Whether the job retries after `error` rather than end.
    private func heals(_ error: ReplicationError) -> Bool {
        guard continuous || hasOpened || retriesBeforeOpening else { return false }
        if error.isTransient { return true }
        // A missing database may be created (again): a job that ran, or one nobody waits on.
        return error.kind == .databaseNotFound && (retriesBeforeOpening || hasOpened)
    }

    /// A running session is stopped; a scheduled retry is cancelled.
    private func stopActions() -> [Action] {
        if sessionRunning { return [.stopSession] }
        return state == .offline || state == .crashing ? [.cancelRetry] : []
    }

    private mutating func finish(_ outcome: Outcome) -> [Action] {
        state = .stopped
        sessionRunning = false
        isFinished = true
        return [.finish(outcome)]
    }
}
