// libFuzzer target: the streaming multipart reader, fed the input in chunks whose sizes the
// first byte chooses. Built by scripts/fuzz.
final class Sink: MultipartReader.Delegate {
    var bytes = 0
    func beginPart(headers: [String: String]) throws {}
    func partData(_ data: ArraySlice<UInt8>) throws { bytes += data.count }
    func endPart() throws {}
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMultipart(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 1 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let chunk = Int(bytes[0] % 64) + 1
    let body = Array(bytes.dropFirst())
    let sink = Sink()
    let reader = MultipartReader(boundary: "b", delegate: sink)
    var offset = 0
    do {
        while offset < body.count {
            try reader.append(Array(body[offset..<min(body.count, offset + chunk)]))
            offset += chunk
        }
        try reader.finish()
    } catch {}
    precondition(sink.bytes <= body.count)
    _ = MultipartReader.boundary(fromContentType: String(decoding: body.prefix(200), as: UTF8.self))
    return 0
}
