import CouchCore
import CouchStore
import Logging

/// The HTTP face of a data directory: parses each request's endpoint, finds its
/// handler in the route table and turns every error into CouchDB's error response.
public final class CouchServer: Sendable {
    public let databases: DatabaseManager
    let logger = Logger(label: "couchette.server")

    public init(databases: DatabaseManager) {
        self.databases = databases
    }

    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        do {
            let endpoint = try Endpoint(path: request.path)
            return try RouteTable.handler(for: request.method, at: endpoint)(
                RouteContext(server: self, request: request, endpoint: endpoint))
        } catch let error as CouchError {
            var response = HTTPResponse.error(error)
            if error.kind == .methodNotAllowed, let endpoint = try? Endpoint(path: request.path),
               let allow = RouteTable.allowHeader(for: endpoint) {
                response.setHeader("Allow", allow)
            }
            return response
        } catch {
            logger.error("unexpected error: \(error)")
            return .error(CouchError(.unknownError, "internal error"))
        }
    }
}
