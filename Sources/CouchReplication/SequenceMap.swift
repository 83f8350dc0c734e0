/// The checkpoint rule, in one small type (after TouchDB's `TDSequenceMap` and CouchDB's
/// `seqs_in_progress`/`highest_seq_done`): a checkpoint may record the highest source
/// sequence below which every change has been written.
///
/// Workers take batches of changes in feed order and finish them in any order. Each batch
/// is `begin`-registered with the sequence of its last change and gets a ticket; when it is
/// written it is `complete`d. `checkpointable` is the sequence of the latest batch such that
/// it and every batch before it are complete. Sequences are opaque (CouchDB's are strings):
/// the map orders them by ticket, never by value.
public struct SequenceMap<Sequence: Sendable>: Sendable {
    private struct Entry: Sendable {
        let ticket: Int
        let sequence: Sequence
        var isComplete: Bool
    }

    private var entries: [Entry] = []
    private var firstIndex = 0
    private var nextTicket = 0
    /// Safe to record in a checkpoint; nil until the first batch is complete.
    public private(set) var checkpointable: Sequence?
    /// The sequence of the latest batch (in feed order) that is complete, whatever came
    /// before it (CouchDB's `highest_seq_done`, shown as `source_seq`).
    public private(set) var latestCompleted: Sequence?
    private var latestCompletedTicket = -1

    public init(start: Sequence? = nil) {
        checkpointable = start
    }

    /// Registers a batch ending at `sequence`; returns its ticket.
    public mutating func begin(_ sequence: Sequence) -> Int {
        defer { nextTicket += 1 }
        entries.append(Entry(ticket: nextTicket, sequence: sequence, isComplete: false))
        return nextTicket
    }

    /// Marks a batch written and advances `checkpointable` over every leading complete batch.
    public mutating func complete(_ ticket: Int) {
        guard let offset = entries[firstIndex...].firstIndex(where: { $0.ticket == ticket }) else { return }
        entries[offset].isComplete = true
        if ticket > latestCompletedTicket {
            latestCompletedTicket = ticket
            latestCompleted = entries[offset].sequence
        }
        while firstIndex < entries.count, entries[firstIndex].isComplete {
            checkpointable = entries[firstIndex].sequence
            firstIndex += 1
        }
        if firstIndex > 64 && firstIndex * 2 > entries.count {
            entries.removeFirst(firstIndex)
            firstIndex = 0
        }
    }

    /// Batches begun and not yet complete.
    public var inFlightCount: Int { entries.count - firstIndex - entries[firstIndex...].filter(\.isComplete).count }

    /// No batch is waiting to be written.
    public var isIdle: Bool { firstIndex == entries.count }
}
