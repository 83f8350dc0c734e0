import Foundation

/// Whether the suite runs under a sanitizer (`scripts/test --sanitize=KIND` says so in
/// `COUCHETTE_SANITIZER`). AddressSanitizer's quarantine and shadow memory keep freed memory
/// resident, so a test that measures the server's memory checks everything else but that.
public enum Sanitizer {
    public static let active: String? = ProcessInfo.processInfo.environment["COUCHETTE_SANITIZER"]

    /// Whether resident-memory figures mean what they mean in an ordinary build.
    public static var memoryFiguresAreMeaningful: Bool { active == nil }
}
