import CouchCore
import Foundation
import Logging

/// A replication job: runs sessions, and performs what its `ReplicationStateMachine`
/// decides — restart after a back-off, stop, finish. Its `outcome`, once finished, is
/// what `POST /_replicate` answers for a one-shot replication.
public final class Replication: @unchecked Sendable {
    public enum Outcome: Sendable {
        /// The last checkpoint's log (CouchDB's one-shot result, without `ok`).
        case completed(JSONObject)
        case failed(ReplicationError)
        case cancelled
    }

    public let id: ReplicationID
    public let settings: ReplicationSettings
    public let source: DatabaseEndpoint
    public let target: DatabaseEndpoint
    public let startedOn = Date()
    let progress = ReplicationProgress()
    private let logger: Logger

    private let lock = NSLock()
    private var machine: ReplicationStateMachine
    private var session: ReplicationSession?
    private var sessionTask: Task<Void, Never>?
    private var sessionNumber = 0
    private var retryTask: Task<Void, Never>?
    private var lastResult: JSONObject?
    private var outcomeValue: Outcome?
    private var waiters: [@Sendable (Outcome) -> Void] = []
    /// Called once when the job has finished (the manager forgets it).
    var onFinish: (@Sendable (Replication) -> Void)?

    init(id: ReplicationID, settings: ReplicationSettings, source: DatabaseEndpoint, target: DatabaseEndpoint,
         backoff: Backoff = .job, logger: Logger) {
        self.id = id
        self.settings = settings
        self.source = source
        self.target = target
        self.logger = logger
        machine = ReplicationStateMachine(continuous: settings.continuous, backoff: backoff,
                                          retriesBeforeOpening: settings.isPersistent)
        for endpoint in [source, target] {
            (endpoint as? RemoteEndpoint)?.observeFailures { [weak self] failure in self?.noteRequest(failure) }
        }
    }

    /// A request to a peer failing now (nil once one succeeds again): shown at once, before
    /// its retries run out and the session fails.
    private var failingRequest: ReplicationError?

    private func noteRequest(_ failure: ReplicationError?) {
        lock.lock()
        let before = visibleState
        failingRequest = failure
        let after = visibleState
        let observer = stateObserver
        lock.unlock()
        // Seen as offline or crashing from the first failed request (and back once one
        // succeeds): followers hear it then, not once the retries have run out.
        if before != after { observer?(self, after) }
    }

    /// The state `status` shows: the machine's, or `offline`/`crashing` while a request fails.
    /// The lock is held.
    private var visibleState: ReplicationStateMachine.State {
        let state = machine.state
        guard let failingRequest, state == .active || state == .idle else { return state }
        return failingRequest.kind == .peerUnreachable ? .offline : .crashing
    }

    /// Called (on the thread that made it) when the job has written changes, at most every
    /// quarter of a second, and when it has caught up: progress for followers.
    public var onProgress: (@Sendable (Replication) -> Void)? {
        get { lock.withLock { progressObserver } }
        set { lock.withLock { progressObserver = newValue } }
    }
    private var progressObserver: (@Sendable (Replication) -> Void)?
    private var lastProgressReport: UInt64 = 0

    private func reportProgress(force: Bool) {
        let now = DispatchTime.now().uptimeNanoseconds
        let observer: (@Sendable (Replication) -> Void)? = lock.withLock {
            guard force || now &- lastProgressReport >= 250_000_000 else { return nil }
            lastProgressReport = now
            return progressObserver
        }
        observer?(self)
    }

    func start() { handle(.start) }

    /// Stops the job (after a last checkpoint); its outcome becomes `cancelled`.
    public func cancel() { handle(.stop) }

    /// A failure found outside its sessions (its local database was deleted): the job ends,
    /// or retries later if the failure can heal.
    public func fail(_ error: ReplicationError) { handle(.fail(error)) }

    /// Sessions failed in a row since the job last made progress.
    public var consecutiveFailures: Int {
        lock.withLock { machine.backoff.failures }
    }

    /// Called after each change of state (on the thread that caused it), with the new state.
    public var onStateChange: (@Sendable (Replication, ReplicationStateMachine.State) -> Void)? {
        get { lock.withLock { stateObserver } }
        set { lock.withLock { stateObserver = newValue } }
    }
    private var stateObserver: (@Sendable (Replication, ReplicationStateMachine.State) -> Void)?

    /// The outcome once finished; nil while running.
    public var outcome: Outcome? {
        lock.lock()
        defer { lock.unlock() }
        return outcomeValue
    }

    /// Calls `callback` with the outcome when the job finishes (at once if it has).
    public func whenFinished(_ callback: @escaping @Sendable (Outcome) -> Void) {
        lock.lock()
        if let outcomeValue {
            lock.unlock()
            callback(outcomeValue)
            return
        }
        waiters.append(callback)
        lock.unlock()
    }

    public func waitForOutcome() async -> Outcome {
        await withCheckedContinuation { continuation in
            whenFinished { continuation.resume(returning: $0) }
        }
    }

    public var status: ReplicationStatus {
        lock.lock()
        let state = visibleState
        let lastError = state == machine.state ? machine.lastError : failingRequest
        lock.unlock()
        let snapshot = progress.snapshot
        return ReplicationStatus(
            replicationID: id.jobID, source: source.displayName, target: target.displayName,
            continuous: settings.continuous, state: state, statistics: snapshot.statistics,
            changesPending: snapshot.changesPending, checkpointedSourceSequence: snapshot.checkpointedSequence,
            sourceSequence: snapshot.sourceSequence, throughSequence: snapshot.throughSequence,
            checkpointIntervalMilliseconds: settings.checkpointIntervalMilliseconds,
            startedOn: startedOn, updatedOn: snapshot.updatedOn, lastError: lastError)
    }

    // MARK: - Events and actions

    private func handle(_ event: ReplicationStateMachine.Event, session number: Int? = nil) {
        lock.lock()
        if let number, number != sessionNumber {
            lock.unlock()
            return
        }
        let before = visibleState
        let actions = machine.handle(event)
        let after = visibleState
        let observer = stateObserver
        lock.unlock()
        if before != after { observer?(self, after) }
        perform(actions)
    }

    private func perform(_ actions: [ReplicationStateMachine.Action]) {
        for (index, action) in actions.enumerated() {
            switch action {
            case .startSession:
                startSession()
            case .stopSession:
                // The rest waits until the session has written its last checkpoint.
                lock.lock()
                let (session, task) = (self.session, sessionTask)
                lock.unlock()
                session?.stop()
                let rest = Array(actions[(index + 1)...])
                ReplicationTasks.task {
                    await task?.value
                    self.perform(rest)
                }
                return
            case .scheduleRetry(let milliseconds):
                logger.notice("replication \(id.jobID) restarts in \(milliseconds) ms")
                let task = ReplicationTasks.task { [weak self] in
                    try? await Task.sleep(nanoseconds: UInt64(milliseconds) * 1_000_000)
                    if Task.isCancelled { return }
                    self?.handle(.retryTimerFired)
                }
                lock.lock()
                retryTask = task
                lock.unlock()
            case .cancelRetry:
                lock.lock()
                let task = retryTask
                retryTask = nil
                lock.unlock()
                task?.cancel()
            case .finish(let result):
                finish(result)
            }
        }
    }

    private func startSession() {
        lock.lock()
        sessionNumber += 1
        let number = sessionNumber
        let session = ReplicationSession(
            replicationID: id, settings: settings, source: source, target: target, progress: progress, logger: logger,
            report: { [weak self] report in
                switch report {
                case .opened: self?.handle(.sessionOpened, session: number)
                case .caughtUp:
                    self?.handle(.caughtUp, session: number)
                    self?.reportProgress(force: true)
                case .changesArrived: self?.handle(.changesArrived, session: number)
                case .progressed:
                    self?.handle(.progressed, session: number)
                    self?.reportProgress(force: false)
                }
            })
        self.session = session
        sessionTask = ReplicationTasks.task {
            let outcome = await session.run()
            self.sessionEnded(outcome, session: number)
        }
        lock.unlock()
    }

    private func sessionEnded(_ outcome: ReplicationSession.Outcome, session number: Int) {
        switch outcome {
        case .completed(let result):
            lock.lock()
            lastResult = result
            lock.unlock()
            handle(.sessionCompleted, session: number)
        case .failed(let error):
            logger.error("replication \(id.jobID) (\(source.displayName) -> \(target.displayName)) failed: \(error)")
            handle(.sessionFailed(error), session: number)
        case .stopped:
            break
        }
    }

    private func finish(_ result: ReplicationStateMachine.Outcome) {
        lock.lock()
        let outcome: Outcome
        switch result {
        case .completed: outcome = .completed(lastResult ?? ["no_changes": true])
        case .failed(let error): outcome = .failed(error)
        case .cancelled: outcome = .cancelled
        }
        outcomeValue = outcome
        let waiting = waiters
        waiters = []
        let onFinish = self.onFinish
        lock.unlock()
        logger.info("replication \(id.jobID) finished: \(result)")
        onFinish?(self)
        waiting.forEach { $0(outcome) }
    }
}
