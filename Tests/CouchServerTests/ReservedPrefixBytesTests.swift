import CouchCore
import CouchTestSupport
import Testing

/// CouchDB matches its reserved prefixes on bytes (Erlang's binary patterns): `_` or `_design/`
/// followed by a combining mark (U+0301, `%CC%81` in a path) is still that prefix, though Swift
/// reads the pair as another character.
@Suite struct ReservedPrefixBytesTests {
    static let mark = "\u{301}"

    @Test func attachmentNamesUserNamesAndRolesBeginningWithAnUnderscoreAreRefused() throws {
        let fixture = try SecuredServer()
        let server = fixture.server
        #expect(try server.request("PUT", "/db", headers: [fixture.admin]).status == 201)
        let attached = try server.json("PUT", "/db/doc", headers: [fixture.admin], body:
            #"{"_attachments":{"_\#(Self.mark)a.txt":{"content_type":"text/plain","data":"aGk="}}}"#)
        #expect(attached.status == 400)
        #expect(attached.json["reason"] == JSONValue("Attachment name '_\(Self.mark)a.txt' starts with prohibited character '_'"))
        #expect(try server.request("GET", "/db/doc", headers: [fixture.admin]).status == 404)

        let name = "_\(Self.mark)x"
        let user = try server.json("PUT", "/_users/org.couchdb.user:_%CC%81x", body:
            #"{"name":"\#(name)","password":"p","roles":[],"type":"user"}"#)
        #expect(user.status == 403 && user.json["reason"] == "Username may not start with underscore.")
        let role = try server.json("PUT", "/_users/org.couchdb.user:eve", headers: [fixture.admin], body:
            #"{"name":"eve","password":"p","roles":["_\#(Self.mark)r"],"type":"user"}"#)
        #expect(role.status == 403 && role.json["reason"] == "No system roles (starting with underscore) in users db.")
    }

    @Test func aMangoIndexInADesignDocumentNamedWithAMarkKeepsItsName() throws {
        let server = try TestServer()
        defer { server.stop() }
        try server.createDatabase("db")
        let design = "_design/\(Self.mark)x"
        let created = try server.json("POST", "/db/_index", body:
            #"{"index":{"fields":["a"]},"ddoc":"\#(design)","name":"i"}"#)
        #expect(created.status == 200 && created.json["id"] == JSONValue(design))
        #expect(try server.json("GET", "/db/_design/%CC%81x").json["_id"] == JSONValue(design))
        let listed = try server.json("GET", "/db/_index").json["indexes"]?.arrayValue ?? []
        #expect(listed.contains { $0["ddoc"] == JSONValue(design) && $0["name"] == "i" })
        // Named by the design document's ID in `use_index`: used, not warned about.
        _ = try server.put("db", "one", #"{"a":1}"#)
        let found = try server.json("POST", "/db/_find", body:
            #"{"selector":{"a":1},"use_index":["\#(design)","i"]}"#)
        #expect(found.status == 200 && found.json["docs"]?.arrayValue?.count == 1)
        #expect(found.json["warning"] == nil)
    }
}
