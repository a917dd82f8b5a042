import Foundation
import HTTPTypes
import Hummingbird
import RichPushCore

/// Who a push can be aimed at: users' attributes and the topics they follow (`Endpoint.audiences`,
/// docs/api.md#attributes-devices-versions-and-topics). Devices' versions are the Devices room's.
struct AudiencesController: Sendable {
    let users: UserStore
    let topics: TopicStore

    /// The largest attributes body, as `PUT /api/me`'s.
    static let attributesBodyLimit = 64 * 1024
    /// The largest subscribers change: 1,000 names of up to 64 characters fit.
    static let subscribersBodyLimit = 128 * 1024

    private static let attributesShape = "{\"attributes\":{\"key\":<string, number, true or false>,…}}"

    // MARK: attributes

    func showMyAttributes(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await show(of: try context.requireUser())
    }

    func replaceMyAttributes(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await replace(request, of: try context.requireUser(), audit: nil) // a user's own: not audited
    }

    func mergeMyAttributes(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await merge(request, of: try context.requireUser(), audit: nil)
    }

    func showAttributes(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await show(of: try context.parameters.require("name"))
    }

    func replaceAttributes(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await replace(request, of: try context.parameters.require("name"), audit: context.auditActor(request))
    }

    func mergeAttributes(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await merge(request, of: try context.parameters.require("name"), audit: context.auditActor(request))
    }

    private func show(of name: String) async throws -> Response {
        try JSONResponse.encode(UserAttributesBody(attributes: try await users.attributes(of: name)))
    }

    private func replace(_ request: Request, of name: String, audit: AuditActor?) async throws -> Response {
        let body = try await RequestBody.collect(request, upTo: Self.attributesBodyLimit, what: "an attributes body")
        let replacement = try RequestBody.decode(UserAttributesBody.self, from: Data(body.readableBytesView), shape: Self.attributesShape)
        let stored = try await users.setAttributes(replacement.attributes, for: name, audit: audit)
        return try JSONResponse.encode(UserAttributesBody(attributes: stored))
    }

    private func merge(_ request: Request, of name: String, audit: AuditActor?) async throws -> Response {
        let body = try await RequestBody.collect(request, upTo: Self.attributesBodyLimit, what: "an attributes patch")
        let patch = try RequestBody.decode(UserAttributesPatchBody.self, from: Data(body.readableBytesView),
                                           shape: "{\"attributes\":{\"key\":<string, number, true, false, or null to remove it>,…}}")
        let merged = try await users.mergeAttributes(patch.attributes, for: name, audit: audit)
        return try JSONResponse.encode(UserAttributesBody(attributes: merged))
    }

    // MARK: topics

    func listMyTopics(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try JSONResponse.encode(TopicsResponse(topics: try await topics.list(of: try context.requireUser())))
    }

    func subscribe(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await topics.subscribe(try context.requireUser(), to: try Self.topic(context))
        return Response(status: .noContent)
    }

    func unsubscribe(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await topics.unsubscribe(try context.requireUser(), from: try Self.topic(context))
        return Response(status: .noContent)
    }

    func changeSubscribers(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let topic = try Self.topic(context)
        try TopicStore.validateName(topic)
        let body = try await RequestBody.collect(request, upTo: Self.subscribersBodyLimit, what: "a subscribers change")
        let change = try RequestBody.decode(TopicSubscribersChange.self, from: Data(body.readableBytesView),
                                            shape: "{\"add\":[user names],\"remove\":[user names]}")
        let (add, remove) = (change.add ?? [], change.remove ?? [])
        guard add.count + remove.count <= TopicStore.maxNamesPerChange else {
            throw Problem(.contentTooLarge, "\(add.count + remove.count) names, at most \(TopicStore.maxNamesPerChange) a call (added and removed together): split the change into several calls")
        }
        let result = try await topics.change(topic: topic, add: add, remove: remove, audit: context.auditActor(request))
        return try JSONResponse.encode(TopicSubscribersResponse(topic: topic, added: result.added, removed: result.removed,
                                                                subscribers: result.subscribers))
    }

    /// The topic a path names, percent-decoded as every path parameter is (`%25` is a topic's own
    /// `%`): its name is then checked against the pattern, so an escape of any other byte (a
    /// letter outside the pattern, a byte of UTF-8) is refused, not stored as its escape.
    static func topic(_ context: AppRequestContext) throws -> String {
        let raw = try context.parameters.require("topic")
        guard let decoded = raw.removingPercentEncoding else {
            throw Problem(.badRequest, "invalid topic '\(raw.prefix(80))': a malformed percent escape; a topic's own % is written %25")
        }
        try TopicStore.validateName(decoded)
        return decoded
    }
}
