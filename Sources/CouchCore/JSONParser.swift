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

    public static func parse(_ bytes: ArraySlice<UInt8>, maximumDepth: Int = 512) throws(JSONParseError) -> JSONValue {
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

let _quote: UInt8 = 0x22  // "
let _backslash: UInt8 = 0x5C
let _slash: UInt8 = 0x2F
let _comma: UInt8 = 0x2C
let _colon: UInt8 = 0x3A
let _openBracket: UInt8 = 0x5B
let _closeBracket: UInt8 = 0x5D
let _openBrace: UInt8 = 0x7B
let _closeBrace: UInt8 = 0x7D
let _minus: UInt8 = 0x2D
let _plus: UInt8 = 0x2B
let _dot: UInt8 = 0x2E
let _zero: UInt8 = 0x30
let _nine: UInt8 = 0x39

// SWAR constants for scanning 8 bytes at a time.
let _ones: UInt64 = 0x0101_0101_0101_0101
let _highs: UInt64 = 0x8080_8080_8080_8080

/// Non-zero if any byte of `x` is less than `n` (n <= 128) or has its high bit set.
@inline(__always) func _swarLessOrHigh(_ x: UInt64, _ n: UInt64) -> UInt64 {
    ((x &- _ones &* n) | x) & _highs
}

/// Non-zero if any byte of `x` is zero.
@inline(__always) func _swarHasZero(_ x: UInt64) -> UInt64 {
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
    /// Set by `skipString` when a skipped string has a `\u` escape of a UTF-16 surrogate.
    var skippedSurrogate = false

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
        try skipNumber()
        let text = String(decoding: UnsafeBufferPointer(start: bytes + start, count: pos - start), as: UTF8.self)
        return JSONNumber(text: text)
    }
}
