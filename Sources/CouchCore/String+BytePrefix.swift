/// CouchDB matches reserved prefixes (`_`, `_design/`, `_count`) on bytes, as Erlang's binary
/// patterns do. Swift's `hasPrefix` compares characters: a prefix followed by a combining mark
/// ends in another character, so `"_\u{301}x".hasPrefix("_")` is false.
extension StringProtocol {
    /// Whether the UTF-8 bytes begin with `prefix`'s.
    public func hasBytePrefix(_ prefix: String) -> Bool { utf8.starts(with: prefix.utf8) }

    /// What follows `prefix`'s bytes, or the whole string if it does not begin with them.
    /// `prefix` must be ASCII (so what follows starts on a scalar).
    public func droppingBytePrefix(_ prefix: String) -> String {
        guard hasBytePrefix(prefix) else { return String(self) }
        return String(decoding: utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
    }
}
