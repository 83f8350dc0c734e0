import CouchCore
import Foundation

/// `GET /_utils/...`: the admin page's files from `Public/`, as CouchDB serves Fauxton.
/// `/_utils` redirects to `/_utils/` (so the page's relative URLs resolve), a folder
/// answers its `index.html`, and every file carries a validator (`ETag`) that browsers
/// revalidate on each use (`no-cache`), so a new version is seen at once and an unchanged
/// one costs a 304. Nothing outside the public directory (or a vendor directory, for
/// `vendor/NAME/...`) is ever served.
enum StaticFilesRoute {
    static func getFile(_ context: RouteContext) throws -> HTTPResponse {
        guard case .utils(let segments) = context.endpoint else { throw CouchError.notFound() }
        guard let root = context.server.publicDirectory else {
            throw CouchError.notFound("The admin page's files were not found; start the server with --public-dir")
        }
        let rawPath = context.request.path
        if segments.isEmpty, !rawPath.hasSuffix("/") {
            return HTTPResponse(status: 301, headers: [("Location", "/_utils/")])
        }
        // Each segment names one entry: no `..`, `.`, hidden files or `%2F`-joined paths.
        guard segments.allSatisfy(isPlainName) else { throw CouchError.notFound() }
        let (base, relative) = location(of: segments, publicRoot: root, vendors: context.server.vendorDirectories)
        var path = ([base] + relative).joined(separator: "/")
        guard var info = status(of: path) else { throw CouchError.notFound() }
        if info.isDirectory {
            guard rawPath.hasSuffix("/") else {
                return HTTPResponse(status: 301, headers: [("Location", "/_utils/" + segments.map(encode).joined(separator: "/") + "/")])
            }
            path += "/index.html"
            guard let index = status(of: path), !index.isDirectory else { throw CouchError.notFound() }
            info = index
        }
        // A symbolic link may point anywhere: only what resolves inside its root is served.
        let resolved = PublicDirectory.canonical(path)
        guard resolved.hasPrefix(base.hasSuffix("/") ? base : base + "/"), info.isRegular else { throw CouchError.notFound() }

        let etag = "\"\(String(info.size, radix: 16))-\(String(info.modified, radix: 16))\""
        var headers: [(name: String, value: String)] = [
            ("ETag", etag),
            ("Cache-Control", "no-cache"),
            ("X-Content-Type-Options", "nosniff"),
            // The page talks to this server only; the browser enforces it.
            ("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'"),
        ]
        if let match = context.request.header("if-none-match"),
           match.split(separator: ",").contains(where: { $0.trimmingWhitespace() == etag || $0.trimmingWhitespace() == "*" }) {
            return HTTPResponse(status: 304, headers: headers)
        }
        headers.insert(("Content-Type", contentType(of: resolved)), at: 0)
        return HTTPResponse(status: 200, headers: headers, body: .file(path: resolved, offset: 0, length: Int(info.size)))
    }

    /// The root a path is read from and the segments below it: `vendor/NAME/...` comes from
    /// that vendor's directory (see `VendorDirectory`) unless the public directory has it itself.
    static func location(of segments: [String], publicRoot: String, vendors: [String: String]) -> (String, [String]) {
        guard segments.count > 2, segments[0] == "vendor", let vendor = vendors[segments[1]],
              status(of: ([publicRoot] + segments).joined(separator: "/")) == nil else { return (publicRoot, segments) }
        return (vendor, Array(segments.dropFirst(2)))
    }

    static func isPlainName(_ segment: String) -> Bool {
        !segment.isEmpty && !segment.hasPrefix(".") && !segment.contains("/") && !segment.contains("\\")
            && !segment.unicodeScalars.contains { $0.value < 0x20 }
    }

    private static func encode(_ segment: String) -> String {
        segment.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? segment
    }

    struct FileStatus {
        var isDirectory: Bool
        var isRegular: Bool
        var size: Int64
        /// Modification time in nanoseconds since 1970, part of the validator.
        var modified: Int64
    }

    static func status(of path: String) -> FileStatus? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let type = info.st_mode & S_IFMT
        let nanoseconds = Int64(info.st_mtim.tv_sec).multipliedReportingOverflow(by: 1_000_000_000).partialValue
            &+ Int64(info.st_mtim.tv_nsec)
        return FileStatus(isDirectory: type == S_IFDIR, isRegular: type == S_IFREG, size: Int64(info.st_size),
                          modified: max(0, nanoseconds))
    }

    static let contentTypes: [String: String] = [
        "html": "text/html; charset=utf-8",
        "css": "text/css; charset=utf-8",
        // Module scripts are refused by browsers unless served with a JavaScript type.
        "js": "text/javascript; charset=utf-8",
        "mjs": "text/javascript; charset=utf-8",
        "json": "application/json",
        "svg": "image/svg+xml",
        "png": "image/png",
        "ico": "image/x-icon",
        "txt": "text/plain; charset=utf-8",
        "md": "text/markdown; charset=utf-8",
        "woff2": "font/woff2",
    ]

    static func contentType(of path: String) -> String {
        contentTypes[(path as NSString).pathExtension.lowercased()] ?? "application/octet-stream"
    }
}
