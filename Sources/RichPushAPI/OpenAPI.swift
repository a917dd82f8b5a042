import Foundation
import RichPushCore
import Hummingbird
import RichPushCore

/// Who may call an endpoint.
enum Access: Sendable {
    /// No credentials.
    case open
    /// Credentials unless `serve --public-media`.
    case media
    /// Any account (Basic or Bearer).
    case user
    /// Any account, by its password (Basic) alone.
    case password
    /// Any account, by a session token (Bearer) alone.
    case session
    /// An admin account.
    case admin
}

/// One route of the HTTP API: how it is served and how `/openapi.json` describes it. `buildRouter`
/// registers exactly these, so the description cannot name a route that is not served or miss one that is.
package struct Endpoint: Sendable {
    let method: HTTPRequest.Method
    /// With `{name}` captures, as OpenAPI writes them (Hummingbird reads the same syntax).
    let path: String
    let access: Access
    let summary: String
    var parameters: [APIParameter] = []
    var requestBody: APIRequestBody? = nil
    /// The scope below `admin` that lets an API key call it (`keyScope`); nil: admin routes take
    /// `admin` keys, the others none.
    var keys: APIKeyScope? = nil
    /// Status → what the route answers with it.
    let responses: [Int: APIResponse]
    let handler: @Sendable (Rooms, Request, AppRequestContext) async throws -> Response

    /// The scope an API key needs for this route (docs/api.md#apps-and-api-keys); nil where keys
    /// are refused (a device's or a person's routes: registrations, inboxes, sessions). Given on
    /// the route (`keys`) where a key of less than `admin` may call it: `send` makes
    /// notifications and campaigns (and uploads their images), `read` reads campaigns and media;
    /// every other admin route needs `admin`.
    var keyScope: APIKeyScope? {
        keys ?? (access == .admin ? .admin : nil)
    }

    /// `getApiNotificationsId`-style names, unique per method and path.
    var operationID: String {
        let words = path.split(separator: "/").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "{}")) }
            .flatMap { $0.split(whereSeparator: { !$0.isLetter && !$0.isNumber }) }
        return method.rawValue.lowercased() + words.map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }
}

extension Endpoint {
    /// The methods `endpoints` serve at a request path (captures match any one segment).
    static func methods(at path: some StringProtocol, in endpoints: [Endpoint]) -> [HTTPRequest.Method] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        return endpoints.filter { endpoint in
            let pattern = endpoint.path.split(separator: "/", omittingEmptySubsequences: true)
            return pattern.count == segments.count
                && zip(pattern, segments).allSatisfy { $0.hasPrefix("{") && !$1.isEmpty || $0 == $1 }
        }.map(\.method)
    }
}

/// A route that exists with other methods answers 405 with `Allow`, not 404.
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    let endpoints: [Endpoint]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound && error.body == nil {
            let allowed = Endpoint.methods(at: request.uri.path, in: endpoints)
            guard !allowed.isEmpty, !allowed.contains(request.method) else { throw error }
            let list = allowed.map(\.rawValue).joined(separator: ", ")
            throw Problem(.methodNotAllowed, "\(request.uri.path.prefix(200)) answers \(list), not \(request.method.rawValue.prefix(20))",
                          headers: [.allow: list])
        }
    }
}

/// A path, query or header parameter.
struct APIParameter: Sendable {
    enum Location: String, Sendable { case path, query, header }
    let name: String
    let location: Location
    let schema: JSONSchema
    let description: String
    var required: Bool { location == .path }

    static func path(_ name: String, _ schema: JSONSchema, _ description: String) -> APIParameter {
        APIParameter(name: name, location: .path, schema: schema, description: description)
    }

    static func query(_ name: String, _ schema: JSONSchema, _ description: String) -> APIParameter {
        APIParameter(name: name, location: .query, schema: schema, description: description)
    }

    static func header(_ name: String, _ description: String) -> APIParameter {
        APIParameter(name: name, location: .header, schema: .string, description: description)
    }
}

/// A request body: media type → schema.
struct APIRequestBody: Sendable {
    let required: Bool
    let content: [(mediaType: String, schema: JSONSchema)]
    let description: String
}

/// A response: its description, media types with schemas, and headers.
struct APIResponse: Sendable {
    let description: String
    var content: [(mediaType: String, schema: JSONSchema)] = []
    var headers: [String: String] = [:]
    /// OpenAPI links: name → the operation it leads to and the parameter filled from this body.
    var links: [String: (operationID: String, parameter: String, field: String)] = [:]
    /// The body types its content names (`json`, `jsonArray`): each is described in
    /// `components.schemas` because a response names it, never by a list kept apart.
    var types: [any (Decodable & Sendable).Type] = []

    /// The same response, with a link to `operationID` whose `parameter` is this body's `field`.
    func linking(_ name: String, to operationID: String, parameter: String, from field: String) -> APIResponse {
        var copy = self
        copy.links[name] = (operationID, parameter, field)
        return copy
    }

    /// A JSON body of `type`, described by reading the type.
    static func json<T: Decodable & Sendable>(_ type: T.Type, _ description: String, headers: [String: String] = [:]) -> APIResponse {
        APIResponse(description: description, content: [("application/json", .ref(OpenAPIDocument.name(of: type)))], headers: headers, types: [type])
    }

    static func jsonArray<T: Decodable & Sendable>(of type: T.Type, _ description: String) -> APIResponse {
        APIResponse(description: description, content: [("application/json", .array(of: .ref(OpenAPIDocument.name(of: type))))], types: [type])
    }

    /// An `application/problem+json` error.
    static func problem(_ description: String, headers: [String: String] = [:]) -> APIResponse {
        APIResponse(description: description, content: [("application/problem+json", .ref("ProblemDetails"))], headers: headers)
    }

    /// Image bytes with their stored type.
    static func image(_ description: String, headers: [String: String]) -> APIResponse {
        APIResponse(description: description, content: [("image/png", .binary), ("image/jpeg", .binary), ("image/gif", .binary)], headers: headers)
    }
}

/// Builds `/openapi.json` (OpenAPI 3.1) from the endpoints and the `Codable` body types.
enum OpenAPIDocument {
    /// The named body types that requests name by `.ref` (responses' types come with them), in `components.schemas`.
    static var bodyTypes: [any Decodable.Type] { [
        HealthResponse.self, MediaResponse.self, ConsoleMediaItem.self, ConsoleUser.self, ConsoleUserDetail.self, ConsoleDevice.self, ConsolePush.self, ConsoleReach.self, ConsoleProgress.self, ConsoleFailure.self, ConsolePreviewRequest.self, ConsolePreview.self, RegistrationCreated.self, RegistrationUpdate.self, RegistrationResponse.self,
        RegistrationDeleted.self, NotificationRequest.self, NotificationCreated.self, NotificationSummary.self,
        SessionResponse.self, CampaignRequest.self, CampaignResponse.self, ProblemDetails.self, WebPushKeyResponse.self, MeUpdate.self,
        UserAttributesBody.self, UserAttributesPatchBody.self, TopicsResponse.self, TopicSubscribersChange.self, TopicSubscribersResponse.self,
        SegmentBody.self, ContentChangeRequest.self, RetractRequest.self, PushToStartTokenBody.self, LiveActivityStartRequest.self,
        ActivityTokenBody.self, LiveActivityChangeRequest.self, EventRequest.self, AuditEntryResponse.self, DryRunResponse.self,
    ] }

    static func name(of type: any Decodable.Type) -> String { String(describing: type) }

    /// The document for a server serving media publicly or not (it says whether `/media/…`
    /// needs credentials), with these apps.
    package static func make(_ endpoints: [Endpoint], publicMedia: Bool, apps: AppCatalog) throws -> Data {
        let ids = endpoints.map(\.operationID)
        guard Set(ids).count == ids.count else { throw SchemaReaderError("two endpoints share an operationId: \(ids)") }
        for case let (_, link) in endpoints.flatMap({ $0.responses.values.flatMap(\.links) }) where !ids.contains(link.operationID) {
            throw SchemaReaderError("a link leads to no operation: \(link.operationID)")
        }
        var paths: [String: [String: Any]] = [:]
        for endpoint in endpoints {
            paths[endpoint.path, default: [:]][endpoint.method.rawValue.lowercased()] = try operation(endpoint, publicMedia: publicMedia, apps: apps)
        }
        var schemas: [String: Any] = [:]
        for type in bodyTypes + endpoints.flatMap({ $0.responses.values.flatMap { $0.types.map { $0 as any Decodable.Type } } })
        where schemas[name(of: type)] == nil {
            schemas[name(of: type)] = try object(JSONSchema.of(type))
        }
        // docs/api.md#apps-and-api-keys: an app is one of this server's, listed, so that a schema-valid request names one that exists.
        let apps = apps.names
        func listingApps(_ value: Any) -> Any {
            if let array = value as? [Any] { return array.map(listingApps) }
            guard var object = value as? [String: Any] else { return value }
            for (key, nested) in object { object[key] = listingApps(nested) }
            if var properties = object["properties"] as? [String: Any], properties["app"] != nil {
                // null, as for every optional field, is "left out": `default`, or every app.
                properties["app"] = ["type": ["string", "null"], "enum": apps.map { $0 as Any } + [NSNull()],
                                     "description": "One of this server's apps (docs/api.md#apps-and-api-keys)."] as [String: Any]
                object["properties"] = properties
            }
            return object
        }
        schemas = schemas.mapValues(listingApps)
        let document: [String: Any] = [
            "openapi": "3.1.0",
            "info": [
                "title": "RichPush",
                "version": RichPushBuild.version,
                "description": "A self-hosted backend for rich push notifications (docs/api.md). Errors are application/problem+json (RFC 9457).",
            ],
            "paths": paths,
            "components": [
                "schemas": schemas,
                "securitySchemes": [
                    "basic": ["type": "http", "scheme": "basic", "description": "An account's name and password."],
                    "bearer": ["type": "http", "scheme": "bearer", "description": "A session token from POST /api/sessions."],
                    "apiKey": ["type": "http", "scheme": "bearer", "bearerFormat": "rpk_ and 43 base64url characters",
                               "description": "An API key for servers (richpush api-keys add NAME --scope send|read|admin [--app APP]). Each operation lists the scope it needs (admin covers the others); a key bound to an app reaches that app's devices only."],
                ],
            ],
        ]
        // Every `$ref` must lead somewhere (docs/design/layout.md): one that does not is a document no
        // client can be generated from, so the server does not start with it.
        if let dangling = references(in: document).first(where: { reference in
            guard reference.hasPrefix("#/components/schemas/") else { return true }
            return schemas[String(reference.dropFirst("#/components/schemas/".count))] == nil
        }) {
            throw SchemaReaderError("/openapi.json would name \(dangling), which it does not define: add its type to OpenAPIDocument.bodyTypes")
        }
        return try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted])
    }

    /// Every `$ref` in a JSON value.
    static func references(in value: Any) -> [String] {
        if let array = value as? [Any] { return array.flatMap(references) }
        guard let object = value as? [String: Any] else { return [] }
        let own = (object["$ref"] as? String).map { [$0] } ?? []
        return own + object.values.flatMap(references)
    }

    private static func operation(_ endpoint: Endpoint, publicMedia: Bool, apps: AppCatalog) throws -> [String: Any] {
        var operation: [String: Any] = ["operationId": endpoint.operationID, "summary": endpoint.summary]
        let schemes: [String] = switch endpoint.access {
        case .open: []
        case .media: publicMedia ? [] : ["basic", "bearer"]
        case .user, .admin: ["basic", "bearer"]
        case .password: ["basic"]
        case .session: ["bearer"]
        }
        var responses = endpoint.responses
        if !schemes.isEmpty {
            operation["security"] = schemes.map { [$0: [String]()] } + (endpoint.keyScope.map { [["apiKey": [$0.rawValue]]] } ?? [])
            if let scope = endpoint.keyScope { operation["x-richpush-key-scope"] = scope.rawValue }
            responses[401] = responses[401] ?? .problem("No credentials, or wrong ones.", headers: ["WWW-Authenticate": "How to authenticate."])
            responses[429] = responses[429] ?? .problem("Too many failed sign-ins for this user or address.", headers: ["Retry-After": "Seconds to wait."])
        } else {
            operation["security"] = [[String: Any]]()
        }
        if endpoint.access == .admin { responses[403] = responses[403] ?? .problem("The account is not an admin.") }
        if endpoint.takesJSONOnly {
            responses[415] = responses[415] ?? .problem("A body that is not Content-Type: application/json (a form's types are refused).")
        }
        if !endpoint.parameters.isEmpty {
            operation["parameters"] = try endpoint.parameters.map { parameter in
                let schema = parameter.name == "app" && parameter.location == .query
                    ? ["type": "string", "enum": apps.names] as [String: Any] : try object(parameter.schema)
                return ["name": parameter.name, "in": parameter.location.rawValue, "required": parameter.required,
                        "description": parameter.description, "schema": schema] as [String: Any]
            }
        }
        if let body = endpoint.requestBody {
            operation["requestBody"] = [
                "required": body.required, "description": body.description,
                "content": try Dictionary(uniqueKeysWithValues: body.content.map { ($0.mediaType, ["schema": try object($0.schema)]) }),
            ] as [String: Any]
        }
        operation["responses"] = try Dictionary(uniqueKeysWithValues: responses.map { status, response in
            var entry: [String: Any] = ["description": response.description]
            if !response.content.isEmpty {
                entry["content"] = try Dictionary(uniqueKeysWithValues: response.content.map { ($0.mediaType, ["schema": try object($0.schema)]) })
            }
            if !response.headers.isEmpty {
                entry["headers"] = response.headers.mapValues { ["description": $0, "schema": ["type": "string"]] }
            }
            if !response.links.isEmpty {
                entry["links"] = response.links.mapValues { link in
                    ["operationId": link.operationID, "parameters": [link.parameter: "$response.body#/\(link.field)"]] as [String: Any]
                }
            }
            return (String(status), entry)
        })
        return operation
    }

    private static func object(_ schema: JSONSchema) throws -> Any {
        let encoder = JSONEncoder()
        return try JSONSerialization.jsonObject(with: encoder.encode(schema))
    }
}
