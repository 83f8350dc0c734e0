import CouchCore
import Foundation

/// A password as CouchDB keeps it: never the password itself, only what verifies it.
/// Written in `_users` documents as `password_scheme`, `pbkdf2_prf`, `derived_key`,
/// `salt` and `iterations`, and for server admins as `-pbkdf2:sha256-KEY,SALT,ITERATIONS`
/// (CouchDB's `local.ini` form).
public struct PasswordHash: Sendable, Equatable {
    public enum Scheme: Sendable, Equatable {
        case pbkdf2(HashFunction)
        /// CouchDB 1.x's salted SHA-1, still read so old user documents keep working.
        case simple
    }

    public let scheme: Scheme
    /// Hex.
    public let derivedKey: String
    /// CouchDB salts with the hex text of 16 random bytes, used as bytes as written.
    public let salt: String
    public let iterations: Int

    public init(scheme: Scheme, derivedKey: String, salt: String, iterations: Int) {
        self.scheme = scheme
        self.derivedKey = derivedKey
        self.salt = salt
        self.iterations = iterations
    }

    /// Reads `-pbkdf2:PRF-KEY,SALT,ITERATIONS`, `-pbkdf2-KEY,SALT,ITERATIONS` (SHA-1) and
    /// `-hashed-SHA,SALT`; nil for anything else, a password in clear included.
    public init?(adminEntry text: String) {
        if text.hasPrefix("-hashed-") {
            let parts = text.dropFirst("-hashed-".count).split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 2 else { return nil }
            self.init(scheme: .simple, derivedKey: String(parts[0]), salt: String(parts[1]), iterations: 1)
            return
        }
        let function: HashFunction
        let rest: Substring
        if text.hasPrefix("-pbkdf2-") {
            function = .sha1
            rest = text.dropFirst("-pbkdf2-".count)
        } else if text.hasPrefix("-pbkdf2:") {
            let afterPrefix = text.dropFirst("-pbkdf2:".count)
            guard let dash = afterPrefix.firstIndex(of: "-"),
                  let named = HashFunction(couchName: String(afterPrefix[..<dash])) else { return nil }
            function = named
            rest = afterPrefix[afterPrefix.index(after: dash)...]
        } else {
            return nil
        }
        let parts = rest.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 3, let iterations = Int(parts[2]), iterations > 0, !parts[0].isEmpty else { return nil }
        self.init(scheme: .pbkdf2(function), derivedKey: String(parts[0]), salt: String(parts[1]), iterations: iterations)
    }

    /// The `local.ini` form of a server admin's password.
    public var adminEntry: String {
        switch scheme {
        case .simple: "-hashed-\(derivedKey),\(salt)"
        case .pbkdf2(let function): "-pbkdf2:\(function.rawValue)-\(derivedKey),\(salt),\(iterations)"
        }
    }

    /// Whether an admin entry is already hashed (as CouchDB decides before hashing `local.ini`).
    public static func isHashedAdminEntry(_ text: String) -> Bool {
        text.hasPrefix("-hashed-") || text.hasPrefix("-pbkdf2-") || text.hasPrefix("-pbkdf2:")
    }

    /// Reads a `_users` document's credentials; nil when it has none a password can match.
    public init?(userDocument body: JSONObject) {
        guard let salt = body["salt"]?.stringValue else { return nil }
        switch body["password_scheme"]?.stringValue ?? "simple" {
        case "simple":
            guard let sha = body["password_sha"]?.stringValue else { return nil }
            self.init(scheme: .simple, derivedKey: sha, salt: salt, iterations: 1)
        case "pbkdf2":
            guard let key = body["derived_key"]?.stringValue,
                  let function = HashFunction(couchName: body["pbkdf2_prf"]?.stringValue ?? "sha") else { return nil }
            let iterations = body["iterations"]?.intValue ?? 10000
            guard iterations > 0 else { return nil }
            self.init(scheme: .pbkdf2(function), derivedKey: key, salt: salt, iterations: iterations)
        default:
            return nil
        }
    }

    /// The members a `_users` document holds instead of `password`, in CouchDB's order
    /// (`couch_users_db:save_doc`).
    public var userDocumentMembers: [(key: String, value: JSONValue)] {
        switch scheme {
        case .simple:
            [("password_scheme", "simple"), ("salt", JSONValue(salt)), ("password_sha", JSONValue(derivedKey))]
        case .pbkdf2(let function):
            [("password_scheme", "pbkdf2"), ("pbkdf2_prf", JSONValue(function.rawValue)), ("salt", JSONValue(salt)),
             ("iterations", JSONValue(iterations)), ("derived_key", JSONValue(derivedKey))]
        }
    }
}

/// Hashes new passwords with PBKDF2-SHA256 and a per-password random salt, and checks
/// passwords against stored hashes. CouchDB 3.4's 600,000 iterations make one check cost
/// a few hundred milliseconds, so — as CouchDB does — a successful check is remembered
/// in memory (as a keyed digest of the password and the hash it matched, never the
/// password) and repeated Basic-authenticated requests do not pay it again.
///
/// Checks are also the cheapest way to make a server work hard, so they are bounded: a
/// stored hash's iterations must lie within `[chttpd_auth] min_iterations`/`max_iterations`
/// (CouchDB's rule), at most `concurrentChecks` run at once and as many wait, and further
/// logins are refused with 503 rather than occupying every request thread. Requests that
/// bring the same password for the same hash while it is being checked wait for that check
/// rather than run their own (a client's first requests often go out together), and the
/// server answers requests whose credentials are not remembered off its listener
/// (`mayNeedCheck`), so that waiting for a check never holds a listener thread.
public final class PasswordHasher: @unchecked Sendable {
    public let iterations: Int
    /// The PRF of new hashes (`[chttpd_auth] pbkdf2_prf`, SHA-256 by default).
    public let function: HashFunction
    public let iterationRange: ClosedRange<Int>
    private let cacheKey = Digest.randomBytes(32)
    private let lock = NSLock()
    private var verified: Set<[UInt8]> = []
    /// Name and password pairs that passed a check, for `mayNeedCheck`: the process's keyed
    /// `Hasher` (SipHash) of each, cheaper than a digest for what only decides where a request
    /// is answered (a collision answers one on the listener, as before).
    private var verifiedPairs: Set<Int> = []
    private static let cacheLimit = 4096
    /// The checks under way, by fingerprint; requests with the same one wait for its result.
    private var checking: [[UInt8]: Check] = [:]
    /// Requests answered off the listener because they may cost a check, by the credentials
    /// they bring (`credentialsKey`), counted from before they queue until answered.
    private var admittedCredentials: [Int: Int] = [:]
    private let concurrentChecks: Int
    private let slots: DispatchSemaphore
    private var admitted = 0
    /// What an unknown user's password is checked against, so that a failed login costs
    /// the same whether or not the user exists.
    private lazy var decoy = hash(Digest.randomHex(bytes: 16))

    public init(iterations: Int, function: HashFunction = .sha256, iterationRange: ClosedRange<Int> = 1...1_000_000_000,
                concurrentChecks: Int = 4) {
        precondition(iterations > 0, "PBKDF2 needs at least one iteration")
        self.iterations = iterations
        self.function = function
        self.iterationRange = iterationRange
        self.concurrentChecks = max(1, concurrentChecks)
        slots = DispatchSemaphore(value: self.concurrentChecks)
    }

    /// A new hash of `password`, with a new random salt unless one is given.
    public func hash(_ password: String, salt given: String? = nil) -> PasswordHash {
        let salt = given ?? Digest.randomHex(bytes: 16)
        let key = Digest.pbkdf2(password: Array(password.utf8), salt: Array(salt.utf8), iterations: iterations,
                                function: function)
        return PasswordHash(scheme: .pbkdf2(function), derivedKey: Digest.hex(key), salt: salt, iterations: iterations)
    }

    /// Whether `password` matches; 403 when the hash's iterations are outside the allowed
    /// range, 503 when too many checks are running or waiting. `name`, when given, is
    /// remembered with the password on success (`mayNeedCheck`).
    public func verify(_ password: String, against stored: PasswordHash, name: String? = nil) throws(CouchError) -> Bool {
        if case .pbkdf2 = stored.scheme {
            if stored.iterations < iterationRange.lowerBound {
                throw CouchError(.forbidden, "Iteration count is too low for this server")
            }
            if stored.iterations > iterationRange.upperBound {
                throw CouchError(.forbidden, "Iteration count is too high for this server")
            }
        }
        let fingerprint = self.fingerprint(stored.adminEntry, password)
        if lock.withLock({ verified.contains(fingerprint) }) { return true }
        guard try checkedOnce(fingerprint, { Self.matches(password, stored) }) else { return false }
        lock.withLock {
            if verified.count >= Self.cacheLimit { verified.removeAll(keepingCapacity: true) }
            verified.insert(fingerprint)
            if let name {
                if verifiedPairs.count >= Self.cacheLimit { verifiedPairs.removeAll(keepingCapacity: true) }
                verifiedPairs.insert(Self.credentialsKey(name, password))
            }
        }
        return true
    }

    /// Spends a password check's time on a user that does not exist, then says no.
    public func verifyUnknown(_ password: String) throws(CouchError) -> Bool {
        let stored = lock.withLock { decoy }
        _ = try checkedOnce(fingerprint(stored.adminEntry, password), { Self.matches(password, stored) })
        return false
    }

    /// Whether a request bringing `name` and `password` may cost a check: false once the pair
    /// has passed one (until the remembered pairs are cleared). It only decides where the
    /// request is answered; `verify` still decides whether the password matches.
    public func mayNeedCheck(name: String, password: String) -> Bool {
        let pair = Self.credentialsKey(name, password)
        return lock.withLock { !verifiedPairs.contains(pair) }
    }

    /// A name and password as the process's keyed `Hasher` (SipHash) sees them.
    static func credentialsKey(_ name: String, _ password: String) -> Int {
        var hasher = Hasher()
        hasher.combine(name)
        hasher.combine(password)
        return hasher.finalize()
    }

    /// Admits a request that may cost a check before it queues: always when it brings
    /// credentials already admitted (it will share their check), otherwise while fewer
    /// credentials are admitted than checks may run or wait. A refused request answers 503 at
    /// once rather than queue behind a flood of logins. `answered` ends each admission.
    public func admit(credentials key: Int) -> Bool {
        lock.withLock {
            if let count = admittedCredentials[key] {
                admittedCredentials[key] = count + 1
                return true
            }
            guard admittedCredentials.count < 2 * concurrentChecks else { return false }
            admittedCredentials[key] = 1
            return true
        }
    }

    public func answered(credentials key: Int) {
        lock.withLock {
            guard let count = admittedCredentials[key] else { return }
            admittedCredentials[key] = count > 1 ? count - 1 : nil
        }
    }

    static let tooManyChecks = CouchError(.serviceUnavailable, "Too many password checks in progress; try again later")

    private func fingerprint(_ first: String, _ second: String) -> [UInt8] {
        var input = Array(first.utf8)
        input.append(0)
        input.append(contentsOf: second.utf8)
        return Digest.hmac(.sha256, key: cacheKey, message: input)
    }

    /// Runs `check` in one of the bounded slots, unless a check with the same fingerprint is
    /// under way: then its result, once it has one.
    private func checkedOnce(_ fingerprint: [UInt8], _ check: () -> Bool) throws(CouchError) -> Bool {
        enum Admission { case run(Check), wait(Check), refused }
        let admission: Admission = lock.withLock {
            if let running = checking[fingerprint] { return .wait(running) }
            guard admitted < 2 * concurrentChecks else { return .refused }
            admitted += 1
            let new = Check()
            checking[fingerprint] = new
            return .run(new)
        }
        switch admission {
        case .refused:
            throw Self.tooManyChecks
        case .wait(let running):
            return running.result()
        case .run(let new):
            slots.wait()
            let matched = check()
            slots.signal()
            lock.withLock {
                checking[fingerprint] = nil
                admitted -= 1
            }
            new.finish(matched)
            return matched
        }
    }

    /// One check under way, and its result for the requests that wait for it.
    private final class Check: @unchecked Sendable {
        private let done = DispatchGroup()
        private var matched = false

        init() { done.enter() }

        func finish(_ matched: Bool) {
            self.matched = matched
            done.leave()
        }

        func result() -> Bool {
            done.wait()
            return matched
        }
    }

    private static func matches(_ password: String, _ stored: PasswordHash) -> Bool {
        let computed: [UInt8]
        switch stored.scheme {
        case .simple:
            computed = Digest.hash(.sha1, Array(password.utf8) + Array(stored.salt.utf8))
        case .pbkdf2(let function):
            computed = Digest.pbkdf2(password: Array(password.utf8), salt: Array(stored.salt.utf8),
                                     iterations: stored.iterations, function: function)
        }
        return Digest.constantTimeEquals(Array(Digest.hex(computed).utf8), Array(stored.derivedKey.lowercased().utf8))
    }
}
