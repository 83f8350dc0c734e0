/// A database name that passed CouchDB's rule, `^[a-z][a-z0-9_$()+/-]*$`, or is one of
/// the system databases. Names map to file names by `fileStem`, which can never
/// contain a path separator or `..`.
public struct DatabaseName: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public static let systemDatabases: Set<String> = ["_users", "_replicator", "_global_changes"]
    static let maximumLength = 238

    public init(_ raw: String) throws(CouchError) {
        guard DatabaseName.isValid(raw) else {
            throw CouchError(.invalidDatabaseName,
                "Name: '\(raw)'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter.")
        }
        rawValue = raw
    }

    public static func isValid(_ raw: String) -> Bool {
        let bytes = raw.utf8
        guard let first = bytes.first else { return false }
        if first == UInt8(ascii: "_") { return systemDatabases.contains(raw) }
        guard first >= UInt8(ascii: "a"), first <= UInt8(ascii: "z"), bytes.count <= maximumLength else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            case UInt8(ascii: "_"), UInt8(ascii: "$"), UInt8(ascii: "("), UInt8(ascii: ")"),
                 UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "/"): true
            default: false
            }
        }
    }

    /// A file-system-safe stem: letters, digits, `_` and `-` kept, every other byte as `%XX`.
    public var fileStem: String {
        var stem = ""
        for byte in rawValue.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "_"), UInt8(ascii: "-"):
                stem.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                stem += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return stem
    }

    /// The inverse of `fileStem`; nil for stems no valid name produces.
    public init?(fileStem: String) {
        var bytes: [UInt8] = []
        var iterator = Array(fileStem.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(),
                      let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        let raw = String(decoding: bytes, as: UTF8.self)
        guard DatabaseName.isValid(raw) else { return nil }
        rawValue = raw
    }

    public var description: String { rawValue }
    public var isSystem: Bool { rawValue.hasBytePrefix("_") }

    /// A replicator database: `_replicator` or any `*/_replicator`, whose documents describe
    /// replications (and may keep the replicator's `_replication_*` members).
    public var isReplicator: Bool { rawValue == "_replicator" || rawValue.hasSuffix("/_replicator") }

    public static func < (lhs: DatabaseName, rhs: DatabaseName) -> Bool {
        lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8)
    }
}

extension String {
    func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
