/// A database as design-document functions see it: its name and properties, its design
/// documents, and what `req.info` and `secObj` show them. The store's `Database` is one.
/// Declared below both, so that the function runtime needs nothing of the store, nor the
/// store anything of the runtime.
public protocol FunctionDatabase: AnyObject, Sendable {
    var name: DatabaseName { get }
    var isPartitioned: Bool { get }
    /// Differs for every opening of the database (CouchDB's `instance_start_time`).
    var instanceStartTime: String { get }
    /// Grows with every write of a design document: with `instanceStartTime`, what tells
    /// whether design documents read earlier are still current.
    var designGeneration: Int { get }
    /// The live design documents: ID, winning revision and body as stored.
    func designDocuments() throws(CouchError) -> [(id: DocumentID, revision: RevisionID, body: [UInt8])]
    /// The error reading document `id` gives: CouchDB's 404 `missing` or `deleted`.
    func readError(_ id: DocumentID) -> CouchError
    func securityObject() throws -> JSONObject?
    func info() throws -> DatabaseInfo
}
