// libFuzzer target: the JSON parser, and the writer on whatever it accepts (a parsed value
// must serialize and parse back to the same value). Built by scripts/fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let value = try? JSONValue.parse(bytes) else { return 0 }
    let again = try? JSONValue.parse(value.serialized())
    precondition(again == value, "serialize/parse round trip changed the value")
    return 0
}
