import CouchCore

/// CouchDB settings that Couchette reads from the entries its configuration keeps as given
/// (`ServerConfiguration.otherEntries`, which `_config` shows and changes as strings), besides
/// the authentication ones (`AuthenticationSettings`):
/// - `[couchette] node_name`: the node's name in CouchDB's `name@host` form (`/_membership`,
///   `/_node/{name}/...`, the scheduler's `node`), read at start; `couchette@127.0.0.1` by
///   default. Clients and tools that address a node by the name they configured need it.
/// - `[chttpd] decode_plus_to_space` (true, as in CouchDB 3): a `+` in a path segment is a
///   space (`/db/a+b` names `a b`); `%2B` is always `+`.
/// - `[uuids] algorithm`, `utc_id_suffix`, `max_count` (see `UUIDGenerator`).
struct CouchSettings: Sendable {
    var nodeName = ServerInfo.defaultNodeName
    var decodePlusToSpace = true
    var uuids = UUIDGenerator.Settings()

    init() {}

    init(_ file: ConfigurationFile) throws(ConfigurationError) {
        if let name = file.value("node_name", in: "couchette") {
            let parts = name.split(separator: "@", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty,
                  name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "/") }) else {
                throw ConfigurationError("[couchette] node_name must be name@host, not \"\(name)\"")
            }
            nodeName = name
        }
        if let text = file.value("decode_plus_to_space", in: "chttpd") {
            switch text.lowercased() {
            case "true": decodePlusToSpace = true
            case "false": decodePlusToSpace = false
            default: throw ConfigurationError("decode_plus_to_space must be true or false, not \"\(text)\"")
            }
        }
        if let text = file.value("algorithm", in: "uuids") {
            guard let algorithm = UUIDGenerator.Algorithm(rawValue: text) else {
                throw ConfigurationError("[uuids] algorithm must be sequential, random, utc_random or utc_id, not \"\(text)\"")
            }
            uuids.algorithm = algorithm
        }
        if let suffix = file.value("utc_id_suffix", in: "uuids") {
            // Document IDs are made of it: printable ASCII keeps them readable in any URL.
            guard suffix.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }), suffix.utf8.count <= 256 else {
                throw ConfigurationError("[uuids] utc_id_suffix must be at most 256 printable ASCII characters")
            }
            uuids.utcIDSuffix = suffix
        }
        if let text = file.value("max_count", in: "uuids") {
            guard let count = Int(text), (1...1_000_000).contains(count) else {
                throw ConfigurationError("[uuids] max_count must be an integer from 1 to 1000000, not \"\(text)\"")
            }
            uuids.maximumCount = count
        }
    }
}
