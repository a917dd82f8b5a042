import Foundation
import RichPushCore

/// `GET`, and the body and answer of `PUT`, on `/api/me/attributes` and
/// `/api/admin/users/{name}/attributes`: a user's attributes, whole.
struct UserAttributesBody: Codable, Sendable {
    var attributes: UserAttributes
}

/// The body of `PATCH` on the same paths: a JSON merge patch (RFC 7396) of `{"attributes":{…}}`,
/// where a key set to null is removed.
struct UserAttributesPatchBody: Decodable, Sendable {
    var attributes: UserAttributes.Patch
}

/// `GET /api/me/topics`: the caller's topics, in byte order.
struct TopicsResponse: Codable, Sendable {
    var topics: [String]
}

/// The body of `POST /api/admin/topics/{topic}/subscribers`: users to add and to remove, at most
/// 1,000 names together.
struct TopicSubscribersChange: Codable, Sendable {
    var add: [String]?
    var remove: [String]?
}

extension TopicSubscribersChange: SchemaRefining {
    /// User names, at most 1,000 in each list (and together: 413 past that).
    static func refine(_ schema: inout JSONSchema) {
        for list in ["add", "remove"] {
            schema.properties?[list]?.items = [ValuePattern.string(ValuePattern.userName)]
            schema.properties?[list]?.maxItems = TopicStore.maxNamesPerChange
        }
    }
}

/// `200` of `POST /api/admin/topics/{topic}/subscribers`.
struct TopicSubscribersResponse: Codable, Sendable {
    var topic: String
    /// Users who follow the topic now and did not before.
    var added: Int
    /// Users who followed it and no longer do.
    var removed: Int
    /// How many follow it now.
    var subscribers: Int
}

/// An attribute's value as `/openapi.json` describes it: a string of at most 256 bytes, a number or a boolean.
private let attributeValue = JSONSchema.oneOf([
    JSONSchema.string.with {
        $0.maxLength = UserAttributes.maxStringBytes
        $0.description = "At most 256 bytes of UTF-8."
    },
    JSONSchema.type("number"),
    JSONSchema.boolean,
])

extension UserAttributes: DeclaredSchema {
    /// An object of at most 50 keys, each key's shape given, each value a string, a number or a boolean.
    public static var declaredSchema: JSONSchema {
        JSONSchema.type("object").with {
            $0.description = "Key → a string (at most 256 bytes of UTF-8), a number, true or false. Keys: a lowercase letter, then up to 63 lowercase letters, digits or _."
            $0.propertyNames = [ValuePattern.string(ValuePattern.attributeKey)]
            $0.valuesSchema = [attributeValue]
            $0.maxProperties = UserAttributes.maxCount
        }
    }

    public static var schemaExample: UserAttributes { UserAttributes() }
}

extension UserAttributes.Patch: DeclaredSchema {
    /// As `UserAttributes`, a value may be null too (the key is removed); the result has at most 50 keys.
    public static var declaredSchema: JSONSchema {
        JSONSchema.type("object").with {
            $0.description = "A merge patch (RFC 7396): key → a new value, or null to remove the key; keys left out are kept. The result has at most 50 keys."
            $0.propertyNames = [ValuePattern.string(ValuePattern.attributeKey)]
            $0.valuesSchema = [attributeValue.with { $0.nullable = true }]
        }
    }

    public static var schemaExample: UserAttributes.Patch { UserAttributes.Patch() }
}
