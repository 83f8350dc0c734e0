import CouchCore
import CouchServer
import CouchTestSupport
import Foundation
import Synchronization
import Testing

/// A database per tenant, as users deploy it: what one database's admin writes into its
/// design functions never reaches another database's data, users or functions.
@Suite struct TenantIsolationTests {
    /// Replaces what it can reach of the engine (prototypes, CouchDB's environment and the
    /// drivers behind validation, views and filters) to record and accept everything.
    static let poison = #"""
        function(doc, req) {
          globalThis.stolen = globalThis.stolen || [];
          var record = function(what) { try { globalThis.stolen.push(JSON.stringify(what)); } catch (e) {} };
          var apply = Function.prototype.apply;
          Function.prototype.apply = function(self, args) { record(args); return apply.call(this, self, args); };
          Object.prototype.x = "poisoned";
          var env = __couchette;
          env.validateBatch = function(functions, entries, secObj) { record([entries, secObj]); return entries.map(function() { return null; }); };
          env.filterBatch = function(filter, docs, req) { record(docs); return docs.map(function() { return "1"; }).join(""); };
          var map = env.mapBatch;
          env.mapBatch = function(funs, docs, seal) {
            record(docs);
            return docs.map(function(d) { return funs.map(function() { return [["mallory", "planted"]]; }); });
          };
          return "poisoned";
        }
        """#

    @Test func oneDatabasesFunctionsCannotReachAnothersDataOrFunctions() throws {
        let admin = basicAuthorization("admin", "admin-pass")
        let mallory = basicAuthorization("mallory", "mallory-pass")
        let alice = basicAuthorization("alice", "alice-pass")
        let server = try TestServer(configuration: .testing(admins: ["admin": "admin-pass"]))
        defer { server.stop() }
        for name in ["mallory", "alice"] {
            let body = #"{"name":"\#(name)","password":"\#(name)-pass","roles":[],"type":"user"}"#
            #expect(try server.request("PUT", "/_users/org.couchdb.user:\(name)", headers: [admin], body: body).status == 201)
        }
        for (database, security) in [("secret", #"{"admins":{"names":[]},"members":{"names":["alice"]}}"#),
                                     ("evil", #"{"admins":{"names":["mallory"]},"members":{"names":["mallory"]}}"#)] {
            #expect(try server.request("PUT", "/\(database)", headers: [admin]).status == 201)
            #expect(try server.request("PUT", "/\(database)/_security", headers: [admin], body: security).status == 200)
        }
        let guardian: JSONValue = [
            "validate_doc_update": "function(newDoc) { if (newDoc.forbidden) { throw({forbidden: 'not here'}); } }",
            "views": ["by_owner": ["map": "function(doc) { if (doc.owner) { emit(doc.owner, doc.secret); } }"]],
            "filters": ["mine": "function(doc, req) { return doc.owner == 'alice'; }"],
            "shows": ["probe": "function(doc, req) { return JSON.stringify({x: ({}).x, stolen: typeof stolen}); }"],
        ]
        #expect(try server.request("PUT", "/secret/_design/guard", headers: [admin], body: guardian.serializedString()).status == 201)
        let poisoned: JSONValue = ["shows": ["poison": JSONValue(Self.poison),
                                             "loot": "function(doc, req) { return JSON.stringify(globalThis.stolen || []); }"]]
        #expect(try server.request("PUT", "/evil/_design/poison", headers: [mallory], body: poisoned.serializedString()).status == 201)

        // Mallory poisons every engine his requests reach, many times and at once.
        let poisonings = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            if (try? server.request("GET", "/evil/_design/poison/_show/poison", headers: [mallory]).text) == "poisoned" {
                poisonings.withLock { $0 += 1 }
            }
        }
        #expect(poisonings.withLock { $0 } == 64)

        // Alice works in her database: her validation, view, filter and show behave as written.
        for index in 0..<8 {
            let body = #"{"owner":"alice","secret":"alice-secret-\#(index)"}"#
            #expect(try server.request("PUT", "/secret/doc\(index)", headers: [alice], body: body).status == 201)
        }
        let refused = try server.json("PUT", "/secret/bad", headers: [alice], body: #"{"forbidden":true,"owner":"alice"}"#)
        #expect(refused.status == 403)
        #expect(try server.request("GET", "/secret/bad", headers: [alice]).status == 404)
        let view = try server.json("GET", "/secret/_design/guard/_view/by_owner", headers: [alice])
        #expect(view.json["rows"]?.arrayValue?.count == 8)
        #expect(view.json["rows"]?.arrayValue?.allSatisfy { $0["key"] == "alice" } == true, "\(view.json.serializedString())")
        #expect(try server.request("PUT", "/secret/other", headers: [admin], body: #"{"owner":"bob"}"#).status == 201)
        let changes = try server.json("GET", "/secret/_changes?filter=guard/mine", headers: [alice])
        #expect(changes.json["results"]?.arrayValue?.count == 8, "\(changes.json.serializedString())")
        let probe = try server.request("GET", "/secret/_design/guard/_show/probe", headers: [alice])
        #expect(probe.text == #"{"stolen":"undefined"}"#)

        // Nothing of Alice's reached Mallory's engines.
        for _ in 0..<8 {
            let loot = try server.request("GET", "/evil/_design/poison/_show/loot", headers: [mallory]).text
            #expect(!loot.contains("alice"), "\(loot.prefix(300))")
        }
    }
}
