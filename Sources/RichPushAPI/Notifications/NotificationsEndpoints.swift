import Hummingbird
import RichPushCore

extension Endpoint {
    static let notifications: [Endpoint] = [
        Endpoint(method: .post, path: "/api/notifications", access: .user,
                 summary: "Create a rich notification for the caller (or, for an admin or a send key, the user named in to) and send its push to each of their devices (of app, when named).",
                 parameters: [.query("pns", .string, "Ignored (the tutorial's client sends it)."),
                              .query("to_tag", .string, "Ignored (the tutorial's client sends it)."), idempotencyKey],
                 requestBody: APIRequestBody(required: false, content: [("application/json", .oneOf([
                     JSONSchema.string.with { $0.description = "The message (the tutorial's body)." }, .ref("NotificationRequest"),
                 ]))], description: "Empty (every default), a JSON string (the message), or an object; keys in any case."),
                 keys: .send,
                 responses: [
                     200: .json(DryRunResponse.self, "A dry run (\"dryRun\":true, docs/api.md#dry-runs): the recipient's devices per app and platform and their pushes; nothing was stored, queued or sent."),
                     201: APIResponse.json(NotificationCreated.self, "Created and queued.")
                         .linking("FetchPayload", to: "getApiNotificationsId", parameter: "id", from: "id")
                         .linking("PayloadHeaders", to: "headApiNotificationsId", parameter: "id", from: "id"),
                     400: .problem("The body is not one of the accepted shapes, or a field has the wrong type."),
                     403: .problem("A user named another user in to, or an API key asked for an app it is not bound to, or lacks the scope."),
                     413: .problem("The body is over 64 KiB."),
                     422: .problem("No media of that id or name, no such user or app, the push would be too large, or the notification cannot be made as asked."),
                     429: .problem("The caller made --notifications-per-minute notifications in the last minute (for an API key: the recipient was sent that many by keys).", headers: ["Retry-After": "Seconds to wait."]),
                 ]) { rooms, r, c in try await rooms.notifications.createNotification(r, c) },
        Endpoint(method: .get, path: "/api/notifications", access: .user, summary: "The caller's notifications, newest first.",
                 parameters: [.query("limit", JSONSchema.integer.with { $0.minimum = 1; $0.maximum = 500 }, "At most this many (default 100)."),
                              .query("before", .integer, "Only notifications with smaller ids (the next page).")],
                 responses: [
                     200: .jsonArray(of: NotificationSummary.self, "The notifications."),
                     400: .problem("limit is out of range."),
                 ]) { rooms, r, c in try await rooms.notifications.listNotifications(r, c) },
        Endpoint(method: .get, path: "/api/notifications/{id}", access: .user,
                 summary: "The notification's payload image, for its recipient alone; marks it read.",
                 parameters: imageParameters(.path("id", notificationID, "The notification id.")),
                 responses: imageResponses(notFound: "No such notification for this user, or its payload is gone.")
                    .merging([410: .problem("Its sender took it back (docs/api.md#change-or-take-back-what-was-sent).")]) { $1 }) { rooms, r, c in
            try await rooms.notifications.fetchPayload(r, c)
        },
        Endpoint(method: .patch, path: "/api/notifications/{id}", access: .user,
                 summary: "Change a notification its caller sent (docs/api.md#change-or-take-back-what-was-sent): its inbox entry and payload URL show the new content, and each device that got it gets a replacement (quietly unless alertAgain).",
                 parameters: [.path("id", notificationID, "The notification id.")],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("ContentChangeRequest"))],
                                             description: "The fields to change; each left out stays (content, words per locale, is a campaign's)."),
                 keys: .send,
                 responses: [
                     200: .json(NotificationChangeResponse.self, "Changed."),
                     400: .problem("The body is not valid, or names no field to change."),
                     403: .problem("The caller is its recipient, not its sender."),
                     404: .problem("No such notification for this caller."),
                     409: .problem("It was taken back."),
                     413: .problem("The body is over 64 KiB."),
                     422: .problem("The payload does not exist, or the push would be too large."),
                 ]) { rooms, r, c in try await rooms.notifications.changeNotification(r, c) },
        Endpoint(method: .delete, path: "/api/notifications/{id}", access: .user,
                 summary: "Take back a notification its caller sent (docs/api.md#change-or-take-back-what-was-sent): it leaves the inbox, its payload URL answers 410, and each device that got it is sent a retraction.",
                 parameters: [.path("id", notificationID, "The notification id.")],
                 requestBody: APIRequestBody(required: false, content: [("application/json", .ref("RetractRequest"))],
                                             description: "Optional: retractedText, what browsers show instead."),
                 keys: .send,
                 responses: [
                     200: .json(RetractResponse.self, "Taken back."),
                     400: .problem("The body is not valid."),
                     403: .problem("The caller is its recipient, not its sender."),
                     404: .problem("No such notification for this caller."),
                     409: .problem("It was already taken back."),
                     413: .problem("The body is over 16 KiB."),
                 ]) { rooms, r, c in try await rooms.notifications.retractNotification(r, c) },
        Endpoint(method: .head, path: "/api/notifications/{id}", access: .user, summary: "The payload image's headers.",
                 parameters: imageParameters(.path("id", notificationID, "The notification id.")),
                 responses: imageResponses(notFound: "No such notification for this user, or its payload is gone.")
                    .merging([410: .problem("Its sender took it back (docs/api.md#change-or-take-back-what-was-sent).")]) { $1 }) { rooms, r, c in
            try await rooms.notifications.fetchPayload(r, c)
        },
    ]
}
