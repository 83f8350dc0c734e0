/// How deeply JSON may nest. The parser refuses anything deeper than `maximumParsed`; a
/// document may nest `maximumDocument` levels, so that every envelope the server or a peer
/// wraps it in (`_bulk_get`'s results, `_changes` rows, `_bulk_docs`) still parses: a
/// document is accepted only if it can also be sent and read back.
public enum JSONDepth {
    public static let maximumParsed = 512
    public static let maximumDocument = 500

    /// The reason given when a document or body nests too deeply.
    public static var documentReason: String { "Document nests deeper than \(maximumDocument) levels" }
    public static var bodyReason: String { "JSON nests deeper than \(maximumParsed) levels" }

    /// Whether `value` nests more than `limit` levels (an object or array is one level).
    public static func exceeds(_ value: JSONValue, limit: Int) -> Bool {
        guard limit >= 0 else { return true }
        switch value {
        case .object(let object):
            return limit == 0 || object.contains { exceeds($0.value, limit: limit - 1) }
        case .array(let array):
            return limit == 0 || array.contains { exceeds($0, limit: limit - 1) }
        default:
            return false
        }
    }
}
