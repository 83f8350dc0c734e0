// libFuzzer target: the JSON parser, the writer on whatever it accepts (a parsed value must
// serialize and parse back to the same value), and JSONCursor's skipping, which must accept
// exactly what the parser accepts (the replicator passes on documents it only skipped).
// Built by scripts/fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let skipped = try? JSONCursor.read(bytes[...]) { cursor throws(JSONParseError) in try cursor.skipValue() }
    guard let value = try? JSONValue.parse(bytes) else {
        precondition(skipped == nil, "the cursor accepted what the parser refuses")
        return 0
    }
    precondition(skipped != nil, "the cursor refused what the parser accepts")
    let again = try? JSONValue.parse(value.serialized())
    precondition(again == value, "serialize/parse round trip changed the value")
    return 0
}
