import Foundation
import HTTPTypes
import RichPushCore
@testable import RichPushAPI
import Testing

/// The API's contract read off its own types, with no server running: the schemas of
/// `/openapi.json`, the patterns the stores' values fit, and how request bodies are refused.
@Suite("/openapi.json's schemas and request bodies")
struct OpenAPISchemaTests {
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
        #expect(campaign.required == ["audience"] && campaign.properties?["audience"]?.oneOf?.count == 5) // all, users, tags, segment, filter
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
        #expect(refusal(CampaignRequest.self, #"{"audience":{"all":true,"foo":1}}"#) == #"unknown field "audience.foo"; audience takes all, filter, segment, tags, users"#)
        #expect(throws: CoreError.self) {
            try RequestBody.decode(CampaignRequest.self, from: Data(#"{"audience":{}}"#.utf8), shape: shape)
        }
    }

    @Test("the document of a server's rooms validates on its own: every operation once, every $ref defined, every app listed")
    func document() throws {
        let apps = AppCatalog(profiles: ["shop": AppProfile()], defaultVAPIDKey: nil)
        let data = try OpenAPIDocument.make(Endpoint.all, publicMedia: false, apps: apps)
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        let declared = Set(Endpoint.all.map { "\($0.method.rawValue) \($0.path)" })
        let listed = Set(paths.flatMap { path, methods in methods.keys.map { "\($0.uppercased()) \(path)" } })
        #expect(listed == declared)
        let schemas = try #require((document["components"] as? [String: Any])?["schemas"] as? [String: Any])
        func references(_ value: Any) -> [String] {
            if let array = value as? [Any] { return array.flatMap(references) }
            guard let object = value as? [String: Any] else { return [] }
            return ((object["$ref"] as? String).map { [$0] } ?? []) + object.values.flatMap(references)
        }
        let missing = Set(references(document)).filter { ref in
            !(ref.hasPrefix("#/components/schemas/") && schemas[String(ref.dropFirst("#/components/schemas/".count))] != nil)
        }
        #expect(missing.isEmpty, "dangling: \(missing.sorted())")
        #expect(String(decoding: data, as: UTF8.self).contains("\"shop\""))
    }

    @Test("the localization options' schema: a key 1 to 256 long, at most 10 arguments of up to 256 each (docs/api.md#templates-and-localization-keys)")
    func localizationOptions() throws {
        let options = try JSONSchema.of(PushOptions.self)
        for field in ["titleLocKey", "locKey"] {
            let schema = try #require(options.properties?[field])
            #expect(schema.type == "string" && schema.nullable && schema.minLength == 1 && schema.maxLength == PushOptions.maxLocalizationBytes)
        }
        let arguments = try #require(options.properties?["locArgs"])
        #expect(arguments.type == "array" && arguments.maxItems == PushOptions.maxLocArgs)
        #expect(arguments.items?.first?.type == "string" && arguments.items?.first?.maxLength == PushOptions.maxLocalizationBytes)
    }
}
