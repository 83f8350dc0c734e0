// libFuzzer target: query strings as a view query reads them (`ViewQueryOptions`, the widest
// parameter grammar: JSON keys, integers, booleans, enumerations, then CouchDB's cross-checks).
// The input is split into `name=value` pairs and percent-decoded as the listener decodes
// them, and read once more as a JSON body (the same parameters as JSON values). Every input
// gives options or a `CouchError`; nothing traps. Built by scripts/fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzQuery(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)
    let query = text.split(separator: "&").map { pair -> (name: String, value: String) in
        let halves = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let decode = { (part: Substring) in PercentDecoding.decode(part, plusIsSpace: true) ?? String(part) }
        return (decode(halves[0]), halves.count == 2 ? decode(halves[1]) : "")
    }
    for reduces in [false, true] {
        if var options = try? ViewQueryOptions(query: query) {
            _ = try? options.validate(viewReduces: reduces)
            _ = try? options.groupLevelSetting()
        }
    }
    if case .object(let body)? = try? JSONValue.parse(bytes, maximumDepth: 64),
       var options = try? ViewQueryOptions(query: query, body: body) {
        _ = try? options.validate(viewReduces: true)
    }
    return 0
}
