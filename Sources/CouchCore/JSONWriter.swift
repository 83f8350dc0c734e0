// Compact JSON writer appending UTF-8 bytes to an `[UInt8]`. No Foundation.

/// How object keys are ordered on output.
public enum JSONKeyOrder: Sendable {
    /// As stored (the order received).
    case preserved
    /// Sorted by the keys' UTF-8 bytes (lexicographic byte order), for the canonical form.
    case sorted
}

extension JSONValue {
    /// Appends compact JSON (`{"a":1,"b":[true,null]}`) to `output`.
    public func write(to output: inout [UInt8], keyOrder: JSONKeyOrder = .preserved) {
        // Serialize into a raw buffer (on the stack for small values) and copy once into `output`:
        // much cheaper than many small `Array.append` calls.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 2048) { stackBuffer in
            var writer = _ByteWriter(initial: stackBuffer)
            defer { writer.release() }
            writer.write(self, sorted: keyOrder == .sorted)
            output.append(contentsOf: UnsafeBufferPointer(start: writer.base, count: writer.count))
        }
    }

    public func serialized(keyOrder: JSONKeyOrder = .preserved) -> [UInt8] {
        var output: [UInt8] = []
        write(to: &output, keyOrder: keyOrder)
        return output
    }

    public func serializedString(keyOrder: JSONKeyOrder = .preserved) -> String {
        String(decoding: serialized(keyOrder: keyOrder), as: UTF8.self)
    }

    /// Canonical form used for revision digests: compact, keys sorted by UTF-8 bytes, numbers as received.
    public var canonicalBytes: [UInt8] { serialized(keyOrder: .sorted) }
}

/// A growable byte buffer starting in caller-provided (stack) memory, moving to the heap if it grows.
struct _ByteWriter {
    var base: UnsafeMutablePointer<UInt8>
    var count = 0
    var capacity: Int
    var onHeap = false

    init(initial: UnsafeMutableBufferPointer<UInt8>) {
        base = initial.baseAddress!
        capacity = initial.count
    }

    mutating func release() {
        if onHeap { base.deallocate() }
    }

    @inline(never)
    mutating func grow(_ needed: Int) {
        let newCapacity = Swift.max(capacity * 2, count + needed)
        let p = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        p.initialize(from: base, count: count)
        if onHeap { base.deallocate() }
        base = p
        capacity = newCapacity
        onHeap = true
    }

    @inline(__always)
    mutating func reserve(_ n: Int) {
        if count + n > capacity { grow(n) }
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafePointer<UInt8>, _ n: Int) {
        reserve(n)
        (base + count).update(from: bytes, count: n)
        count += n
    }

    @inline(__always)
    mutating func appendStatic(_ s: StaticString) {
        append(s.utf8Start, s.utf8CodeUnitCount)
    }

    @inline(__always)
    mutating func appendUTF8(of string: String, escaped: Bool) {
        if let done = string.utf8.withContiguousStorageIfAvailable({ buffer in
            escaped ? appendEscaped(buffer) : appendRaw(buffer)
        }) {
            return done
        }
        var copy = string
        copy.withUTF8 { escaped ? appendEscaped($0) : appendRaw($0) }
    }

    @inline(__always)
    mutating func appendRaw(_ buffer: UnsafeBufferPointer<UInt8>) {
        if let p = buffer.baseAddress { append(p, buffer.count) }
    }

    mutating func write(_ value: JSONValue, sorted: Bool) {
        switch value {
        case .null:
            appendStatic("null")
        case .bool(let b):
            if b { appendStatic("true") } else { appendStatic("false") }
        case .number(let n):
            appendUTF8(of: n.text, escaped: false)
        case .string(let s):
            appendUTF8(of: s, escaped: true)
        case .array(let elements):
            append(0x5B)  // [
            var first = true
            for element in elements {
                if !first { append(0x2C) }
                first = false
                write(element, sorted: sorted)
            }
            append(0x5D)  // ]
        case .object(let object):
            append(0x7B)  // {
            if sorted && object.count > 1 {
                writeSortedMembers(object.members)
            } else {
                writeMembers(object.members, sorted: sorted)
            }
            append(0x7D)  // }
        }
    }

    /// Writes members ordered by the UTF-8 bytes of their keys, sorting a permutation of
    /// indices rather than the members themselves (cheaper: no reference counting traffic).
    mutating func writeSortedMembers(_ members: [JSONObject.Member]) {
        let n = members.count
        members.withUnsafeBufferPointer { m in
            withUnsafeTemporaryAllocation(of: Int.self, capacity: n) { order in
                var alreadySorted = true
                for i in 0..<n {
                    order.initializeElement(at: i, to: i)
                    if i > 0 && alreadySorted && _utf8Compare(m[i - 1].key, m[i].key) > 0 { alreadySorted = false }
                }
                if !alreadySorted {
                    if n <= 32 {
                        // Insertion sort: objects are usually small.
                        for i in 1..<n {
                            let current = order[i]
                            var j = i - 1
                            while j >= 0 && _utf8Compare(m[order[j]].key, m[current].key) > 0 {
                                order[j + 1] = order[j]
                                j -= 1
                            }
                            order[j + 1] = current
                        }
                    } else {
                        var sortable = order
                        sortable.sort { _utf8Compare(m[$0].key, m[$1].key) < 0 }
                    }
                }
                var first = true
                for k in 0..<n {
                    let i = order[k]
                    if !first { append(0x2C) }
                    first = false
                    appendUTF8(of: m[i].key, escaped: true)
                    append(0x3A)
                    write(m[i].value, sorted: true)
                }
                _ = order.deinitialize()
            }
        }
    }

    @inline(__always)
    mutating func writeMembers(_ members: [JSONObject.Member], sorted: Bool) {
        var first = true
        for member in members {
            if !first { append(0x2C) }
            first = false
            appendUTF8(of: member.key, escaped: true)
            append(0x3A)
            write(member.value, sorted: sorted)
        }
    }

    private static let hexDigits: StaticString = "0123456789abcdef"

    /// Whether any of the 8 bytes is `"`, `\` or a control character.
    @inline(__always)
    static func hasSpecialByte(_ x: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let control = (x &- ones &* 0x20) & ~x & highs
        let q = x ^ (ones &* 0x22)
        let bs = x ^ (ones &* 0x5C)
        return control | ((q &- ones) & ~q & highs) | ((bs &- ones) & ~bs & highs) != 0
    }

    /// Whether a JSON string of these bytes needs any escape.
    static func needsEscaping(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let source = bytes.baseAddress else { return false }
        var i = 0
        while i + 8 <= bytes.count {
            if hasSpecialByte(UnsafeRawPointer(source + i).loadUnaligned(as: UInt64.self)) { return true }
            i += 8
        }
        while i < bytes.count {
            let byte = source[i]
            if byte < 0x20 || byte == 0x22 || byte == 0x5C { return true }
            i += 1
        }
        return false
    }

    /// Appends the bytes as a quoted JSON string, escaping `"`, `\` and control characters.
    mutating func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>) {
        let n = bytes.count
        // Common case (nothing to escape) needs n + 2 bytes; escapes reserve more as they come.
        reserve(n + 2)
        base[count] = 0x22
        count += 1
        guard let source = bytes.baseAddress, n > 0 else {
            base[count] = 0x22
            count += 1
            return
        }
        var runStart = 0
        var i = 0
        while i < n {
            // Skip 8 bytes at a time when none needs escaping (bytes >= 0x80 are written as-is).
            while i + 8 <= n, !Self.hasSpecialByte(UnsafeRawPointer(source + i).loadUnaligned(as: UInt64.self)) {
                i += 8
            }
            if i >= n { break }
            let b = source[i]
            if b >= 0x20 && b != 0x22 && b != 0x5C {
                i += 1
                continue
            }
            if i > runStart { append(source + runStart, i - runStart) }
            // Room for this escape (up to 6 bytes), the rest of the string and the closing quote.
            reserve(6 + (n - i) + 1)
            base[count] = 0x5C
            count += 1
            switch b {
            case 0x22: base[count] = 0x22; count += 1
            case 0x5C: base[count] = 0x5C; count += 1
            case 0x0A: base[count] = UInt8(ascii: "n"); count += 1
            case 0x0D: base[count] = UInt8(ascii: "r"); count += 1
            case 0x09: base[count] = UInt8(ascii: "t"); count += 1
            case 0x08: base[count] = UInt8(ascii: "b"); count += 1
            case 0x0C: base[count] = UInt8(ascii: "f"); count += 1
            default:
                let hex = _ByteWriter.hexDigits.utf8Start
                base[count] = UInt8(ascii: "u")
                base[count + 1] = 0x30
                base[count + 2] = 0x30
                base[count + 3] = hex[Int(b >> 4)]
                base[count + 4] = hex[Int(b & 0x0F)]
                count += 5
            }
            i += 1
            runStart = i
        }
        if n > runStart { append(source + runStart, n - runStart) }
        append(0x22)
    }
}

public enum JSONWriter {
    /// Appends an integer's decimal digits, without building a `String` (rows of listings and
    /// feeds write several each).
    public static func appendInteger(_ value: Int, to output: inout [UInt8]) {
        guard value >= 0 else { return output.append(contentsOf: String(value).utf8) }
        if value < 10 { return output.append(UInt8(ascii: "0") &+ UInt8(value)) }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var rest = value, count = 0
            while rest > 0 {
                digits[19 - count] = UInt8(ascii: "0") &+ UInt8(rest % 10)
                rest /= 10
                count += 1
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: digits[(20 - count)...]))
        }
    }

    /// Appends `value` as a JSON string literal with quotes, escaping `"` `\\` and control characters
    /// (\n \r \t \b \f and \u00XX for the rest); other characters are written as UTF-8 as-is (not \u-escaped).
    public static func appendString(_ value: String, to output: inout [UInt8]) {
        var value = value
        value.withUTF8 { appendEscaped($0, to: &output) }
    }

    public static func appendString(_ value: Substring, to output: inout [UInt8]) {
        var value = value
        value.withUTF8 { appendEscaped($0, to: &output) }
    }

    /// Whether a JSON string of these UTF-8 bytes needs any escape.
    public static func needsEscaping(utf8 bytes: UnsafeRawBufferPointer) -> Bool {
        _ByteWriter.needsEscaping(bytes.assumingMemoryBound(to: UInt8.self))
    }

    /// `appendString` for a string's UTF-8 held elsewhere (a stored ID borrowed from a statement).
    public static func appendString(utf8 bytes: UnsafeRawBufferPointer, to output: inout [UInt8]) {
        appendEscaped(bytes.assumingMemoryBound(to: UInt8.self), to: &output)
    }

    static func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
        // Most strings (IDs, keys, revisions) need no escape: appended as they are, without a
        // copy on the stack first.
        if !_ByteWriter.needsEscaping(bytes) {
            output.append(UInt8(ascii: "\""))
            output.append(contentsOf: bytes)
            output.append(UInt8(ascii: "\""))
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 512) { stackBuffer in
            var writer = _ByteWriter(initial: stackBuffer)
            defer { writer.release() }
            writer.appendEscaped(bytes)
            output.append(contentsOf: UnsafeBufferPointer(start: writer.base, count: writer.count))
        }
    }
}

extension Array where Element == UInt8 {
    /// Appends a literal's bytes: a copy of known length, where appending its `utf8` view goes
    /// through the generic sequence path (a listing appends several per row).
    @inlinable
    public mutating func append(literal: StaticString) {
        append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }
}
