/// Checks that JSON bytes are exactly what `JSONValue.write` makes of the value they parse to:
/// no whitespace between tokens, no escape the writer would not write (`\u` of any kind, `\/`),
/// no key twice in one object (the parser keeps one). Such bytes can be stored as they came,
/// without being parsed into values and written again; anything else gets `false` and goes the
/// parser's way, which also gives its errors (this check never explains a refusal).
struct CanonicalJSON: ~Copyable {
    private var parser: _JSONParser
    /// The keys of the objects being checked, for the duplicate test.
    private var keys: [Range<Int>] = []

    /// An object with more keys than this is not checked for duplicates (it is left to the parser).
    private static let keysChecked = 128

    /// A scanner of `buffer` from `start` (which must be inside it).
    init(_ buffer: UnsafeBufferPointer<UInt8>, from start: Int = 0, maximumDepth: Int) {
        parser = _JSONParser(start: buffer.baseAddress!, count: buffer.count, maximumDepth: maximumDepth)
        parser.pos = start
    }

    var position: Int { parser.pos }

    /// Passes an object's members, handing each one's key and value ranges to `member`; false if
    /// the object is not canonical.
    mutating func passObject(_ member: (_ key: Range<Int>, _ value: Range<Int>) -> Void) -> Bool {
        guard parser.pos < parser.end, parser.bytes[parser.pos] == _openBrace, enter() else { return false }
        let first = keys.count
        defer { keys.removeSubrange(first...) }
        if peek(_closeBrace) { return leave() }
        while true {
            guard let key = passKey(first: first) else { return false }
            let valueStart = parser.pos
            guard passValue() else { return false }
            member(key, valueStart..<parser.pos)
            if peek(_comma) { continue }
            return peek(_closeBrace) && leave()
        }
    }

    /// Passes the value at the cursor; false if it is not canonical.
    mutating func passValue() -> Bool {
        guard parser.pos < parser.end else { return false }
        switch parser.bytes[parser.pos] {
        case _quote: return passString()
        case _openBrace: return passMembers()
        case _openBracket: return passElements()
        case _minus, _zero ... _nine: return (try? parser.skipNumber()) != nil
        case UInt8(ascii: "t"): return (try? parser.expectLiteral("true")) != nil
        case UInt8(ascii: "f"): return (try? parser.expectLiteral("false")) != nil
        case UInt8(ascii: "n"): return (try? parser.expectLiteral("null")) != nil
        default: return false
        }
    }

    private mutating func passMembers() -> Bool {
        guard enter() else { return false }
        let first = keys.count
        defer { keys.removeSubrange(first...) }
        if peek(_closeBrace) { return leave() }
        while true {
            guard passKey(first: first) != nil, passValue() else { return false }
            if peek(_comma) { continue }
            return peek(_closeBrace) && leave()
        }
    }

    private mutating func passElements() -> Bool {
        guard enter() else { return false }
        if peek(_closeBracket) { return leave() }
        while true {
            guard passValue() else { return false }
            if peek(_comma) { continue }
            return peek(_closeBracket) && leave()
        }
    }

    /// A key, unlike the object's keys before it (from `first`), and its colon: the key's range,
    /// quotes included.
    private mutating func passKey(first: Int) -> Range<Int>? {
        let start = parser.pos
        guard start < parser.end, parser.bytes[start] == _quote, passString() else { return nil }
        let key = start..<parser.pos
        guard keys.count - first < Self.keysChecked else { return nil }
        for other in keys[first...] where other.count == key.count && sameBytes(other, key) { return nil }
        keys.append(key)
        return peek(_colon) ? key : nil
    }

    /// A string whose escapes are the writer's: `\"`, `\\` and the five named control characters.
    private mutating func passString() -> Bool {
        parser.pos += 1
        while true {
            parser.skipPlainBytes()
            guard parser.pos < parser.end else { return false }
            let byte = parser.bytes[parser.pos]
            if byte == _quote {
                parser.pos += 1
                return true
            }
            if byte == _backslash {
                guard parser.pos + 1 < parser.end else { return false }
                switch parser.bytes[parser.pos + 1] {
                case _quote, _backslash, UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"),
                     UInt8(ascii: "b"), UInt8(ascii: "f"):
                    parser.pos += 2
                default:
                    return false
                }
            } else if (try? parser.passStringByte(byte)) == nil {
                return false
            }
        }
    }

    private func sameBytes(_ one: Range<Int>, _ other: Range<Int>) -> Bool {
        var i = 0
        while i < one.count {
            if parser.bytes[one.lowerBound + i] != parser.bytes[other.lowerBound + i] { return false }
            i += 1
        }
        return true
    }

    private mutating func peek(_ byte: UInt8) -> Bool {
        guard parser.pos < parser.end, parser.bytes[parser.pos] == byte else { return false }
        parser.pos += 1
        return true
    }

    private mutating func enter() -> Bool {
        parser.depth += 1
        guard parser.depth <= parser.maximumDepth else { return false }
        parser.pos += 1
        return true
    }

    private mutating func leave() -> Bool {
        parser.depth -= 1
        return true
    }
}
