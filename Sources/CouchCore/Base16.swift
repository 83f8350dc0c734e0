/// Hexadecimal digits, in either case, as CouchDB reads them (revision digests, session
/// cookies, `%XX` in URLs). (`Digest.hex` writes them.)
public enum Base16 {
    /// One digit's value, or nil for a byte that is not a hexadecimal digit.
    public static func value(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The bytes an even number of digits encodes, or nil.
    public static func decode<Digits: Collection>(_ digits: Digits) -> [UInt8]? where Digits.Element == UInt8 {
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var high: UInt8?
        for digit in digits {
            guard let nibble = value(digit) else { return nil }
            if let first = high {
                bytes.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }
}
