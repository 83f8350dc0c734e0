// CouchCore's own JSON value: order preserving, exact number text, no Foundation.
//
// Strings (values and object keys) are compared byte for byte on their UTF-8
// form, not by Swift's Unicode canonical equivalence: "é" (U+00E9) and
// "e\u{301}" are different keys, as they are for CouchDB.

/// A JSON value.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    /// Keeps the exact text of the number as received.
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

// MARK: - Accessors

extension JSONValue {
    /// The member `key` of an object; nil if this is not an object or the key is absent.
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// Only integral number text without fraction or exponent that fits in `Int`
    /// ("3", "-2"); "3.0" and "1e3" give nil, as Erlang's `is_integer` would.
    public var intValue: Int? {
        if case .number(let n) = self { return n.intValue }
        return nil
    }

    public var doubleValue: Double? {
        if case .number(let n) = self { return n.doubleValue }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    public init(_ string: String) { self = .string(string) }
    public init(_ int: Int) { self = .number(JSONNumber(int)) }
    public init(_ bool: Bool) { self = .bool(bool) }
}

// MARK: - Equatable / Hashable

extension JSONValue: Equatable, Hashable {
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return _utf8Equal(a, b)
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0 as UInt8)
        case .bool(let b): hasher.combine(1 as UInt8); hasher.combine(b)
        case .number(let n): hasher.combine(2 as UInt8); hasher.combine(n)
        case .string(let s): hasher.combine(3 as UInt8); _hashUTF8(s, into: &hasher)
        case .array(let a):
            hasher.combine(4 as UInt8)
            hasher.combine(a.count)
            for element in a { hasher.combine(element) }
        case .object(let o): hasher.combine(5 as UInt8); hasher.combine(o)
        }
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(JSONNumber(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// Keeps the literal's order.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements.map { (key: $0.0, value: $0.1) }))
    }
    public init(nilLiteral: ()) { self = .null }
    public init(floatLiteral value: Double) { self = .number(JSONNumber(value)) }
}

// MARK: - JSONNumber

/// A JSON number, kept as the exact text received ("12345678901234567890", "1.50", "-0", "1e3").
///
/// Two numbers are equal if their texts are equal or their `Double` values are equal;
/// they hash by `Double` value, so equal numbers hash equally.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    public let text: String

    /// Trusts the caller: `text` must be a valid JSON number.
    public init(text: String) { self.text = text }

    public init(_ value: Int) { self.text = String(value) }

    /// Swift's shortest round-trip text (1.0 prints as "1.0", like jiffy). Non-finite values are a precondition failure.
    public init(_ value: Double) {
        precondition(value.isFinite, "JSON cannot represent \(value)")
        self.text = value.description
    }

    public var doubleValue: Double { Double(text) ?? .nan }

    /// Only if `text` is an integer literal (no fraction, no exponent) that fits in `Int`.
    public var intValue: Int? {
        // Int(String) also accepts a leading "+", which is not JSON; text from the parser never has one.
        Int(text)
    }

    /// True if the text has no fraction and no exponent (Erlang/jiffy would decode it as an integer).
    public var isIntegerLiteral: Bool {
        for b in text.utf8 where b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") {
            return false
        }
        return true
    }

    public var description: String { text }

    public static func == (lhs: JSONNumber, rhs: JSONNumber) -> Bool {
        lhs.text == rhs.text || lhs.doubleValue == rhs.doubleValue
    }

    public func hash(into hasher: inout Hasher) {
        let d = doubleValue
        if d.isNaN { hasher.combine(text) } else { hasher.combine(d) }
    }
}

// MARK: - JSONObject

/// A JSON object keeping member order. Keys are unique (compared byte for byte).
///
/// Equality is order-insensitive (JSON semantics); hashing is consistent with it.
public struct JSONObject: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Member = (key: String, value: JSONValue)

    private var storage: [Member]
    /// Key -> position in `storage`; only kept for objects larger than `indexThreshold`.
    private var index: [_JSONKey: Int]?

    static let indexThreshold = 16

    public init() {
        storage = []
        index = nil
    }

    /// Duplicate keys: the last value wins, at the position of the first occurrence.
    public init(_ members: [Member]) {
        storage = []
        index = nil
        storage.reserveCapacity(members.count)
        for m in members { self[m.key] = m.value }
    }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements.map { (key: $0.0, value: $0.1) })
    }

    /// Used by the parser: `members` has unique keys; `index` is nil or exactly maps them.
    init(uniqueMembers members: [Member], index: [_JSONKey: Int]?) {
        storage = members
        if index == nil && members.count > JSONObject.indexThreshold {
            self.index = JSONObject.buildIndex(members)
        } else {
            self.index = index
        }
    }

    public var members: [Member] { storage }
    public var count: Int { storage.count }
    public var isEmpty: Bool { storage.isEmpty }
    public var keys: [String] { storage.map(\.key) }

    private static func buildIndex(_ members: [Member]) -> [_JSONKey: Int] {
        var index = [_JSONKey: Int](minimumCapacity: members.count)
        for (i, m) in members.enumerated() { index[_JSONKey(m.key)] = i }
        return index
    }

    @inline(__always)
    private func position(of key: String) -> Int? {
        if let index { return index[_JSONKey(key)] }
        return storage.firstIndex { _utf8Equal($0.key, key) }
    }

    public subscript(key: String) -> JSONValue? {
        get {
            guard let i = position(of: key) else { return nil }
            return storage[i].value
        }
        set {
            if let i = position(of: key) {
                if let newValue {
                    storage[i].value = newValue
                } else {
                    storage.remove(at: i)
                    index = storage.count > JSONObject.indexThreshold ? JSONObject.buildIndex(storage) : nil
                }
            } else if let newValue {
                storage.append((key: key, value: newValue))
                if index != nil {
                    index![_JSONKey(key)] = storage.count - 1
                } else if storage.count > JSONObject.indexThreshold {
                    index = JSONObject.buildIndex(storage)
                }
            }
        }
    }

    public func contains(_ key: String) -> Bool { position(of: key) != nil }

    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSONValue? {
        guard let i = position(of: key) else { return nil }
        let old = storage[i].value
        self[key] = nil
        return old
    }

    public func filter(_ isIncluded: (Member) -> Bool) -> JSONObject {
        JSONObject(uniqueMembers: storage.filter(isIncluded), index: nil)
    }

    public func makeIterator() -> IndexingIterator<[Member]> { storage.makeIterator() }

    public var underestimatedCount: Int { storage.count }
}

extension JSONObject: Equatable, Hashable {
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.storage.count == rhs.storage.count else { return false }
        // Fast path: same order.
        var sameOrder = true
        for i in lhs.storage.indices where !_utf8Equal(lhs.storage[i].key, rhs.storage[i].key) {
            sameOrder = false
            break
        }
        if sameOrder {
            for i in lhs.storage.indices where lhs.storage[i].value != rhs.storage[i].value { return false }
            return true
        }
        for m in lhs.storage {
            guard let other = rhs[m.key], other == m.value else { return false }
        }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        // Order-insensitive: combine per-member hashes commutatively.
        var combined = 0
        for m in storage {
            var h = Hasher()
            _hashUTF8(m.key, into: &h)
            h.combine(m.value)
            combined = combined &+ h.finalize()
        }
        hasher.combine(storage.count)
        hasher.combine(combined)
    }
}

// MARK: - Byte-wise string helpers

/// An object key hashed and compared by its UTF-8 bytes.
struct _JSONKey: Hashable, Sendable {
    let string: String
    init(_ string: String) { self.string = string }
    static func == (a: _JSONKey, b: _JSONKey) -> Bool { _utf8Equal(a.string, b.string) }
    func hash(into hasher: inout Hasher) { _hashUTF8(string, into: &hasher) }
}

@inline(__always)
func _utf8Equal(_ a: String, _ b: String) -> Bool {
    if a.utf8.count != b.utf8.count { return false }
    if let r = a.utf8.withContiguousStorageIfAvailable({ pa in
        b.utf8.withContiguousStorageIfAvailable({ pb in _bytesEqual(pa, pb) })
    }), let r {
        return r
    }
    var a = a, b = b
    return a.withUTF8 { pa in b.withUTF8 { pb in _bytesEqual(pa, pb) } }
}

@inline(__always)
func _bytesEqual(_ pa: UnsafeBufferPointer<UInt8>, _ pb: UnsafeBufferPointer<UInt8>) -> Bool {
    guard pa.count == pb.count else { return false }
    if pa.baseAddress == pb.baseAddress { return true }
    var i = 0
    let n = pa.count
    while i < n {
        if pa[i] != pb[i] { return false }
        i += 1
    }
    return true
}

@inline(__always)
func _hashUTF8(_ s: String, into hasher: inout Hasher) {
    var s = s
    s.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    hasher.combine(0xFF as UInt8)  // terminator, so ("ab","c") and ("a","bc") differ
}

/// Lexicographic comparison of UTF-8 bytes (equivalently, of Unicode scalar values).
/// Returns a negative number, zero or a positive number.
@inline(__always)
func _utf8Compare(_ a: String, _ b: String) -> Int {
    if let r = a.utf8.withContiguousStorageIfAvailable({ pa in
        b.utf8.withContiguousStorageIfAvailable({ pb in _compareBytes(pa, pb) })
    }), let r {
        return r
    }
    var a = a, b = b
    return a.withUTF8 { pa in b.withUTF8 { pb in _compareBytes(pa, pb) } }
}

@inline(__always)
func _compareBytes(_ pa: UnsafeBufferPointer<UInt8>, _ pb: UnsafeBufferPointer<UInt8>) -> Int {
    let n = Swift.min(pa.count, pb.count)
    var i = 0
    while i < n {
        let x = pa[i], y = pb[i]
        if x != y { return x < y ? -1 : 1 }
        i += 1
    }
    return pa.count == pb.count ? 0 : (pa.count < pb.count ? -1 : 1)
}
