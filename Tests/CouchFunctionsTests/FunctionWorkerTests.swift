import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Testing

/// Design functions run in worker processes the server watches: a function that allocates
/// inside one native call (which no engine check interrupts) is stopped at the memory limit,
/// a client that hangs up stops its function, and one database's slow functions leave
/// workers and threads to the others.
@Suite struct FunctionWorkerTests {
    static let shows: JSONValue = [
        "hello": "function(doc, req) { return 'hello'; }",
        "typed": "function(doc, req) { var a = new Uint8Array(1024 * 1024 * 1024); a.fill(1); return String(a[7]); }",
        "split": "function(doc, req) { return String('x'.repeat(1 << 28).split('').join('').length); }",
        "loop": "function(doc, req) { while (true) {} }",
    ]

    static func server(timeout: Double = 30, memory: Int = 64 * 1024 * 1024) throws -> TestServer {
        var configuration = ServerConfiguration.testing()
        configuration.functions.timeout = timeout
        configuration.functions.memory = memory
        let server = try TestServer(configuration: configuration)
        for database in ["db", "other"] {
            try server.createDatabase(database)
            let ddoc: JSONValue = ["shows": shows]
            #expect(try server.json("PUT", "/\(database)/_design/app", body: ddoc.serializedString()).status == 201)
        }
        return server
    }

    @Test func allocationsInsideOneNativeCallStopAtTheMemoryLimit() throws {
        let server = try Self.server()
        defer { server.stop() }
        let before = ResidentMemory.ofThisProcess()
        for name in ["typed", "split"] {
            let (status, json) = try server.json("GET", "/db/_design/app/_show/\(name)")
            #expect(status == 500, "\(name)")
            #expect(json["error"] == "os_process_error", "\(name): \(json.serializedString())")
            #expect(json["reason"]?.stringValue?.contains("allocated more than 64 MB") == true, "\(json.serializedString())")
        }
        // The server (this process, for a TestServer) never held that memory, and answers on.
        #expect(ResidentMemory.ofThisProcess() - before < 256 * 1024 * 1024)
        #expect(try server.request("GET", "/db/_design/app/_show/hello").text == "hello")
    }

    @Test func aClientThatHangsUpStopsItsFunction() throws {
        let server = try Self.server(timeout: 120)
        defer { server.stop() }
        // As many loops as the database may run at once, each abandoned by its client.
        for _ in 0..<4 {
            let connection = try HTTPTestConnection(port: server.port)
            try connection.writeRaw(Array("GET /db/_design/app/_show/loop HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            Thread.sleep(forTimeInterval: 0.3)
            connection.close()
        }
        // Had the loops run on, the database's workers would be busy for two minutes.
        let connection = try HTTPTestConnection(port: server.port, timeout: 60)
        #expect(try connection.request("GET", "/db/_design/app/_show/hello").text == "hello")
    }

    @Test func oneDatabasesSlowFunctionsLeaveRoomForTheOthers() throws {
        let server = try Self.server(timeout: 120)
        defer { server.stop() }
        // A flood of loops in `db`, more than there are threads and workers for.
        let flood = try (0..<24).map { _ in
            let connection = try HTTPTestConnection(port: server.port)
            try connection.writeRaw(Array("GET /db/_design/app/_show/loop HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            return connection
        }
        Thread.sleep(forTimeInterval: 1)
        // Another database's function answers while the flood waits (its loops would take two
        // minutes to end).
        let connection = try HTTPTestConnection(port: server.port, timeout: 60)
        #expect(try connection.request("GET", "/other/_design/app/_show/hello").text == "hello")
        flood.forEach { $0.close() }
    }
}

/// This process's resident memory in bytes.
enum ResidentMemory {
    static func ofThisProcess() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
              let pages = Int(text.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// Feeds whose filter runs client code filter off the listener's threads.
@Suite struct FilteredFeedThreadTests {
    @Test func feedsWithALoopingFilterLeaveTheServerAnswering() throws {
        var configuration = ServerConfiguration.testing()
        configuration.functions.timeout = 120
        let server = try TestServer(configuration: configuration)
        defer { server.stop() }
        try server.createDatabase("db")
        let ddoc: JSONValue = ["filters": ["loop": "function(doc, req) { while (true) {} }"]]
        #expect(try server.json("PUT", "/db/_design/app", body: ddoc.serializedString()).status == 201)
        try server.put("db", "a", "{}")
        // More feeds than the listener has threads, each stuck in its filter for two minutes.
        let feeds = try (0..<40).map { index in
            let connection = try HTTPTestConnection(port: server.port)
            let feed = ["normal", "longpoll", "continuous", "eventsource"][index % 4]
            try connection.writeRaw(Array("GET /db/_changes?feed=\(feed)&filter=app/loop HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            return connection
        }
        Thread.sleep(forTimeInterval: 1)
        let connection = try HTTPTestConnection(port: server.port, timeout: 30)
        for _ in 0..<20 {
            #expect(try connection.request("GET", "/_up").status == 200)
            #expect(try connection.request("GET", "/db/a").status == 200)
        }
        feeds.forEach { $0.close() }
    }
}
