import CouchCore
import CouchStore
import Foundation
import Logging

/// Owns every replication job, whichever way it came (`POST /_replicate` or a
/// `_replicator` document): decides which run (`SchedulerPolicy`: `[replicator]
/// max_jobs`, `interval`, `max_churn`), starts and stops their runs through the
/// `ReplicationManager`, records their history, and reports them for `_scheduler/jobs`.
/// A job that fails for a while backs off inside its run (exponentially, see `Backoff`)
/// and shows `crashing`; one whose run ends by itself (completed, failed) leaves the
/// scheduler and its origin is told (a document gets its state written back).
public final class ReplicationScheduler: @unchecked Sendable {
    public struct Configuration: Sendable, Equatable {
        /// `[replicator] max_jobs`: jobs running at once.
        public var maxJobs = 500
        /// `[replicator] interval` (ms): how often waiting jobs are rotated in.
        public var intervalMilliseconds = 60_000
        /// `[replicator] max_churn`: jobs rotated out per interval at most.
        public var maxChurn = 20
        public init() {}
    }

    public enum Origin: Sendable, Equatable {
        case request
        case document(database: DatabaseName, id: DocumentID)
    }

    /// The node's name in CouchDB's `name@host` form, shown as each job's `node`.
    public let nodeName: String

    public let manager: ReplicationManager
    /// The limits in force; `_config` changes them while the server runs, as in CouchDB.
    public var configuration: Configuration {
        get { lock.withLock { settings } }
        set { reconfigure(newValue) }
    }
    private var settings: Configuration
    private let logger = Logger(label: "couchette.scheduler")
    private let lock = NSLock()
    private var jobs: [String: ScheduledJob] = [:]
    private var timer: Task<Void, Never>?
    private var stopped = false
    /// Followers of `_scheduler/jobs?feed=...`, by token.
    private var listeners: [Int: @Sendable (JSONValue) -> Void] = [:]
    private var nextListener = 0

    public init(manager: ReplicationManager, configuration: Configuration = Configuration(),
                nodeName: String = "couchette@127.0.0.1") {
        self.manager = manager
        self.nodeName = nodeName
        settings = configuration
        timer = rotationTimer(every: configuration.intervalMilliseconds)
    }

    deinit { timer?.cancel() }

    private func rotationTimer(every milliseconds: Int) -> Task<Void, Never> {
        let interval = UInt64(max(1, milliseconds)) * 1_000_000
        return ReplicationTasks.task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: interval)
                if Task.isCancelled { return }
                self?.reschedule(rotate: true)
            }
        }
    }

    /// Puts new limits in force at once: a lower `max_jobs` stops the excess runs, a higher
    /// one starts waiting jobs, a new `interval` restarts the rotation timer.
    private func reconfigure(_ configuration: Configuration) {
        lock.lock()
        guard !stopped, configuration != settings else {
            lock.unlock()
            return
        }
        let intervalChanged = configuration.intervalMilliseconds != settings.intervalMilliseconds
        settings = configuration
        if intervalChanged {
            timer?.cancel()
            timer = rotationTimer(every: configuration.intervalMilliseconds)
        }
        lock.unlock()
        reschedule(rotate: false)
    }

    // MARK: - Adding and removing jobs

    /// Adds a job (a `_replicator` document's); it runs when the policy gives it a slot.
    /// `onFinish` hears its outcome if it completes or fails by itself.
    public func add(_ settings: ReplicationSettings, id: ReplicationID, origin: Origin,
                    onFinish: @escaping @Sendable (Replication.Outcome) -> Void) {
        let job = ScheduledJob(node: nodeName, id: id, settings: settings, origin: origin,
                               sourceName: settings.source.displayName, targetName: settings.target.displayName,
                               onFinish: onFinish)
        lock.lock()
        if stopped {
            lock.unlock()
            return
        }
        let replaced = jobs[id.jobID]
        jobs[id.jobID] = job
        lock.unlock()
        if let replaced, let run = replaced.run { stopRun(run) }
        publish(job)
        reschedule(rotate: false)
    }

    /// Starts a `POST /_replicate` job at once (its caller waits on it), or joins the
    /// running job of the same replication.
    public func startNow(_ settings: ReplicationSettings, id: ReplicationID) throws(ReplicationError) -> Replication {
        lock.lock()
        if let existing = jobs[id.jobID], let run = existing.run {
            lock.unlock()
            return run
        }
        lock.unlock()
        let run = try manager.start(settings, id: id)
        lock.lock()
        let job = jobs[id.jobID] ?? ScheduledJob(node: nodeName, id: id, settings: settings, origin: .request,
                                                 sourceName: run.source.displayName, targetName: run.target.displayName,
                                                 onFinish: { _ in })
        jobs[id.jobID] = job
        lock.unlock()
        attach(run, to: job)
        return run
    }

    /// Removes a job (its document was deleted or changed): stops its run, if any. Its last
    /// event says `removed`, or `suspended` when its document suspends it.
    public func remove(jobID: String, suspended: Bool = false) {
        lock.lock()
        let job = jobs.removeValue(forKey: jobID)
        lock.unlock()
        guard let job else { return }
        if let run = job.run { stopRun(run) }
        publish(job, removed: true, as: suspended ? "suspended" : "removed")
        reschedule(rotate: false)
    }

    /// Cancels a job by ID as `POST /_replicate` with `cancel` does; nil if none.
    public func cancel(id: String) -> ReplicationID? {
        let base = ReplicationID.baseID(ofJobID: id)
        lock.lock()
        let job = jobs[id.replacingOccurrences(of: " ", with: "+")] ?? jobs.values.first { $0.id.baseID == base }
        lock.unlock()
        if let job {
            remove(jobID: job.id.jobID)
            return job.id
        }
        return manager.cancel(id: id)?.id
    }

    /// Stops every run (the server is shutting down): documents keep their state, so their
    /// jobs start again, from their checkpoints, when the server does.
    public func shutdown() {
        lock.lock()
        stopped = true
        timer?.cancel()
        let runs = jobs.values.compactMap(\.run)
        jobs = [:]
        lock.unlock()
        runs.forEach(stopRun)
        manager.stopAll()
    }

    // MARK: - Running

    /// Applies the policy: starts and stops runs.
    func reschedule(rotate: Bool) {
        lock.lock()
        guard !stopped else {
            lock.unlock()
            return
        }
        // The key is the job ID, which `ReplicationID.jobID` would build again for each job.
        let candidates = jobs.map { id, job in
            SchedulerPolicy.Candidate(id: id, isRunning: job.run != nil, isContinuous: job.settings.continuous, since: job.since)
        }
        let decision = SchedulerPolicy(maxJobs: settings.maxJobs, maxChurn: settings.maxChurn)
            .reschedule(candidates, rotate: rotate)
        let stopping = decision.stop.compactMap { jobs[$0] }
        let starting = decision.start.compactMap { jobs[$0] }
        for job in stopping {
            job.record("stopped")
            job.since = Date()
        }
        let runsToStop = stopping.compactMap { job -> Replication? in
            let run = job.run
            job.run = nil
            return run
        }
        lock.unlock()
        runsToStop.forEach(stopRun)
        stopping.forEach { publish($0) }
        for job in starting { start(job) }
    }

    private func start(_ job: ScheduledJob) {
        do {
            let run = try manager.start(job.settings, id: job.id)
            attach(run, to: job)
        } catch {
            logger.error("replication \(job.id.jobID) cannot start: \(error)")
            finished(job, run: nil, outcome: .failed(error))
        }
    }

    private func attach(_ run: Replication, to job: ScheduledJob) {
        lock.lock()
        guard jobs[job.id.jobID] === job else {
            lock.unlock()
            return
        }
        job.run = run
        job.startedOn = job.startedOn ?? Date()
        job.since = Date()
        job.record("started")
        lock.unlock()
        run.onStateChange = { [weak self, weak job] run, state in
            guard let self, let job else { return }
            self.stateChanged(job, run: run, state: state)
        }
        run.onProgress = { [weak self, weak job] run in
            guard let self, let job, self.lock.withLock({ job.run === run }) else { return }
            self.publish(job)
        }
        publish(job)
        run.whenFinished { [weak self, weak job] outcome in
            guard let self, let job else { return }
            self.finished(job, run: run, outcome: outcome)
        }
    }

    private func stateChanged(_ job: ScheduledJob, run: Replication, state: ReplicationStateMachine.State) {
        lock.lock()
        guard job.run === run else {
            lock.unlock()
            return
        }
        switch state {
        case .offline, .crashing: job.record("crashed", reason: run.status.lastError?.description)
        case .active, .idle: break
        case .stopped:
            // The run ended: its job's last event (completed, failed, removed) says so.
            lock.unlock()
            return
        }
        lock.unlock()
        publish(job)
    }

    /// A run ended. Completed or failed: the job leaves and its origin is told; cancelled
    /// by us (rotated out, removed, shutting down): nothing more to do.
    private func finished(_ job: ScheduledJob, run: Replication?, outcome: Replication.Outcome) {
        if case .cancelled = outcome { return }
        lock.lock()
        guard run == nil || job.run === run, jobs[job.id.jobID] === job else {
            lock.unlock()
            return
        }
        jobs[job.id.jobID] = nil
        lock.unlock()
        // The last event still carries the run's final progress.
        publish(job, removed: true, outcome: outcome)
        lock.withLock { job.run = nil }
        job.onFinish(outcome)
        reschedule(rotate: false)
    }

    private func stopRun(_ run: Replication) {
        _ = manager.cancel(id: run.id.jobID)
    }

    // MARK: - Reporting

    /// `GET /_scheduler/jobs`, sorted by job ID.
    public var jobsJSON: [JSONValue] {
        lock.lock()
        defer { lock.unlock() }
        var entries = jobs.values.sorted { $0.id.jobID < $1.id.jobID }.map(\.json)
        // `_replicate` jobs started before the scheduler knew of them (the command line).
        let known = Set(jobs.keys)
        for run in manager.replications where !known.contains(run.id.jobID) {
            let job = ScheduledJob(node: nodeName, id: run.id, settings: run.settings, origin: .request, sourceName: run.source.displayName,
                                   targetName: run.target.displayName, onFinish: { _ in })
            job.run = run
            entries.append(job.json)
        }
        return entries
    }

    /// `GET /_active_tasks`: every run, with the `_replicator` document it runs for.
    public var activeTasks: [JSONValue] {
        let origins = lock.withLock { jobs.mapValues { ($0.documentDatabase, $0.documentID) } }
        return manager.replications.map { run in
            var task = run.status.activeTask.objectValue ?? [:]
            if let (database, id) = origins[run.id.jobID] {
                task["database"] = database
                task["doc_id"] = id
            }
            return .object(task)
        }
    }

    /// One job of `GET /_scheduler/jobs/{id}`.
    public func jobJSON(id: String) -> JSONValue? {
        jobsJSON.first { $0["id"]?.stringValue == id }
    }

    /// What `_scheduler/docs` reports of a document's job, if it has one.
    public func documentStatus(jobID: String) -> (state: String, info: JSONValue, errorCount: Int, startTime: Date, lastUpdated: Date)? {
        lock.lock()
        defer { lock.unlock() }
        guard let job = jobs[jobID] else { return nil }
        return (job.state, job.info, job.errorCount, job.startedOn ?? job.addedOn, job.history.first?.time ?? job.addedOn)
    }

    // MARK: - Live events

    /// Calls `listener` with an event for every change of a job (state, progress kept out).
    public func follow(_ listener: @escaping @Sendable (JSONValue) -> Void) -> Int {
        lock.lock()
        defer { lock.unlock() }
        nextListener += 1
        listeners[nextListener] = listener
        return nextListener
    }

    /// The jobs as live events, for a follower's start.
    public var currentEvents: [JSONValue] {
        lock.lock()
        defer { lock.unlock() }
        return jobs.values.sorted { $0.id.jobID < $1.id.jobID }.map { .object($0.event) }
    }

    public func unfollow(_ token: Int) {
        lock.withLock { listeners[token] = nil }
    }

    private func publish(_ job: ScheduledJob, removed: Bool = false, as removedState: String = "removed",
                         outcome: Replication.Outcome? = nil) {
        lock.lock()
        let current = Array(listeners.values)
        guard !current.isEmpty else {
            lock.unlock()
            return
        }
        var event = job.event
        lock.unlock()
        switch outcome {
        case .completed?:
            event["state"] = "completed"
            event["status"] = "stopped"
        case .failed(let error)?:
            event["state"] = "failed"
            event["status"] = "stopped"
            event["info"] = ["error": JSONValue(error.description)]
            event["last_error"] = error.json
        case .cancelled?, nil:
            if removed {
                event["state"] = JSONValue(removedState)
                event["status"] = "stopped"
            }
        }
        current.forEach { $0(.object(event)) }
    }
}
