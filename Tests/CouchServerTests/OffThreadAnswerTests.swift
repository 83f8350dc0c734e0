@testable import CouchServer
import Testing

/// Which paths are answered off the listener's threads: the routes that run design functions
/// or build an index, in their plain and partitioned forms, `_bulk_get`, and nothing else.
@Suite struct OffThreadAnswerTests {
    @Test(arguments: [
        "/db/_design/app/_view/by-name", "/db/_design/app/_view/by-name/queries", "/db/_design/app/_show/page/doc",
        "/db/_design/app/_list/table/by-name", "/db/_design/app/_update/bump/doc", "/db/_design/app/_rewrite/x/y",
        "/db/_design/app/_search/idx", "/db/_find", "//db//_find/", "/db/_partition/p/_find",
        "/db/_partition/p/_design/app/_view/by-name", "/db/_bulk_get", "/a%2Fb/_bulk_get", "/db/_revs_diff",
        "/db/_missing_revs",
    ])
    func longRoutes(path: String) {
        #expect(OffThreadAnswer.mayRunLong(path: path))
    }

    @Test(arguments: [
        "/", "/db", "/db/doc", "/db/doc/attachment", "/_all_dbs", "/db/_all_docs", "/db/_changes", "/db/_bulk_docs",
        "/db/_design/app", "/db/_design/app/_info", "/db/_design/app/attachment.js", "/db/_explain", "/db/_index",
        "/db/_find/more", "/db/_partition/p/_all_docs", "/db/_partition/p", "/db/_view_cleanup", "/db/_local/_view",
        "/_find", "/db/doc/_design/app/_view/v", "/db/_bulk_get/x", "/_bulk_get",
    ])
    func otherRoutes(path: String) {
        #expect(!OffThreadAnswer.mayRunLong(path: path))
    }

    @Test func listingsWithKeysInTheirBodyAreLong() {
        for path in ["/db/_all_docs", "/db/_design_docs", "/db/_all_docs/queries", "/db/_design_docs/queries"] {
            #expect(OffThreadAnswer.mayRunLong(method: "POST", path: path), "\(path)")
            #expect(!OffThreadAnswer.mayRunLong(method: "GET", path: path), "\(path)")
        }
        for path in ["/db/_local_docs", "/db/_all_docs/x", "/db/doc", "/_all_docs", "/db/_all_docs/queries/x"] {
            #expect(!OffThreadAnswer.mayRunLong(method: "POST", path: path), "\(path)")
        }
        #expect(OffThreadAnswer.mayRunLong(method: "GET", path: "/db/_design/app/_view/v"))
    }

    @Test func writesNameTheirDatabase() {
        #expect(OffThreadAnswer.writtenDatabase(method: "PUT", path: "/db/doc")?.rawValue == "db")
        #expect(OffThreadAnswer.writtenDatabase(method: "POST", path: "/db")?.rawValue == "db")
        #expect(OffThreadAnswer.writtenDatabase(method: "POST", path: "/db/_bulk_docs")?.rawValue == "db")
        #expect(OffThreadAnswer.writtenDatabase(method: "PUT", path: "/a%2Fb/doc/file.txt")?.rawValue == "a/b")
        #expect(OffThreadAnswer.writtenDatabase(method: "DELETE", path: "/_users/org.couchdb.user:x")?.rawValue == "_users")
        #expect(OffThreadAnswer.writtenDatabase(method: "COPY", path: "/db/doc")?.rawValue == "db")
        for (method, path) in [("GET", "/db/doc"), ("HEAD", "/db/doc"), ("POST", "/_session"), ("POST", "/_replicate"),
                               ("PUT", "/db/_local/x"), ("PUT", "/db/_design/app"), ("POST", "/db/_all_docs"), ("PUT", "/db/_security"), ("POST", "/")] {
            #expect(OffThreadAnswer.writtenDatabase(method: method, path: path) == nil, "\(method) \(path)")
        }
    }
}
