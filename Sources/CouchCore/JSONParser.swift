// Strict RFC 8259 JSON parser working on UTF-8 bytes in one pass. No Foundation.

public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset where the problem was found.
    public let offset: Int
    /// Short, human readable.
    public let message: String

    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    public var description: String { "\(message) at byte \(offset)" }
}

extension JSONValue {
    public static func parse(_ bytes: UnsafeRawBufferPointer, maximumDepth: Int = 512) throws(JSONParseError) -> JSONValue {
        let result: Result<JSONValue, JSONParseError> = bytes.withMemoryRebound(to: UInt8.self) { buffer in
            Result { () throws(JSONParseError) -> JSONValue in
                try _JSONParser.parse(buffer, maximumDepth: maximumDepth)
            }
        }
        return try result.get()
    }

    public static func parse(_ bytes: [UInt8], maximumDepth: Int = 512) throws(JSONParseError) -> JSONValue {
        let result: Result<JSONValue, JSONParseError> = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONParseError) -> JSONValue in
                try _JSONParser.parse(buffer, maximumDepth: maximumDepth)
            }
        }
        return try result.get()
    }

    public static func parse(_ text: String, maximumDepth: Int = 512) throws(JSONParseError) -> JSONValue {
        var text = text
        let result: Result<JSONValue, JSONParseError> = text.withUTF8 { buffer in
            Result { () throws(JSONParseError) -> JSONValue in
                try _JSONParser.parse(buffer, maximumDepth: maximumDepth)
            }
        }
        return try result.get()
    }
}

// MARK: - Byte constants

private let _quote: UInt8 = 0x22  // "
private let _backslash: UInt8 = 0x5C
private let _slash: UInt8 = 0x2F
private let _comma: UInt8 = 0x2C
private let _colon: UInt8 = 0x3A
private let _openBracket: UInt8 = 0x5B
private let _closeBracket: UInt8 = 0x5D
private let _openBrace: UInt8 = 0x7B
private let _closeBrace: UInt8 = 0x7D
private let _minus: UInt8 = 0x2D
private let _plus: UInt8 = 0x2B
private let _dot: UInt8 = 0x2E
private let _zero: UInt8 = 0x30
private let _nine: UInt8 = 0x39

// SWAR constants for scanning 8 bytes at a time.
private let _ones: UInt64 = 0x0101_0101_0101_0101
private let _highs: UInt64 = 0x8080_8080_8080_8080

/// Non-zero if any byte of `x` is less than `n` (n <= 128) or has its high bit set.
@inline(__always) private func _swarLessOrHigh(_ x: UInt64, _ n: UInt64) -> UInt64 {
    ((x &- _ones &* n) | x) & _highs
}

/// Non-zero if any byte of `x` is zero.
@inline(__always) private func _swarHasZero(_ x: UInt64) -> UInt64 {
    (x &- _ones) & ~x & _highs
}

// MARK: - Parser

struct _JSONParser {
    let bytes: UnsafePointer<UInt8>
    let end: Int
    var pos: Int = 0
    var depth: Int = 0
    let maximumDepth: Int
    /// Reused buffer for strings containing escapes.
    var scratch: [UInt8] = []
    /// Stacks of values and members of the containers being parsed (see `parseArray`).
    var valueStack: UnsafeMutablePointer<JSONValue>? = nil
    var valueCount = 0
    var valueCapacity = 0
    var memberStack: UnsafeMutablePointer<JSONObject.Member>? = nil
    var memberCount = 0
    var memberCapacity = 0

    init(start: UnsafePointer<UInt8>, count: Int, maximumDepth: Int) {
        self.bytes = start
        self.end = count
        self.maximumDepth = maximumDepth
    }

    static func parse(_ buffer: UnsafeBufferPointer<UInt8>, maximumDepth: Int) throws(JSONParseError) -> JSONValue {
        guard let start = buffer.baseAddress, buffer.count > 0 else {
            throw JSONParseError(offset: 0, message: "empty input")
        }
        var parser = _JSONParser(start: start, count: buffer.count, maximumDepth: maximumDepth)
        defer { parser.releaseStacks() }
        return try parser.parseDocument()
    }

    @inline(__always)
    func fail(_ message: String, at offset: Int) -> JSONParseError {
        JSONParseError(offset: offset, message: message)
    }

    func unexpected(at offset: Int) -> JSONParseError {
        let b = bytes[offset]
        if b >= 0x21 && b <= 0x7E {
            return fail("unexpected character '\(Character(Unicode.Scalar(b)))'", at: offset)
        }
        return fail("unexpected byte 0x\(String(b, radix: 16, uppercase: true))", at: offset)
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        if pos >= end { throw fail("empty input", at: pos) }
        let value = try parseValue()
        skipWhitespace()
        if pos != end { throw fail("trailing characters after JSON value", at: pos) }
        return value
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while pos < end {
            let b = bytes[pos]
            if b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { pos += 1 } else { return }
        }
    }

    // Inlined into the container parsers so each nesting level costs one stack frame, not two.
    @inline(__always)
    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard pos < end else { throw fail("unexpected end of input", at: pos) }
        switch bytes[pos] {
        case _quote:
            return .string(try parseString())
        case _openBrace:
            return try parseObject()
        case _openBracket:
            return try parseArray()
        case _minus, _zero ... _nine:
            return .number(try parseNumber())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        default:
            throw unexpected(at: pos)
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let n = literal.utf8CodeUnitCount
        let p = literal.utf8Start
        for i in 0..<n {
            guard pos + i < end else { throw fail("unexpected end of input", at: pos + i) }
            if bytes[pos + i] != p[i] { throw unexpected(at: pos + i) }
        }
        pos += n
    }

    // MARK: Containers
    //
    // Elements and members being parsed are pushed on two stacks shared by the whole parse, then
    // moved into an array of exactly the right size when their container closes: one allocation
    // per container, no regrowth.

    @inline(__always)
    mutating func pushValue(_ value: consuming JSONValue) {
        if valueCount == valueCapacity {
            let newCapacity = Swift.max(32, valueCapacity * 2)
            let grown = UnsafeMutablePointer<JSONValue>.allocate(capacity: newCapacity)
            if let old = valueStack {
                grown.moveInitialize(from: old, count: valueCount)
                old.deallocate()
            }
            valueStack = grown
            valueCapacity = newCapacity
        }
        (valueStack! + valueCount).initialize(to: value)
        valueCount += 1
    }

    @inline(__always)
    mutating func pushMember(_ member: consuming JSONObject.Member) {
        if memberCount == memberCapacity {
            let newCapacity = Swift.max(32, memberCapacity * 2)
            let grown = UnsafeMutablePointer<JSONObject.Member>.allocate(capacity: newCapacity)
            if let old = memberStack {
                grown.moveInitialize(from: old, count: memberCount)
                old.deallocate()
            }
            memberStack = grown
            memberCapacity = newCapacity
        }
        (memberStack! + memberCount).initialize(to: member)
        memberCount += 1
    }

    /// Frees whatever is left on the stacks (after an error, or at the end).
    mutating func releaseStacks() {
        if let values = valueStack {
            values.deinitialize(count: valueCount)
            values.deallocate()
            valueStack = nil
        }
        if let members = memberStack {
            members.deinitialize(count: memberCount)
            members.deallocate()
            memberStack = nil
        }
        valueCount = 0
        valueCapacity = 0
        memberCount = 0
        memberCapacity = 0
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        depth += 1
        if depth > maximumDepth { throw fail("nesting too deep", at: pos) }
        pos += 1  // [
        skipWhitespace()
        if pos < end && bytes[pos] == _closeBracket {
            pos += 1
            depth -= 1
            return .array([])
        }
        let base = valueCount
        while true {
            skipWhitespace()
            pushValue(try parseValue())
            skipWhitespace()
            guard pos < end else { throw fail("unexpected end of input", at: pos) }
            let b = bytes[pos]
            if b == _comma {
                pos += 1
            } else if b == _closeBracket {
                pos += 1
                depth -= 1
                let n = valueCount - base
                let source = valueStack! + base
                let elements = [JSONValue](unsafeUninitializedCapacity: n) { buffer, count in
                    buffer.baseAddress!.moveInitialize(from: source, count: n)
                    count = n
                }
                valueCount = base
                return .array(elements)
            } else {
                throw fail("expected ',' or ']'", at: pos)
            }
        }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        depth += 1
        if depth > maximumDepth { throw fail("nesting too deep", at: pos) }
        pos += 1  // {
        skipWhitespace()
        if pos < end && bytes[pos] == _closeBrace {
            pos += 1
            depth -= 1
            return .object(JSONObject())
        }
        let base = memberCount
        var index: [_JSONKey: Int]? = nil  // built once the object grows past the threshold
        while true {
            skipWhitespace()
            guard pos < end else { throw fail("unexpected end of input", at: pos) }
            guard bytes[pos] == _quote else { throw fail("expected string for object key", at: pos) }
            let key = try parseString()
            skipWhitespace()
            guard pos < end else { throw fail("unexpected end of input", at: pos) }
            guard bytes[pos] == _colon else { throw fail("expected ':' after object key", at: pos) }
            pos += 1
            skipWhitespace()
            let value = try parseValue()

            // Duplicate keys: keep the last value at the first occurrence's position.
            if index != nil {
                let k = _JSONKey(key)
                if let existing = index![k] {
                    memberStack![base + existing].value = value
                } else {
                    index![k] = memberCount - base
                    pushMember((key: key, value: value))
                }
            } else {
                var duplicate = -1
                let keyCount = key.utf8.count
                var i = base
                while i < memberCount {
                    let other = memberStack![i].key
                    if other.utf8.count == keyCount && _utf8Equal(other, key) {
                        duplicate = i
                        break
                    }
                    i += 1
                }
                if duplicate >= 0 {
                    memberStack![duplicate].value = value
                } else {
                    pushMember((key: key, value: value))
                    let n = memberCount - base
                    if n > JSONObject.indexThreshold {
                        var built = [_JSONKey: Int](minimumCapacity: n * 2)
                        for j in 0..<n { built[_JSONKey(memberStack![base + j].key)] = j }
                        index = built
                    }
                }
            }

            skipWhitespace()
            guard pos < end else { throw fail("unexpected end of input", at: pos) }
            let b = bytes[pos]
            if b == _comma {
                pos += 1
            } else if b == _closeBrace {
                pos += 1
                depth -= 1
                let n = memberCount - base
                let source = memberStack! + base
                let members = [JSONObject.Member](unsafeUninitializedCapacity: n) { buffer, count in
                    buffer.baseAddress!.moveInitialize(from: source, count: n)
                    count = n
                }
                memberCount = base
                return .object(JSONObject(uniqueMembers: members, index: index))
            } else {
                throw fail("expected ',' or '}'", at: pos)
            }
        }
    }

    // MARK: Numbers

    mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
        let start = pos
        if bytes[pos] == _minus {
            pos += 1
            guard pos < end else { throw fail("invalid number", at: pos) }
        }
        let first = bytes[pos]
        if first == _zero {
            pos += 1
            if pos < end && bytes[pos] >= _zero && bytes[pos] <= _nine {
                throw fail("leading zeros are not allowed", at: start)
            }
        } else if first >= 0x31 && first <= _nine {
            pos += 1
            while pos < end && bytes[pos] >= _zero && bytes[pos] <= _nine { pos += 1 }
        } else {
            throw fail("invalid number", at: pos)
        }
        if pos < end && bytes[pos] == _dot {
            pos += 1
            let digitsStart = pos
            while pos < end && bytes[pos] >= _zero && bytes[pos] <= _nine { pos += 1 }
            if pos == digitsStart { throw fail("invalid number", at: pos) }
        }
        if pos < end && (bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E")) {
            pos += 1
            if pos < end && (bytes[pos] == _plus || bytes[pos] == _minus) { pos += 1 }
            let digitsStart = pos
            while pos < end && bytes[pos] >= _zero && bytes[pos] <= _nine { pos += 1 }
            if pos == digitsStart { throw fail("invalid number", at: pos) }
        }
        let text = String(decoding: UnsafeBufferPointer(start: bytes + start, count: pos - start), as: UTF8.self)
        return JSONNumber(text: text)
    }

    // MARK: Strings

    /// `pos` is at the opening quote. Returns with `pos` after the closing quote.
    mutating func parseString() throws(JSONParseError) -> String {
        let openQuote = pos
        pos += 1
        let start = pos
        // Fast scan: no escapes, no control characters.
        while true {
            // 8 bytes at a time while all are plain ASCII that needs no attention.
            while pos + 8 <= end {
                let x = UnsafeRawPointer(bytes + pos).loadUnaligned(as: UInt64.self)
                let special = _swarLessOrHigh(x, 0x20)
                    | _swarHasZero(x ^ (_ones &* UInt64(_quote)))
                    | _swarHasZero(x ^ (_ones &* UInt64(_backslash)))
                if special != 0 { break }
                pos += 8
            }
            guard pos < end else { throw fail("unterminated string", at: openQuote) }
            let b = bytes[pos]
            if b == _quote {
                let s = String(decoding: UnsafeBufferPointer(start: bytes + start, count: pos - start), as: UTF8.self)
                pos += 1
                return s
            } else if b == _backslash {
                return try parseEscapedString(openQuote: openQuote, start: start)
            } else if b < 0x20 {
                throw fail("unescaped control character in string", at: pos)
            } else if b < 0x80 {
                pos += 1
            } else {
                try validateUTF8Sequence()
            }
        }
    }

    /// Validates one multi-byte UTF-8 sequence at `pos` (lead byte >= 0x80) and advances past it.
    @inline(__always)
    mutating func validateUTF8Sequence() throws(JSONParseError) {
        let lead = bytes[pos]
        let length: Int
        var lo: UInt8 = 0x80, hi: UInt8 = 0xBF  // allowed range of the second byte
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; lo = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; hi = 0x9F  // excludes UTF-8 encoded surrogates
        case 0xF0: length = 4; lo = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; hi = 0x8F
        default: throw fail("invalid UTF-8", at: pos)
        }
        guard pos + length <= end else { throw fail("invalid UTF-8", at: pos) }
        let second = bytes[pos + 1]
        guard second >= lo && second <= hi else { throw fail("invalid UTF-8", at: pos) }
        var i = 2
        while i < length {
            let c = bytes[pos + i]
            guard c & 0xC0 == 0x80 else { throw fail("invalid UTF-8", at: pos) }
            i += 1
        }
        pos += length
    }

    /// Slow path: the string at `start` has at least one escape, at `pos`.
    mutating func parseEscapedString(openQuote: Int, start: Int) throws(JSONParseError) -> String {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(start: bytes + start, count: pos - start))
        var runStart = pos
        while true {
            guard pos < end else { throw fail("unterminated string", at: openQuote) }
            let b = bytes[pos]
            if b == _quote {
                scratch.append(contentsOf: UnsafeBufferPointer(start: bytes + runStart, count: pos - runStart))
                pos += 1
                return String(decoding: scratch, as: UTF8.self)
            } else if b == _backslash {
                scratch.append(contentsOf: UnsafeBufferPointer(start: bytes + runStart, count: pos - runStart))
                try parseEscape()
                runStart = pos
            } else if b < 0x20 {
                throw fail("unescaped control character in string", at: pos)
            } else if b < 0x80 {
                pos += 1
            } else {
                try validateUTF8Sequence()
            }
        }
    }

    /// `pos` at a backslash. Appends the decoded character to `scratch`.
    mutating func parseEscape() throws(JSONParseError) {
        let escapeStart = pos
        guard pos + 1 < end else { throw fail("unterminated string", at: pos) }
        let c = bytes[pos + 1]
        pos += 2
        switch c {
        case _quote: scratch.append(_quote)
        case _backslash: scratch.append(_backslash)
        case _slash: scratch.append(_slash)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            let unit = try parseHex4(escapeStart: escapeStart)
            var scalar: UInt32 = 0xFFFD
            if unit >= 0xD800 && unit <= 0xDBFF {
                // High surrogate: needs a following \uDC00-\uDFFF, otherwise U+FFFD.
                if pos + 1 < end && bytes[pos] == _backslash && bytes[pos + 1] == UInt8(ascii: "u") {
                    let save = pos
                    pos += 2
                    let low = try parseHex4(escapeStart: save)
                    if low >= 0xDC00 && low <= 0xDFFF {
                        scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                    } else {
                        pos = save  // not a pair: leave the second escape to be decoded on its own
                    }
                }
            } else if unit >= 0xDC00 && unit <= 0xDFFF {
                scalar = 0xFFFD  // lone low surrogate
            } else {
                scalar = UInt32(unit)
            }
            appendUTF8(scalar)
        default:
            throw fail("invalid escape", at: escapeStart)
        }
    }

    mutating func parseHex4(escapeStart: Int) throws(JSONParseError) -> UInt16 {
        guard pos + 4 <= end else { throw fail("invalid \\u escape", at: escapeStart) }
        var v: UInt16 = 0
        for i in 0..<4 {
            let h = bytes[pos + i]
            let d: UInt8
            switch h {
            case _zero ... _nine: d = h - _zero
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = h - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = h - UInt8(ascii: "A") + 10
            default: throw fail("invalid \\u escape", at: escapeStart)
            }
            v = v << 4 | UInt16(d)
        }
        pos += 4
        return v
    }

    @inline(__always)
    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | (scalar >> 6)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | (scalar >> 12)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            scratch.append(UInt8(0xF0 | (scalar >> 18)))
            scratch.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }
}
