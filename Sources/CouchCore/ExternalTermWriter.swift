/// Erlang's external term format, as `term_to_binary(Term, [{minor_version, 1}])` writes it,
/// for the terms CouchDB hashes into revision IDs: atoms, integers of any size, floats,
/// binaries, lists and tuples, and JSON bodies in the form CouchDB's JSON decoder (jiffy)
/// gives them (`{[{Key, Value}, ...]}`, strings as binaries, `true`/`false`/`null` as atoms).
///
/// Only what `term_to_binary` would write for these terms; never decoded, only hashed.
public struct ExternalTermWriter: Sendable {
    public private(set) var bytes: [UInt8] = [131]  // the format's version byte

    public init() {}

    /// A writer for a part of a term, to be added to a whole one with `appendRaw`: no version byte.
    public init(fragment: Bool) {
        if fragment { bytes = [] }
    }

    // Tags of the external term format.
    private enum Tag {
        static let newFloat: UInt8 = 70
        static let smallInteger: UInt8 = 97
        static let integer: UInt8 = 98
        static let atom: UInt8 = 100
        static let smallTuple: UInt8 = 104
        static let largeTuple: UInt8 = 105
        static let `nil`: UInt8 = 106
        static let string: UInt8 = 107
        static let list: UInt8 = 108
        static let binary: UInt8 = 109
        static let smallBig: UInt8 = 110
        static let largeBig: UInt8 = 111
    }

    /// `SMALL_INTEGER_EXT`'s tag, by which an element written as an integer in 0...255 is known.
    static let smallIntegerTag = Tag.smallInteger

    /// Bytes already in the format (a precomputed part of a term).
    public mutating func appendRaw(_ raw: ArraySlice<UInt8>) { bytes.append(contentsOf: raw) }

    /// An atom of Latin-1 characters (`minor_version` 1 writes them as `ATOM_EXT`).
    public mutating func atom(_ name: StaticString) {
        bytes.append(Tag.atom)
        append16(name.utf8CodeUnitCount)
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
    }

    public mutating func bool(_ value: Bool) {
        if value { atom("true") } else { atom("false") }
    }

    public mutating func integer(_ value: Int) {
        if value >= 0 && value <= 255 {
            bytes.append(Tag.smallInteger)
            bytes.append(UInt8(value))
        } else if value >= Int(Int32.min) && value <= Int(Int32.max) {
            bytes.append(Tag.integer)
            append32(UInt32(bitPattern: Int32(value)))
        } else {
            var magnitude = value.magnitude
            var digits: [UInt8] = []
            while magnitude > 0 {
                digits.append(UInt8(truncatingIfNeeded: magnitude))
                magnitude >>= 8
            }
            big(negative: value < 0, littleEndianDigits: digits)
        }
    }

    /// An integer given as decimal text of any length ("-123456789012345678901234567890").
    public mutating func integer(decimal text: Substring.UTF8View) {
        var negative = false
        var digits = text[...]
        if digits.first == UInt8(ascii: "-") {
            negative = true
            digits = digits.dropFirst()
        }
        // Base-256 digits, least significant first, built by repeated multiply-and-add.
        var magnitude: [UInt8] = []
        for character in digits {
            var carry = Int(character &- UInt8(ascii: "0"))
            for index in magnitude.indices {
                let value = Int(magnitude[index]) * 10 + carry
                magnitude[index] = UInt8(value & 0xff)
                carry = value >> 8
            }
            while carry > 0 {
                magnitude.append(UInt8(carry & 0xff))
                carry >>= 8
            }
        }
        if magnitude.count <= 8 {
            var value: UInt64 = 0
            for digit in magnitude.reversed() { value = value << 8 | UInt64(digit) }
            if value <= UInt64(Int.max) {
                integer(negative ? -Int(value) : Int(value))
                return
            }
        }
        big(negative: negative, littleEndianDigits: magnitude)
    }

    private mutating func big(negative: Bool, littleEndianDigits digits: [UInt8]) {
        if digits.count <= 255 {
            bytes.append(Tag.smallBig)
            bytes.append(UInt8(digits.count))
        } else {
            bytes.append(Tag.largeBig)
            append32(UInt32(truncatingIfNeeded: digits.count))
        }
        bytes.append(negative ? 1 : 0)
        bytes.append(contentsOf: digits)
    }

    /// `NEW_FLOAT_EXT`: the IEEE 754 bits, big-endian (what `minor_version` 1 selects).
    public mutating func float(_ value: Double) {
        bytes.append(Tag.newFloat)
        let bits = value.bitPattern
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
    }

    public mutating func binary<Bytes: Collection>(_ value: Bytes) where Bytes.Element == UInt8 {
        bytes.append(Tag.binary)
        append32(UInt32(truncatingIfNeeded: value.count))
        bytes.append(contentsOf: value)
    }

    public mutating func binary(_ value: String) {
        var text = value
        text.withUTF8 { binary($0) }
    }

    /// The start of a proper list of `count` elements; the elements follow, then `endList`.
    /// An empty list is `emptyList()` alone.
    public mutating func listHeader(_ count: Int) {
        bytes.append(Tag.list)
        append32(UInt32(truncatingIfNeeded: count))
    }

    /// The start of a list whose count is not known yet: returns where it starts, for `endList(_:count:)`.
    mutating func beginList() -> Int {
        let start = bytes.count
        listHeader(0)
        return start
    }

    /// Ends the list begun at `start` with `count` elements.
    mutating func endList(_ start: Int, count: Int) {
        let value = UInt32(truncatingIfNeeded: count)
        for index in 0..<4 { bytes[start + 1 + index] = UInt8(truncatingIfNeeded: value >> UInt32(24 - 8 * index)) }
        endList()
    }

    /// Drops what was written from `count` on.
    mutating func truncate(to count: Int) { bytes.removeSubrange(count...) }

    /// `[]`, also the tail that ends every proper list.
    public mutating func emptyList() { bytes.append(Tag.nil) }
    public mutating func endList() { bytes.append(Tag.nil) }

    public mutating func tupleHeader(_ arity: Int) {
        if arity <= 255 {
            bytes.append(Tag.smallTuple)
            bytes.append(UInt8(arity))
        } else {
            bytes.append(Tag.largeTuple)
            append32(UInt32(truncatingIfNeeded: arity))
        }
    }

    /// A list whose elements are all integers 0...255 is written as `STRING_EXT` (up to 65,535 of them).
    mutating func byteList(_ values: [UInt8]) {
        bytes.append(Tag.string)
        append16(values.count)
        bytes.append(contentsOf: values)
    }

    private mutating func append16(_ value: Int) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    private mutating func append32(_ value: UInt32) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }
}

// MARK: - JSON as CouchDB decodes it

extension ExternalTermWriter {
    /// A JSON value as jiffy decodes it: objects `{[{Key, Value}]}` in member order, strings
    /// and keys as UTF-8 binaries, integer literals as integers (of any size), other numbers
    /// as floats, `true`/`false`/`null` as atoms, arrays as lists.
    public mutating func json(_ value: JSONValue) {
        switch value {
        case .null: atom("null")
        case .bool(let flag): bool(flag)
        case .string(let text): binary(text)
        case .number(let number): self.number(number)
        case .object(let object): self.object(object)
        case .array(let elements):
            if elements.isEmpty {
                emptyList()
            } else if elements.count <= 65_535, let small = Self.smallIntegers(elements) {
                byteList(small)
            } else {
                listHeader(elements.count)
                for element in elements { json(element) }
                endList()
            }
        }
    }

    public mutating func object(_ object: JSONObject) {
        tupleHeader(1)
        if object.isEmpty {
            emptyList()
            return
        }
        listHeader(object.count)
        for (key, value) in object {
            tupleHeader(2)
            binary(key)
            json(value)
        }
        endList()
    }

    private mutating func number(_ number: JSONNumber) {
        if number.isIntegerLiteral {
            if let value = number.intValue { integer(value) } else { integer(decimal: number.text[...].utf8) }
        } else {
            float(number.doubleValue)
        }
    }

    /// The elements as bytes if every one is an integer literal in 0...255.
    private static func smallIntegers(_ elements: [JSONValue]) -> [UInt8]? {
        var result: [UInt8] = []
        result.reserveCapacity(elements.count)
        for element in elements {
            guard case .number(let number) = element, number.isIntegerLiteral,
                  let value = number.intValue, value >= 0, value <= 255 else { return nil }
            result.append(UInt8(value))
        }
        return result
    }
}
