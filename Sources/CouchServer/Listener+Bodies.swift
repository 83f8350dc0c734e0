import CMicroHTTPD

// Response bodies handed to libmicrohttpd: copied when small, lent when large.
extension Listener {
    /// Bodies this large are lent to libmicrohttpd, not copied: a copy of a megabyte-sized body
    /// (a `_bulk_get` batch) lands on freshly mapped pages, whose faults cost more than the copy.
    private static let lentBodySize = 64 * 1024

    /// A libmicrohttpd response whose body is `bytes`.
    static func response(sending bytes: [UInt8]) -> OpaquePointer? {
        guard bytes.count >= lentBodySize else {
            return bytes.withUnsafeBytes { raw in
                MHD_create_response_from_buffer(raw.count, UnsafeMutableRawPointer(mutating: raw.baseAddress),
                                                MHD_ResponseMemoryMode(rawValue: 2)!) // MHD_RESPMEM_MUST_COPY
            }
        }
        // The box keeps the array (and so its storage, which a `let` never moves) alive until
        // libmicrohttpd destroys the response.
        let box = Unmanaged.passRetained(LentBody(bytes))
        let address = box.takeUnretainedValue().bytes.withUnsafeBytes { UnsafeMutableRawPointer(mutating: $0.baseAddress) }
        let response = MHD_create_response_from_buffer_with_free_callback_cls(bytes.count, address, lentBodyReleased,
                                                                              box.toOpaque())
        if response == nil { box.release() }
        return response
    }
}

/// A response body lent to libmicrohttpd (`Listener.response(sending:)`).
private final class LentBody {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
}

private let lentBodyReleased: MHD_ContentReaderFreeCallback = { context in
    guard let context else { return }
    Unmanaged<LentBody>.fromOpaque(context).release()
}
