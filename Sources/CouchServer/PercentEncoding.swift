/// Percent-encoding as CouchDB writes path segments and query values (mochiweb's `quote_plus`):
/// letters, digits and `-._~` stay, a space becomes `+` where asked, every other byte `%XX`.
enum PercentEncoding {
    static func encode(_ text: String, spaceAsPlus: Bool = false) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"):
                output.append(byte)
            case UInt8(ascii: " ") where spaceAsPlus:
                output.append(UInt8(ascii: "+"))
            default:
                output.append(UInt8(ascii: "%"))
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0f)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
