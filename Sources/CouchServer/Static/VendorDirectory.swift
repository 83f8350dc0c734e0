import Foundation

/// Third-party files the admin page uses, served under `/_utils/vendor/NAME/` from where the
/// system installs them, so the repository copies none and the page fetches nothing from
/// another host. Today one: CodeMirror 5, Debian's `libjs-codemirror`
/// (`/usr/share/javascript/codemirror`), or `[couchette] codemirror_dir`. A directory that is
/// not there is left out: the page then edits in plain text areas.
public enum VendorDirectory {
    public static let codeMirrorDefault = "/usr/share/javascript/codemirror"

    /// Name → canonical directory, for those present.
    public static func locate(codeMirror configured: String?) -> [String: String] {
        var directories: [String: String] = [:]
        let codeMirror = configured.flatMap { $0.isEmpty ? nil : $0 } ?? codeMirrorDefault
        if FileManager.default.fileExists(atPath: codeMirror + "/lib/codemirror.js") {
            directories["codemirror"] = PublicDirectory.canonical(codeMirror)
        }
        return directories
    }
}
