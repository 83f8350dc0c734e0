import Foundation

/// Where the admin page's files (`Public/`) are found at run time, first match wins:
/// the directory configured (`--public-dir`, `[couchette] public_dir`); `Public/` next to
/// the executable; `../share/couchette/Public` beside an installed binary's `bin/`; the
/// source tree the binary was built from (a development build or the tests). A directory
/// counts only when it holds `index.html`.
public enum PublicDirectory {
    public static func locate(configured: String?) -> String? {
        if let configured, !configured.isEmpty { return canonical(configured) }
        return candidates().lazy.compactMap { path in
            FileManager.default.fileExists(atPath: path + "/index.html") ? canonical(path) : nil
        }.first
    }

    static func candidates() -> [String] {
        var paths: [String] = []
        if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            let directory = (executable as NSString).deletingLastPathComponent
            paths.append(directory + "/Public")
            paths.append((directory as NSString).deletingLastPathComponent + "/share/couchette/Public")
        }
        // This file is Sources/CouchServer/Static/PublicDirectory.swift in the source tree.
        var source = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { source.deleteLastPathComponent() }
        paths.append(source.path + "/Public")
        return paths
    }

    /// The absolute path with symbolic links resolved, so containment checks compare like with like.
    static func canonical(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return (path as NSString).standardizingPath }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
