import CouchCore
import Foundation

/// CouchDB's `couch_auth_lockout`: failed password checks are counted per (client address,
/// user, the user's salt), and once a count reaches `[chttpd_auth_lockout] threshold` (5)
/// further attempts from that address are refused with 403 before any password is checked
/// (`mode = enforce`, the default), or only logged (`warn`), for `max_lifetime` milliseconds
/// (300,000) from the first failure. At most `max_objects` (10,000) counts are kept, the
/// oldest dropped first. The salt is part of the key so that a new password starts afresh.
/// The counts outlive configuration changes: one lockout belongs to a server.
final class LoginLockout: @unchecked Sendable {
    enum Mode: String, Sendable { case off, warn, enforce }

    struct Settings: Sendable {
        var mode = Mode.enforce
        var threshold = 5
        var maximumLifetimeMilliseconds = 300_000
        var maximumObjects = 10_000

        init() {}

        init(_ file: ConfigurationFile) throws(ConfigurationError) {
            func integer(_ key: String, _ range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
                guard let text = file.value(key, in: "chttpd_auth_lockout") else { return nil }
                guard let value = Int(text), range.contains(value) else {
                    throw ConfigurationError("[chttpd_auth_lockout] \(key) must be an integer from \(range.lowerBound) to \(range.upperBound)")
                }
                return value
            }
            // CouchDB reads any other mode as off.
            if let text = file.value("mode", in: "chttpd_auth_lockout") { mode = Mode(rawValue: text) ?? .off }
            if let value = try integer("threshold", 1...Int(Int32.max)) { threshold = value }
            if let value = try integer("max_lifetime", 1...Int(Int32.max)) { maximumLifetimeMilliseconds = value }
            if let value = try integer("max_objects", 1...10_000_000) { maximumObjects = value }
        }
    }

    static let reason = "Account is temporarily locked due to multiple authentication failures"

    private struct Key: Hashable {
        let peer: UInt32
        let user: String
        let salt: String
    }

    private struct Failures {
        var count: Int
        let first: UInt64
        /// Insertion order, to drop the oldest when full.
        let order: UInt64
    }

    private let lock = NSLock()
    private var failures: [Key: Failures] = [:]
    private var nextOrder: UInt64 = 0

    /// 403 when `user`'s attempts from `peer` (IPv4, network byte order; 0 unknown, never
    /// locked) are locked out; logs them under `warn`.
    func check(peer: UInt32, user: String, salt: String, settings: Settings, warn: (String) -> Void) throws(CouchError) {
        guard settings.mode != .off, peer != 0 else { return }
        let key = Key(peer: peer, user: user, salt: salt)
        let now = Self.milliseconds()
        let count: Int = lock.withLock {
            guard let entry = failures[key] else { return 0 }
            if now &- entry.first >= UInt64(settings.maximumLifetimeMilliseconds) {
                failures[key] = nil
                return 0
            }
            return entry.count
        }
        guard count >= settings.threshold else { return }
        if settings.mode == .enforce { throw CouchError(.forbidden, Self.reason) }
        let address = withUnsafeBytes(of: peer) { $0.map(String.init).joined(separator: ".") }
        warn("authentication failure threshold reached for \(JSONValue(user).serializedString()) from \(address)")
    }

    /// Counts one failed password check.
    func recordFailure(peer: UInt32, user: String, salt: String, settings: Settings) {
        guard settings.mode != .off, peer != 0 else { return }
        let key = Key(peer: peer, user: user, salt: salt)
        let now = Self.milliseconds()
        lock.withLock {
            if var entry = failures[key], now &- entry.first < UInt64(settings.maximumLifetimeMilliseconds) {
                entry.count += 1
                failures[key] = entry
                return
            }
            if failures.count >= settings.maximumObjects { evict(now: now, settings: settings) }
            failures[key] = Failures(count: 1, first: now, order: nextOrder)
            nextOrder += 1
        }
    }

    /// Drops expired counts, then the oldest until there is room for one more.
    private func evict(now: UInt64, settings: Settings) {
        failures = failures.filter { now &- $0.value.first < UInt64(settings.maximumLifetimeMilliseconds) }
        let excess = failures.count - settings.maximumObjects + 1
        guard excess > 0 else { return }
        for key in failures.sorted(by: { $0.value.order < $1.value.order }).prefix(excess).map(\.key) {
            failures[key] = nil
        }
    }

    private static func milliseconds() -> UInt64 {
        DispatchTime.now().uptimeNanoseconds / 1_000_000
    }
}
