// libFuzzer target: the stored revision-tree decoder (bytes read back from a database file
// that may be damaged), and what is computed from a decoded tree. Built by scripts/fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRevisionTree(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let tree = try? RevisionTree(encoded: bytes) else { return 0 }
    _ = tree.leaves
    _ = tree.winner
    let again = try? RevisionTree(encoded: tree.encoded())
    precondition(again?.nodes.count == tree.nodes.count, "encode/decode round trip changed the tree")
    return 0
}
