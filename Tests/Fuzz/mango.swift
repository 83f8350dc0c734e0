// libFuzzer target: the Mango selector parser, and matching what it accepts against the
// selector's own JSON as a document. Built by scripts/fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMango(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let json = try? JSONValue.parse(bytes, maximumDepth: 64),
          let selector = try? MangoSelector(json) else { return 0 }
    _ = selector.matches(json)
    return 0
}
