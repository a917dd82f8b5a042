import Foundation
import HTTPTypes
import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import Testing

@Suite("/openapi.json (SPEC §14)")
struct OpenAPITests {
    /// `METHOD /path` of every operation in a served document.
    func operations(_ document: [String: Any]) -> Set<String> {
        let paths = document["paths"] as? [String: [String: Any]] ?? [:]
        return Set(paths.flatMap { path, methods in methods.keys.map { "\($0.uppercased()) \(path)" } })
    }

    @Test("the document lists exactly the router's routes, needs no credentials, and says which routes need them")
    func everyRoute() async throws {
        try await TestServer.run { s in
            let response = try await s.request(.get, "/openapi.json", as: nil)
            #expect(response.status == .ok && response.headers[.contentType] == "application/json")
            let document = try #require(try JSONSerialization.jsonObject(with: Data(response.bytes)) as? [String: Any])
            #expect(document["openapi"] as? String == "3.1.0")
            #expect((document["info"] as? [String: Any])?["version"] as? String == RichPushBuild.version)
            let listed = operations(document)
            #expect(listed == Set(s.routes), "only served: \(Set(s.routes).subtracting(listed)); only listed: \(listed.subtracting(s.routes))")
            #expect(listed.count == Endpoint.all.count && listed.count >= 46 && listed.contains("GET /openapi.json") && listed.contains("POST /console/session") && listed.contains("PUT /api/register/{id}"))

            let paths = try #require(document["paths"] as? [String: [String: [String: Any]]])
            func security(_ method: String, _ path: String) -> [String] {
                (paths[path]?[method]?["security"] as? [[String: Any]] ?? []).flatMap(\.keys).sorted()
            }
            #expect(security("get", "/health") == [] && security("get", "/p/{token}") == [])
            #expect(security("get", "/media/{sha256}") == ["apiKey", "basic", "bearer"]) // without --public-media
            #expect(security("post", "/api/sessions") == ["basic"] && security("delete", "/api/sessions/current") == ["bearer"])
            // docs/api.md#apps-and-api-keys: the API key scheme, and each route's scope (none on a device's or a person's routes).
            func scope(_ method: String, _ path: String) -> [String]? {
                (paths[path]?[method]?["security"] as? [[String: [String]]])?.first { $0["apiKey"] != nil }?["apiKey"]
            }
            #expect(scope("post", "/api/notifications") == ["send"] && scope("post", "/api/admin/campaigns") == ["send"])
            #expect(scope("get", "/api/admin/campaigns/{id}") == ["read"] && scope("get", "/media/{sha256}") == ["read"])
            #expect(scope("put", "/api/register/{id}") == nil && scope("post", "/api/sessions") == nil && scope("get", "/api/notifications") == nil)
            let schemes = try #require((document["components"] as? [String: Any])?["securitySchemes"] as? [String: [String: String]])
            #expect(schemes["apiKey"]?["scheme"] == "bearer" && schemes["apiKey"]?["type"] == "http")
            #expect(paths["/api/notifications"]?["post"]?["x-richpush-key-scope"] as? String == "send")
            let campaign = try #require(paths["/api/admin/campaigns"]?["post"]?["responses"] as? [String: Any])
            #expect(Set(campaign.keys).isSuperset(of: ["202", "400", "401", "403", "413", "422"]))
        }
        try await TestServer.run({ $0.publicMedia = true }) { s in
            let response = try await s.request(.get, "/openapi.json", as: nil)
            let document = try #require(try JSONSerialization.jsonObject(with: Data(response.bytes)) as? [String: Any])
            let paths = try #require(document["paths"] as? [String: [String: [String: Any]]])
            #expect((paths["/media/{sha256}"]?["get"]?["security"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("a path served with other methods answers 405 with Allow; an unknown path stays 404")
    func methodNotAllowed() async throws {
        try await TestServer.run { s in
            let trace = try await s.request(.delete, "/health")
            #expect(trace.status == .methodNotAllowed && trace.headers[.allow] == "GET")
            let register = try await s.request(.get, "/api/register/abc")
            #expect(register.status == .methodNotAllowed && register.headers[.allow] == "PUT, DELETE")
            #expect(register.headers[.contentType] == "application/problem+json")
            #expect(try await s.request(.get, "/api/nothing-here").status == .notFound)
            #expect(try await s.request(.get, "/api/register/a/b").status == .notFound)
        }
    }
}
