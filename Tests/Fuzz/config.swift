// libFuzzer target: ini text as `local.ini` and `--config` are read (`ConfigurationFile`) and
// each entry as `_config` and the start check it (`ConfigurationRules`). Any text parses
// (strictly, or leniently with its problems); nothing traps; and the entries the rules accept,
// written back as `_config` writes `local.ini`, read back as the same entries. Built by scripts/fuzz.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let (lenient, problems) = ConfigurationFile.lenient(text: text)
    if let strict = try? ConfigurationFile(text: text) {
        precondition(problems.isEmpty && strict.entries == lenient.entries, "strict and lenient reading disagree")
    } else {
        precondition(!problems.isEmpty, "a strict reading failed with no problem found")
    }
    var accepted: [ConfigurationFile.Entry] = []
    for entry in lenient.entries {
        _ = ConfigurationRules.kind(section: entry.section, key: entry.key)
        _ = ConfigurationRules.isPath(section: entry.section, key: entry.key)
        _ = ConfigurationRules.integer(entry.value)
        if (try? ConfigurationRules.check(section: entry.section, key: entry.key, value: entry.value)) != nil {
            accepted.append(entry)
        }
    }
    // The writer puts each section once, where it first appears.
    var order: [String] = []
    for entry in accepted where !order.contains(entry.section) { order.append(entry.section) }
    let expected = order.flatMap { section in accepted.filter { $0.section == section } }
    let written = ConfigurationFile(entries: accepted).text
    guard let reread = try? ConfigurationFile(text: written) else { fatalError("unreadable: \(written.debugDescription)") }
    precondition(reread.entries == expected, "\(expected) is written \(written.debugDescription), read back as \(reread.entries)")
    return 0
}
