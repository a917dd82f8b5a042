import Foundation
import HTTPTypes
import RichPushCore
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

    @Test("schemas are read off the Codable types: required and optional (nullable) fields, arrays, enums, refinements")
    func schemas() throws {
        let created = try JSONSchema.of(NotificationCreated.self)
        #expect(created.type == "object")
        #expect(created.required == ["id", "message", "mode", "payload", "read", "richType"])
        #expect(created.properties?["id"] == .integer && created.properties?["read"] == .boolean)
        #expect(created.properties?["title"]?.nullable == true && created.properties?["title"]?.type == "string")
        #expect(created.properties?["mode"]?.enumeration == ["alert", "silent"])
        // One shape per platform, each with its own handle.
        let update = try JSONSchema.of(RegistrationUpdate.self)
        let shapes = try #require(update.oneOf)
        #expect(shapes.map { $0.properties?["platform"]?.enumeration ?? [] } == [["apns"], ["fcm"], ["web"]])
        #expect(shapes.allSatisfy { $0.required == ["handle", "platform"] })
        #expect(shapes[0].properties?["tags"]?.items?.first?.pattern == ValuePattern.tag && shapes[0].properties?["tags"]?.maxItems == 59)
        #expect(shapes[0].properties?["handle"]?.pattern == ValuePattern.deviceToken)
        #expect(shapes[2].properties?["handle"]?.properties?["keys"]?.required == ["auth", "p256dh"])
        let campaign = try JSONSchema.of(CampaignRequest.self)
        #expect(campaign.required == ["audience"] && campaign.properties?["audience"]?.oneOf?.count == 3)
        // The encoded form: nullable optionals are [type, "null"], and a nullable enum lists null.
        let encoded = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(JSONSchema.of(NotificationRequest.self))) as? [String: Any])
        let properties = try #require(encoded["properties"] as? [String: [String: Any]])
        #expect(properties["message"]?["type"] as? [String] == ["string", "null"])
        #expect((properties["mode"]?["enum"] as? [Any])?.count == 3)
    }

    @Test("the values the stores accept fit the patterns, and what they refuse does not")
    func patterns() throws {
        func matches(_ pattern: String, _ text: String) -> Bool { text.range(of: pattern, options: .regularExpression) != nil }
        #expect(matches(ValuePattern.deviceToken, String(repeating: "ab", count: 32)))
        #expect(!matches(ValuePattern.deviceToken, "abc") && !matches(ValuePattern.deviceToken, "zz" + String(repeating: "a", count: 30)))
        #expect(matches(ValuePattern.tag, "lang:en") && !matches(ValuePattern.tag, "a b"))
        #expect(matches(ValuePattern.userName, "alice") && !matches(ValuePattern.userName, "a:b"))
        #expect(matches(ValuePattern.tagExpression, "sports && !username:bob") && matches(ValuePattern.tagExpression, "a || b || c"))
        #expect(!matches(ValuePattern.tagExpression, "sports &&"))
        for expression in ["sports && !username:bob", "a || b || c", "a && b && c && d && e && f"] {
            #expect(throws: Never.self) { try TagExpression(expression) }
        }
        for name in ["alice", "a.b-c_d@e#f"] { #expect(throws: Never.self) { try UserStore.validateName(name) } }
    }

    @Test("request bodies: keys in any case; a missing, mistyped or unknown-valued field is a 400 that names it")
    func requestBodies() throws {
        let shape = "{…}"
        let update = try RequestBody.decode(RegistrationUpdate.self, from: Data(#"{"Platform":"apns","HANDLE":"ab","tags":null}"#.utf8), shape: shape)
        #expect(update.platform == "apns" && update.handle.text == "ab" && update.tags == nil)
        func refusal<T: Decodable>(_ type: T.Type, _ body: String) -> String {
            do {
                _ = try RequestBody.decode(type, from: Data(body.utf8), shape: shape)
                return "accepted"
            } catch let problem as Problem {
                return problem.status == .badRequest ? problem.detail : "status \(problem.status)"
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal(RegistrationUpdate.self, #"{"platform":"apns"}"#).hasPrefix("\"handle\" is missing"))
        #expect(refusal(RegistrationUpdate.self, #"{"platform":"apns","handle":"ab","tags":"x"}"#) == "\"tags\" must be an array of strings")
        #expect(refusal(RegistrationUpdate.self, #"{"platform":"apns","handle":"ab","tags":[1]}"#) == "\"tags\" must be an array of strings")
        #expect(refusal(NotificationRequest.self, #"{"mode":"loud"}"#) == "\"mode\" must be \"alert\" or \"silent\"")
        #expect(refusal(NotificationRequest.self, #"{"message":5}"#) == "\"message\" must be a string")
        #expect(refusal(CampaignRequest.self, #"{"audience":{"users":"alice"}}"#) == "\"audience.users\" must be an array of strings")
        #expect(refusal(CampaignRequest.self, "[1]").hasPrefix("the body must be a JSON object"))
        #expect(refusal(CampaignRequest.self, "{").hasPrefix("the body must be a JSON object"))
        #expect(refusal(CampaignRequest.self, "null").hasPrefix("the body must be a JSON object"))
        // Values in any case where they always were; an audience of more than its one key is refused.
        #expect(try RequestBody.decode(NotificationRequest.self, from: Data(#"{"MODE":"Alert"}"#.utf8), shape: shape).mode == .alert)
        // A key the audience does not have is named as itself, with the keys it takes (issue #49).
        #expect(refusal(CampaignRequest.self, #"{"audience":{"all":true,"foo":1}}"#) == #"unknown field "audience.foo"; audience takes all, tags, users"#)
        #expect(throws: CoreError.self) {
            try RequestBody.decode(CampaignRequest.self, from: Data(#"{"audience":{}}"#.utf8), shape: shape)
        }
    }
}
