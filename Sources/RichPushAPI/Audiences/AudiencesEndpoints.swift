import Hummingbird
import RichPushCore

extension Endpoint {
    /// docs/api.md#attributes-devices-versions-and-topics: users' attributes and the topics they follow.
    static let audiences: [Endpoint] = [
        Endpoint(method: .get, path: "/api/me/attributes", access: .user, summary: "The caller's attributes.",
                 responses: [
                     200: .json(UserAttributesBody.self, "{\"attributes\":{…}}; an empty object when none were set."),
                     404: .problem("The caller has no account (--demo-auth's users have none)."),
                 ]) { rooms, r, c in try await rooms.audiences.showMyAttributes(r, c) },
        Endpoint(method: .put, path: "/api/me/attributes", access: .user, summary: "Replace the caller's attributes.",
                 requestBody: attributesBody, responses: attributesAnswers(notFound: "The caller has no account."),
                 handler: { rooms, r, c in try await rooms.audiences.replaceMyAttributes(r, c) }),
        Endpoint(method: .patch, path: "/api/me/attributes", access: .user,
                 summary: "Change some of the caller's attributes (a JSON merge patch, RFC 7396: a key set to null is removed).",
                 requestBody: attributesPatch, responses: attributesAnswers(notFound: "The caller has no account.", patch: true),
                 handler: { rooms, r, c in try await rooms.audiences.mergeMyAttributes(r, c) }),
        Endpoint(method: .get, path: "/api/admin/users/{name}/attributes", access: .admin, summary: "A user's attributes.",
                 parameters: [namedUser],
                 responses: [
                     200: .json(UserAttributesBody.self, "{\"attributes\":{…}}; an empty object when none were set."),
                     404: .problem("No such user."),
                 ]) { rooms, r, c in try await rooms.audiences.showAttributes(r, c) },
        Endpoint(method: .put, path: "/api/admin/users/{name}/attributes", access: .admin, summary: "Replace a user's attributes.",
                 parameters: [namedUser], requestBody: attributesBody, responses: attributesAnswers(notFound: "No such user."),
                 handler: { rooms, r, c in try await rooms.audiences.replaceAttributes(r, c) }),
        Endpoint(method: .patch, path: "/api/admin/users/{name}/attributes", access: .admin,
                 summary: "Change some of a user's attributes (a JSON merge patch, RFC 7396: a key set to null is removed).",
                 parameters: [namedUser], requestBody: attributesPatch, responses: attributesAnswers(notFound: "No such user.", patch: true),
                 handler: { rooms, r, c in try await rooms.audiences.mergeAttributes(r, c) }),
        Endpoint(method: .get, path: "/api/me/topics", access: .user, summary: "The topics the caller follows, in byte order.",
                 responses: [200: .json(TopicsResponse.self, "{\"topics\":[…]}.")]) { rooms, r, c in try await rooms.audiences.listMyTopics(r, c) },
        Endpoint(method: .put, path: "/api/me/topics/{topic}", access: .user, summary: "Follow a topic (again: nothing changes).",
                 parameters: [topicName],
                 responses: [
                     204: APIResponse(description: "The caller follows it."),
                     400: .problem("The topic is not 1 to 64 of A-Z a-z 0-9 _ . ~ % -."),
                     404: .problem("The caller has no account."),
                     409: .problem("The caller follows 2,000 topics, the most one user may; unfollow some first."),
                 ]) { rooms, r, c in try await rooms.audiences.subscribe(r, c) },
        Endpoint(method: .delete, path: "/api/me/topics/{topic}", access: .user, summary: "Stop following a topic (not following it: nothing changes).",
                 parameters: [topicName],
                 responses: [
                     204: APIResponse(description: "The caller does not follow it."),
                     400: .problem("The topic is not 1 to 64 of A-Z a-z 0-9 _ . ~ % -."),
                 ]) { rooms, r, c in try await rooms.audiences.unsubscribe(r, c) },
        Endpoint(method: .post, path: "/api/admin/topics/{topic}/subscribers", access: .admin,
                 summary: "Add and remove a topic's followers in one transaction: all of it, or nothing when anything is refused.",
                 parameters: [topicName],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("TopicSubscribersChange"))],
                                             description: "{\"add\":[user names],\"remove\":[user names]}: at most 1,000 names together; each user in one list."),
                 responses: [
                     200: .json(TopicSubscribersResponse.self, "How many were added and removed, and how many follow the topic now."),
                     400: .problem("A malformed body or topic, a user in both lists, or names of no user (listed; nothing is changed)."),
                     409: .problem("A user to add follows 2,000 topics, the most one user may (named; nothing is changed)."),
                     413: .problem("More than 1,000 names together, or a body over 128 KiB."),
                 ]) { rooms, r, c in try await rooms.audiences.changeSubscribers(r, c) },
    ]

    private static let namedUser = APIParameter.path("name", ValuePattern.string(ValuePattern.userName), "The user's name.")
    private static let topicName = APIParameter.path("topic", ValuePattern.string(ValuePattern.topic),
                                                     "1 to 64 of A-Z a-z 0-9 _ . ~ % -, as written in the path (percent signs are part of the name).")

    private static let attributesBody = APIRequestBody(
        required: true, content: [("application/json", .ref("UserAttributesBody"))],
        description: "{\"attributes\":{…}}: every attribute the user is to have (the others go). At most 50; keys a lowercase letter, then up to 63 lowercase letters, digits or _; values strings of at most 256 bytes, numbers or booleans.")

    private static let attributesPatch = APIRequestBody(
        required: true, content: [("application/json", .ref("UserAttributesPatchBody"))],
        description: "{\"attributes\":{…}}: keys to set, and keys set to null to remove; keys left out are kept. Sent as application/json or application/merge-patch+json.")

    private static func attributesAnswers(notFound: String, patch: Bool = false) -> [Int: APIResponse] {
        [
            200: .json(UserAttributesBody.self, "The attributes as they are now."),
            400: .problem(patch ? "A key, a value or the body is not valid (the key is named), or the result would have more than 50 attributes."
                                : "A key, a value or the body is not valid (the key is named), or there are more than 50 attributes."),
            404: .problem(notFound),
            413: .problem("The body is over 64 KiB."),
        ]
    }
}
