// The route table's key: what an endpoint names, without its parameters.

extension Endpoint {
    /// The route this endpoint belongs to, without its parameters.
    var route: RouteKey {
        switch self {
        case .server(let resource): .server(resource)
        case .database: .database
        case .databaseResource(_, let resource): .databaseResource(resource)
        case .document(_, let id): id.isLocal ? .localDocument : .document
        case .attachment: .attachment
        case .designResource(_, _, let resource): DesignFunctionRoute(rawValue: resource).map { .designFunction($0) } ?? .designResource
        case .index: .index
        case .partition: .partition
        case .scheduler(let resource):
            switch resource {
            case .jobs: .scheduler(.jobs)
            case .job: .scheduler(.job)
            case .documents: .scheduler(.documents)
            case .document: .scheduler(.document)
            case .pending: .scheduler(.pending)
            }
        case .node(_, let resource): .node(resource.route)
        case .utils: .utils
        case .reshard: .reshard
        }
    }
}

/// An endpoint's kind, the key of the route table.
enum RouteKey: Hashable, Sendable {
    case server(Endpoint.ServerResource)
    case database
    case databaseResource(Endpoint.DatabaseResource)
    case document
    case localDocument
    case attachment
    case designResource
    /// `_show`, `_list`, `_update`, `_rewrite` (see `DesignFunctionRequest`).
    case designFunction(DesignFunctionRoute)
    case index
    case partition
    case scheduler(SchedulerRoute)
    case utils
    case reshard

    enum SchedulerRoute: Hashable, Sendable {
        case jobs, job, documents, document, pending
    }
    case node(Endpoint.NodeRoute)
}
