// libFuzzer target: CouchDB's URL grammar (`Endpoint`). Any path parses or is refused with a
// `CouchError`, and a document or attachment it names, written back as the replicator and
// `Location` headers write it, reads back as the same endpoint. Built by scripts/fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEndpoint(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let path = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let endpoint = try? Endpoint(path: path) else { return 0 }
    let written: [String]
    switch endpoint {
    case .document(let database, let id):
        let name = "/" + PercentEncoding.encode(database.rawValue)
        written = [name + "/" + PercentEncoding.documentPath(id),
                   name + "/" + PercentEncoding.encode(id.rawValue, keeping: PercentEncoding.couchURLMarks)]
    case .attachment(let database, let id, let attachment):
        written = ["/" + PercentEncoding.encode(database.rawValue) + "/" + PercentEncoding.documentPath(id)
                   + "/" + PercentEncoding.encode(attachment)]
    default:
        return 0
    }
    for path in written where (try? Endpoint(path: path)) != endpoint {
        fatalError("\(endpoint) is written \(path), which reads back as \(String(describing: try? Endpoint(path: path)))")
    }
    return 0
}
