import CouchCore
import Foundation

/// CouchDB's `couch_uuids`: the IDs `/_uuids` hands out and `POST /db` gives new documents,
/// by `[uuids] algorithm`:
/// - `sequential` (CouchDB's default): 26 random hex digits, then 6 that grow by a random step
///   below 0xffd; past 0xfff000 a new random prefix. IDs of one server sort in creation order,
///   which keeps a database's index of IDs appended to rather than written all over;
/// - `random`: 32 random hex digits;
/// - `utc_random`: microseconds since 1970 in 14 hex digits, then 18 random ones;
/// - `utc_id`: the same 14 digits, then `[uuids] utc_id_suffix`.
/// The time-based forms never repeat nor go back: when the clock has not moved on (or went
/// back), the last value plus one is used. The state lives with the server; a change of the
/// algorithm or suffix starts it afresh, as CouchDB's does.
final class UUIDGenerator: @unchecked Sendable {
    enum Algorithm: String, Sendable {
        case sequential, random
        case utcRandom = "utc_random"
        case utcID = "utc_id"
    }

    struct Settings: Equatable, Sendable {
        var algorithm = Algorithm.sequential
        var utcIDSuffix = ""
        /// `[uuids] max_count`: the most one `/_uuids` request may ask for.
        var maximumCount = 1000
    }

    private let lock = NSLock()
    private var settings = Settings()
    private var prefix = ""
    private var sequence = 0
    private var clock: UInt64 = 0

    init(_ settings: Settings = Settings()) {
        configure(settings)
    }

    var maximumCount: Int { lock.withLock { settings.maximumCount } }

    /// Applies new settings; the sequence or clock restarts only when the IDs' form changes.
    func configure(_ new: Settings) {
        lock.withLock {
            let restart = prefix.isEmpty || new.algorithm != settings.algorithm || new.utcIDSuffix != settings.utcIDSuffix
            settings = new
            guard restart else { return }
            prefix = Self.newPrefix()
            sequence = Self.step()
            clock = Self.microsecondsSinceEpoch()
        }
    }

    func next() -> String {
        lock.withLock { nextLocked() }
    }

    func next(_ count: Int) -> [String] {
        lock.withLock { (0..<count).map { _ in nextLocked() } }
    }

    private func nextLocked() -> String {
        switch settings.algorithm {
        case .random:
            return Digest.randomHex(bytes: 16)
        case .sequential:
            let id = prefix + Self.hex(UInt64(sequence), digits: 6)
            if sequence >= 0xfff000 {
                prefix = Self.newPrefix()
                sequence = Self.step()
            } else {
                sequence += Self.step()
            }
            return id
        case .utcRandom:
            return tick() + Digest.randomHex(bytes: 9)
        case .utcID:
            return tick() + settings.utcIDSuffix
        }
    }

    /// The next clock value, in 14 hex digits: the time, or one past the last value.
    private func tick() -> String {
        let now = Self.microsecondsSinceEpoch()
        clock = now > clock ? now : clock + 1
        return Self.hex(clock, digits: 14)
    }

    private static func newPrefix() -> String { Digest.randomHex(bytes: 13) }

    private static func step() -> Int { Int.random(in: 1...0xffd) }

    private static func microsecondsSinceEpoch() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(max(0, now.tv_sec)) * 1_000_000 + UInt64(max(0, now.tv_nsec)) / 1000
    }

    private static func hex(_ value: UInt64, digits: Int) -> String {
        let text = String(value, radix: 16)
        return text.count >= digits ? text : String(repeating: "0", count: digits - text.count) + text
    }
}
