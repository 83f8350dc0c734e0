import CouchCore
import CouchStore

/// `GET`/`PUT /db/_security`: the database's admins and members. Who may call them is
/// decided by `AuthorizationPolicy` (members read, database admins write).
enum SecurityRoutes {
    static func getSecurity(_ context: RouteContext) throws -> HTTPResponse {
        let database = try context.database()
        return .json(200, .object(try context.server.accessControl.securityObject(of: database).json))
    }

    static func putSecurity(_ context: RouteContext) throws -> HTTPResponse {
        let security = try SecurityObject.validated(try context.jsonBody())
        try context.database().setSecurityObject(security.json)
        return .ok
    }
}
