import Foundation
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

// The JSON bodies of the HTTP API (docs/api.md#http-api, §9, §10), in the `…Models.swift` files and `ProblemDetails.swift`. Handlers encode and decode these types, and
// `/openapi.json` describes them by reading the same types (`JSONSchema.of`).

/// Decodes request bodies into those types, as tolerantly as the tutorial's clients need:
/// keys in any case; a wrong or missing field is a 400 that names it.
enum RequestBody {
    /// Each body type's schema, read once.
    private static let schemas = NIOLockedValueBox<[ObjectIdentifier: JSONSchema]>([:])

    /// The body of `request`, at most `limit` bytes: past it, 413 naming the limit and `what` is limited.
    static func collect(_ request: Request, upTo limit: Int, what: String) async throws -> ByteBuffer {
        let tooLarge = Problem(.contentTooLarge, "\(what) is at most \(limit >> 10) KiB (\(limit) bytes)"
                                                 + (request.headers[.contentLength].map { "; this one is \($0) bytes" } ?? ""))
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit { throw tooLarge }
        do {
            return try await request.body.collect(upTo: limit)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw tooLarge
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, from data: Data, shape: String) throws -> T {
        let schema = try schemas.withLockedValue { cache in
            if let known = cache[ObjectIdentifier(type)] { return known }
            let schema = try JSONSchema.of(type)
            cache[ObjectIdentifier(type)] = schema
            return schema
        }
        let keys = (schema.properties ?? [:]).keys + (schema.oneOf ?? []).flatMap { ($0.properties ?? [:]).keys }
        let canonical = Dictionary(keys.map { ($0.lowercased(), $0) }, uniquingKeysWith: { a, _ in a })
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .custom { path in
            let key = path.last!
            // Only the top level's keys are folded; nested objects (audience) have lower-case keys anyway.
            guard path.count == 1, let name = canonical[key.stringValue.lowercased()] else { return key }
            return AnyKey(name)
        }
        // Strict: a field the server does not know (a typo, or a feature this server lacks, such
        // as "sendAt" on an older one) is refused by name, never ignored; and it is named first, so
        // that a misspelt required field ("platfrom") is told as itself, not as "platform" missing.
        if let object = try? JSONSerialization.jsonObject(with: data),
           let unknown = unknownField(object, schema: schema, path: [], foldCase: true) {
            throw Problem(.badRequest, unknownMessage(unknown, shape: shape))
        }
        do {
            return try decoder.decode(type, from: data)
        } catch let error as DecodingError {
            throw Problem(.badRequest, explain(error, schema: schema, shape: shape))
        }
    }

    /// A field nobody knows, where it stood, and the fields its object takes.
    struct UnknownField: Equatable {
        var path: [String]
        var known: [String]
        var name: String { path.joined(separator: ".") }
    }

    /// "unknown field "platfrom" (did you mean "platform"?); the body is …", or for a nested
    /// object the fields that object takes ("options takes: actions, badge, …").
    static func unknownMessage(_ unknown: UnknownField, shape: String) -> String {
        let key = unknown.path.last ?? ""
        let near = EditDistance.nearest(to: key, in: unknown.known)
        let hint = near.map { " (did you mean \"\((unknown.path.dropLast() + [$0]).joined(separator: "."))\"?)" } ?? ""
        if unknown.path.count == 1 { return "unknown field \"\(unknown.name)\"\(hint); the body is \(shape)" }
        let parent = unknown.path.dropLast().joined(separator: ".")
        return "unknown field \"\(unknown.name)\"\(hint); \(parent) takes \(unknown.known.sorted().joined(separator: ", "))"
    }

    /// The first field of `value` (depth first, by path) that `schema` does not describe; nil
    /// when every one is known. Objects with no listed properties (maps) take any key; the top
    /// level's keys are matched in any case, as they are decoded.
    static func unknownField(_ value: Any, schema: JSONSchema, path: [String], foldCase: Bool) -> UnknownField? {
        if let array = value as? [Any] {
            guard let element = schema.items?.first else { return nil }
            for item in array { if let found = unknownField(item, schema: element, path: path, foldCase: false) { return found } }
            return nil
        }
        guard let object = value as? [String: Any] else { return nil }
        var properties = schema.properties ?? [:]
        for alternative in schema.oneOf ?? [] { properties.merge(alternative.properties ?? [:]) { a, _ in a } }
        guard !properties.isEmpty else { return nil }
        let known = foldCase ? Dictionary(properties.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a }) : properties
        for key in object.keys.sorted() {
            guard let property = known[foldCase ? key.lowercased() : key] else {
                return UnknownField(path: path + [key], known: properties.keys.sorted())
            }
            if let found = unknownField(object[key]!, schema: property, path: path + [key], foldCase: false) { return found }
        }
        return nil
    }

    /// What was wrong, by the field's name.
    static func explain(_ error: DecodingError, schema: JSONSchema, shape: String) -> String {
        func name(_ path: [any CodingKey]) -> String { path.map(\.stringValue).joined(separator: ".") }
        func property(_ path: [any CodingKey]) -> JSONSchema? {
            var current: JSONSchema? = schema
            for key in path {
                let here = current
                current = here?.properties?[key.stringValue] ?? here?.oneOf?.lazy.compactMap { $0.properties?[key.stringValue] }.first
            }
            return current
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\"\(name(context.codingPath + [key]))\" is missing; the body is \(shape)"
        case .typeMismatch(_, let context) where context.codingPath.isEmpty, .dataCorrupted(let context) where context.codingPath.isEmpty,
             .valueNotFound(_, let context) where context.codingPath.isEmpty:
            return "the body must be a JSON object \(shape)"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            let path = context.codingPath.filter { $0.intValue == nil }
            let expected = property(path).map(describe) ?? "of another type"
            return "\"\(name(path))\" must be \(expected)"
        @unknown default:
            return "the body must be a JSON object \(shape)"
        }
    }

    /// "a string", "an array of strings", "\"alert\" or \"silent\"".
    static func describe(_ schema: JSONSchema) -> String {
        if let values = schema.enumeration { return values.map { "\"\($0)\"" }.joined(separator: " or ") }
        if schema.oneOf != nil { return "an object as the body's shape says" }
        switch schema.type {
        case "string": return "a string"
        case "integer": return "an integer"
        case "number": return "a number"
        case "boolean": return "true or false"
        case "array": return schema.items?.first?.type == "string" ? "an array of strings" : "an array"
        case "object": return "an object"
        default: return "of another type"
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
