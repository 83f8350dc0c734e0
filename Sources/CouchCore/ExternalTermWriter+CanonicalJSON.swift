/// JSON terms written from canonical bytes (`CanonicalJSON`), without building the values: the
/// same bytes `json(_:)` writes for the value they parse to. Lists and objects are written with
/// a count patched in once their end is found; an array of small integers is rewritten as
/// `STRING_EXT`, as `json(_:)` writes it.
extension ExternalTermWriter {
    /// `bytes` must be canonical JSON (checked by `CanonicalJSON`); nothing is checked here.
    public mutating func canonicalJSON(_ bytes: UnsafeBufferPointer<UInt8>) {
        var position = 0
        canonicalValue(bytes, &position)
    }

    private mutating func canonicalValue(_ bytes: UnsafeBufferPointer<UInt8>, _ position: inout Int) {
        switch bytes[position] {
        case _quote: canonicalString(bytes, &position)
        case _openBrace: canonicalObject(bytes, &position)
        case _openBracket: canonicalArray(bytes, &position)
        case UInt8(ascii: "t"): atom("true"); position += 4
        case UInt8(ascii: "f"): atom("false"); position += 5
        case UInt8(ascii: "n"): atom("null"); position += 4
        default: canonicalNumber(bytes, &position)
        }
    }

    private mutating func canonicalObject(_ bytes: UnsafeBufferPointer<UInt8>, _ position: inout Int) {
        tupleHeader(1)
        position += 1
        if bytes[position] == _closeBrace {
            position += 1
            emptyList()
            return
        }
        let header = beginList()
        var count = 0
        while true {
            tupleHeader(2)
            canonicalString(bytes, &position)
            position += 1  // :
            canonicalValue(bytes, &position)
            count += 1
            let separator = bytes[position]
            position += 1
            if separator == _closeBrace { break }
        }
        endList(header, count: count)
    }

    private mutating func canonicalArray(_ bytes: UnsafeBufferPointer<UInt8>, _ position: inout Int) {
        position += 1
        if bytes[position] == _closeBracket {
            position += 1
            emptyList()
            return
        }
        let header = beginList()
        var count = 0
        var smallIntegers = true
        while true {
            let written = self.bytes.count
            canonicalValue(bytes, &position)
            // SMALL_INTEGER_EXT: an integer literal in 0...255, which nothing else is written as.
            smallIntegers = smallIntegers && self.bytes.count == written + 2 && self.bytes[written] == Self.smallIntegerTag
            count += 1
            let separator = bytes[position]
            position += 1
            if separator == _closeBracket { break }
        }
        if smallIntegers && count <= 65_535 {
            // Each element was written as SMALL_INTEGER_EXT (tag, byte): keep the bytes.
            let values = (0..<count).map { self.bytes[header + 5 + 2 * $0 + 1] }
            truncate(to: header)
            byteList(values)
        } else {
            endList(header, count: count)
        }
    }

    /// A string as a binary, its escapes (only the writer's, in canonical JSON) undone.
    private mutating func canonicalString(_ bytes: UnsafeBufferPointer<UInt8>, _ position: inout Int) {
        position += 1
        let start = position
        // Eight bytes at a time up to the first quote or backslash (most strings have no escape).
        while position + 8 <= bytes.count {
            let word = UnsafeRawPointer(bytes.baseAddress! + position).loadUnaligned(as: UInt64.self)
            if _swarHasZero(word ^ (_ones &* UInt64(_quote))) | _swarHasZero(word ^ (_ones &* UInt64(_backslash))) != 0 {
                break
            }
            position += 8
        }
        while bytes[position] != _quote && bytes[position] != _backslash { position += 1 }
        if bytes[position] == _quote {
            binary(UnsafeBufferPointer(rebasing: bytes[start..<position]))
            position += 1
            return
        }
        var text = Array(UnsafeBufferPointer(rebasing: bytes[start..<position]))
        while bytes[position] != _quote {
            if bytes[position] == _backslash {
                switch bytes[position + 1] {
                case UInt8(ascii: "n"): text.append(0x0A)
                case UInt8(ascii: "r"): text.append(0x0D)
                case UInt8(ascii: "t"): text.append(0x09)
                case UInt8(ascii: "b"): text.append(0x08)
                case UInt8(ascii: "f"): text.append(0x0C)
                default: text.append(bytes[position + 1])  // \" or \\
                }
                position += 2
            } else {
                text.append(bytes[position])
                position += 1
            }
        }
        position += 1
        binary(text)
    }

    private mutating func canonicalNumber(_ bytes: UnsafeBufferPointer<UInt8>, _ position: inout Int) {
        let start = position
        var isInteger = true
        while position < bytes.count {
            let byte = bytes[position]
            if byte == _dot || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
                isInteger = false
            } else if !(byte == _minus || byte == _plus || (byte >= _zero && byte <= _nine)) {
                break
            }
            position += 1
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        let number = JSONNumber(text: text)
        if isInteger {
            if let value = number.intValue { integer(value) } else { integer(decimal: text[...].utf8) }
        } else {
            float(number.doubleValue)
        }
    }
}
