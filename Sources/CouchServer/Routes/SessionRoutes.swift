import CouchCore
import CouchStore

/// `/_session`: cookie login (`POST`, JSON or form body, `next` and `fail` redirects),
/// who am I (`GET`), logout (`DELETE`), as CouchDB's `couch_httpd_auth:handle_session_req`.
enum SessionRoutes {
    static func getSession(_ context: RouteContext) throws -> HTTPResponse {
        let user = context.user
        if user.name == nil, context.request.queryValue("basic") == "true" {
            throw CouchError(.unauthorized, "Please login.")
        }
        let access = context.server.accessControl
        var info: JSONObject = ["authentication_handlers": .array(access.authenticator.handlerNames.map { JSONValue($0) })]
        if let handler = user.authenticatedBy { info["authenticated"] = JSONValue(handler) }
        if access.settings.usersDatabaseConfigured {
            info["authentication_db"] = JSONValue(access.settings.usersDatabase.rawValue)
        }
        return .json(200, ["ok": true, "userCtx": user.json, "info": .object(info)])
    }

    static func postSession(_ context: RouteContext) throws -> HTTPResponse {
        let form = try loginForm(context.request)
        let name = try userName(in: form)
        let password = form["password"] ?? ""
        let access = context.server.accessControl
        let now = SessionCookie.now()
        let user: UserContext
        do {
            user = try access.authenticator.verify(name: name, password: password, handler: "cookie",
                                                   peer: context.request.peerAddress)
        } catch {
            // Iteration limits and a lockout (403), a user document in conflict (401) and a busy
            // hasher (503) say so.
            var response = HTTPResponse.error(error)
            response.setHeader("Set-Cookie", access.cookie.setCookie("", now: now))
            redirect(&response, context, to: context.request.queryValue("fail"))
            return response
        }
        let salt = access.authenticator.cookieSalt(for: name) ?? ""
        let cookie = access.cookie.value(user: name, salt: salt, time: now)
        var response = HTTPResponse.json(200, ["ok": true, "name": JSONValue(name),
                                               "roles": .array(user.roles.map { JSONValue($0) })])
        response.setHeader("Set-Cookie", access.cookie.setCookie(cookie, now: now))
        redirect(&response, context, to: context.request.queryValue("next"))
        return response
    }

    static func deleteSession(_ context: RouteContext) throws -> HTTPResponse {
        var response = HTTPResponse.ok
        response.setHeader("Set-Cookie", context.server.accessControl.cookie.setCookie("", now: SessionCookie.now()))
        redirect(&response, context, to: context.request.queryValue("next"))
        return response
    }

    /// `next`/`fail`: 302 to that path on this server (CouchDB's `absolute_uri`).
    private static func redirect(_ response: inout HTTPResponse, _ context: RouteContext, to path: String?) {
        guard let path else { return }
        response.status = 302
        let host = context.request.header("host") ?? "127.0.0.1"
        response.setHeader("Location", path.hasPrefix("/") ? "http://\(host)\(path)" : "http://\(host)/\(path)")
    }

    /// The login fields: a form (`application/x-www-form-urlencoded`) or a JSON object of
    /// strings; any other body has none.
    private static func loginForm(_ request: HTTPRequest) throws(CouchError) -> [String: String] {
        var form: [String: String] = [:]
        switch request.contentType {
        case "application/x-www-form-urlencoded"?:
            let text = String(decoding: request.body, as: UTF8.self)
            for pair in text.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let key = PercentDecoding.decode(parts[0], plusIsSpace: true) else { continue }
                let value = parts.count > 1 ? PercentDecoding.decode(parts[1], plusIsSpace: true) ?? "" : ""
                if form[key] == nil { form[key] = value }
            }
        case "application/json"?:
            guard let object = (try? JSONValue.parse(request.body))?.objectValue else {
                throw CouchError.badRequest("invalid UTF-8 JSON")
            }
            for (key, value) in object {
                guard let text = value.stringValue else { throw CouchError.badRequest("\(key) must be a string") }
                form[key] = text
            }
        default:
            break
        }
        return form
    }

    /// `name`, or `username` as some clients send it; both must agree.
    private static func userName(in form: [String: String]) throws(CouchError) -> String {
        switch (form["name"], form["username"]) {
        case (nil, nil): throw CouchError.badRequest("request body must contain a username")
        case (let name?, nil), (nil, let name?): return name
        case (let name?, let other?):
            guard name == other else { throw CouchError.badRequest("request body contains different usernames") }
            return name
        }
    }
}
