import CouchReplication
import Testing

/// The job's life as events and actions, without any I/O.
@Suite struct ReplicationStateMachineTests {
    typealias Machine = ReplicationStateMachine
    let unreachable = ReplicationError(.peerUnreachable, "connection refused")
    let serverError = ReplicationError(.requestFailed, "500")
    let missing = ReplicationError(.databaseNotFound, "could not open http://h/db/")

    @Test func aOneShotJobStartsCopiesAndCompletes() {
        var machine = Machine(continuous: false)
        #expect(machine.state == .stopped)
        #expect(machine.handle(.start) == [.startSession])
        #expect(machine.state == .active)
        #expect(machine.handle(.sessionOpened) == [])
        #expect(machine.handle(.caughtUp) == [], "one-shot jobs are never idle")
        #expect(machine.state == .active)
        #expect(machine.handle(.sessionCompleted) == [.finish(.completed)])
        #expect(machine.state == .stopped)
        #expect(machine.isFinished)
        #expect(machine.handle(.start) == [], "a finished job stays finished")
    }

    @Test func aContinuousJobGoesIdleAndActiveAgain() {
        var machine = Machine(continuous: true)
        _ = machine.handle(.start)
        _ = machine.handle(.sessionOpened)
        #expect(machine.handle(.caughtUp) == [])
        #expect(machine.state == .idle)
        #expect(machine.handle(.changesArrived) == [])
        #expect(machine.state == .active)
        #expect(machine.handle(.changesArrived) == [])
        #expect(machine.state == .active)
    }

    @Test func anUnreachablePeerMakesTheJobOfflineAndItRetriesWithGrowingBackoff() {
        var machine = Machine(continuous: true, backoff: Backoff(initialMilliseconds: 100, maximumMilliseconds: 350))
        _ = machine.handle(.start)
        _ = machine.handle(.sessionOpened)
        #expect(machine.handle(.sessionFailed(unreachable)) == [.scheduleRetry(afterMilliseconds: 100)])
        #expect(machine.state == .offline)
        #expect(machine.lastError == unreachable)
        #expect(machine.handle(.retryTimerFired) == [.startSession])
        #expect(machine.state == .offline, "offline until the new session reaches the peers")
        #expect(machine.handle(.sessionFailed(unreachable)) == [.scheduleRetry(afterMilliseconds: 200)])
        _ = machine.handle(.retryTimerFired)
        #expect(machine.handle(.sessionFailed(serverError)) == [.scheduleRetry(afterMilliseconds: 350)])
        #expect(machine.state == .crashing)
        _ = machine.handle(.retryTimerFired)
        #expect(machine.handle(.sessionFailed(serverError)) == [.scheduleRetry(afterMilliseconds: 350)], "capped")
    }

    /// However long the outage, a peer that comes back is tried again within seconds; the
    /// job stays offline while it tries, and is active once the peers are reached.
    @Test func anOfflineJobProbesItsPeersEveryFewSeconds() {
        var machine = Machine(continuous: true)
        _ = machine.handle(.start)
        _ = machine.handle(.sessionOpened)
        var waits: [Int] = []
        var states: Set<Machine.State> = []
        for _ in 0..<20 {
            for action in machine.handle(.sessionFailed(unreachable)) {
                if case .scheduleRetry(let wait) = action { waits.append(wait) }
            }
            states.insert(machine.state)
            #expect(machine.handle(.retryTimerFired) == [.startSession])
            states.insert(machine.state)
        }
        #expect(waits.first == 1_000)
        #expect(waits.max() == Machine.offlineProbeMilliseconds)
        #expect(states == [.offline], "no flicker while the peer is away")
        _ = machine.handle(.sessionOpened)
        #expect(machine.state == .active)
        // A peer that answers with errors still backs off fully.
        _ = machine.handle(.sessionFailed(serverError))
        for _ in 0..<12 { _ = machine.handle(.retryTimerFired); _ = machine.handle(.sessionFailed(serverError)) }
        #expect(machine.handle(.retryTimerFired) == [.startSession])
        #expect(machine.handle(.sessionFailed(serverError)) == [.scheduleRetry(afterMilliseconds: 300_000)])
    }

    @Test func progressResetsTheBackoff() {
        var machine = Machine(continuous: true, backoff: Backoff(initialMilliseconds: 100, maximumMilliseconds: 10_000))
        _ = machine.handle(.start)
        _ = machine.handle(.sessionFailed(serverError))
        _ = machine.handle(.retryTimerFired)
        _ = machine.handle(.sessionFailed(serverError))
        _ = machine.handle(.retryTimerFired)
        _ = machine.handle(.progressed)
        #expect(machine.handle(.sessionFailed(serverError)) == [.scheduleRetry(afterMilliseconds: 100)])
    }

    @Test func aPermanentErrorFailsTheJob() {
        var machine = Machine(continuous: true)
        _ = machine.handle(.start)
        #expect(machine.handle(.sessionFailed(missing)) == [.finish(.failed(missing))])
        #expect(machine.state == .stopped)
        #expect(machine.isFinished)
        #expect(machine.handle(.retryTimerFired) == [])
    }

    @Test func aMissingDatabaseHealsForJobsThatRetryIt() {
        // A `_replicator` job retries it from the start, as CouchDB 3 keeps it crashing.
        var persistent = Machine(continuous: true, retriesBeforeOpening: true)
        _ = persistent.handle(.start)
        #expect(persistent.handle(.sessionFailed(missing)) == [.scheduleRetry(afterMilliseconds: 1_000)])
        #expect(persistent.state == .crashing)
        // A continuous job that ran: its database was deleted under it, and may come back.
        var ran = Machine(continuous: true)
        _ = ran.handle(.start)
        _ = ran.handle(.sessionOpened)
        #expect(ran.handle(.fail(missing)) == [.stopSession, .scheduleRetry(afterMilliseconds: 1_000)])
        #expect(ran.state == .crashing && !ran.isFinished)
        // What cannot heal still ends it.
        let refused = ReplicationError(.forbidden, "no")
        #expect(ran.handle(.retryTimerFired) == [.startSession])
        #expect(ran.handle(.sessionFailed(refused)) == [.finish(.failed(refused))])
    }

    @Test func aOneShotJobThatNeverReachedItsPeersFails() {
        var machine = Machine(continuous: false)
        _ = machine.handle(.start)
        #expect(machine.handle(.sessionFailed(unreachable)) == [.finish(.failed(unreachable))])
    }

    @Test func aOneShotJobThatLosesAPeerMidwayRetries() {
        var machine = Machine(continuous: false)
        _ = machine.handle(.start)
        _ = machine.handle(.sessionOpened)
        #expect(machine.handle(.sessionFailed(unreachable)) == [.scheduleRetry(afterMilliseconds: 1000)])
        #expect(machine.state == .offline)
    }

    @Test func stoppingARunningJobStopsItsSessionThenFinishes() {
        var machine = Machine(continuous: true)
        _ = machine.handle(.start)
        #expect(machine.handle(.stop) == [.stopSession, .finish(.cancelled)])
        #expect(machine.state == .stopped)
        #expect(machine.handle(.stop) == [])
    }

    @Test func stoppingAnOfflineJobCancelsItsRetry() {
        var machine = Machine(continuous: true)
        _ = machine.handle(.start)
        _ = machine.handle(.sessionFailed(unreachable))
        #expect(machine.handle(.stop) == [.cancelRetry, .finish(.cancelled)])
    }

    @Test func lateEventsAreIgnored() {
        var machine = Machine(continuous: true)
        #expect(machine.handle(.sessionOpened) == [])
        #expect(machine.handle(.retryTimerFired) == [])
        _ = machine.handle(.start)
        #expect(machine.handle(.retryTimerFired) == [], "no retry was scheduled")
        _ = machine.handle(.sessionFailed(serverError))
        #expect(machine.handle(.caughtUp) == [])
        #expect(machine.state == .crashing)
        #expect(machine.handle(.sessionCompleted) == [])
    }
}

@Suite struct PersistentJobStateMachineTests {
    @Test func aDocumentJobRetriesAPeerUnreachableFromTheStart() {
        var machine = ReplicationStateMachine(continuous: false, backoff: Backoff(initialMilliseconds: 10, maximumMilliseconds: 40),
                                              retriesBeforeOpening: true)
        #expect(machine.handle(.start) == [.startSession])
        let unreachable = ReplicationError(.peerUnreachable, "no")
        #expect(machine.handle(.sessionFailed(unreachable)) == [.scheduleRetry(afterMilliseconds: 10)])
        #expect(machine.state == .offline)
        #expect(machine.handle(.retryTimerFired) == [.startSession])
        var oneShot = ReplicationStateMachine(continuous: false)
        _ = oneShot.handle(.start)
        #expect(oneShot.handle(.sessionFailed(unreachable)) == [.finish(.failed(unreachable))], "`_replicate` fails")
    }
}
