/// Percent-encoding of URL parts, as CouchDB and its replicator write them: ASCII letters and
/// digits stay, so do the marks a caller keeps, a space becomes `+` where asked, and every
/// other UTF-8 byte becomes `%XX` (upper-case hex).
public enum PercentEncoding {
    /// RFC 3986's unreserved marks, which mochiweb's `quote_plus` also keeps.
    public static let unreservedMarks = Array("-._~".utf8)
    /// The marks CouchDB's `couch_util:url_encode` keeps (in `Location` headers).
    public static let couchURLMarks = Array("_.-:".utf8)

    public static func encode(_ text: String, keeping marks: [UInt8] = unreservedMarks, spaceAsPlus: Bool = false) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                output.append(byte)
            case _ where marks.contains(byte):
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
