import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import MediaStore
import RichPushCore

/// The `/p/{token}` routes (`Endpoint.payloadLinks`): a payload, and its open, through a signed payload URL.
struct PayloadLinksController: Sendable {
    /// Signs and checks payload URLs.
    let links: PayloadLinks
    let notifications: NotificationStore
    /// Notifications made or fetched here: recipient and payload, so fetches need no database read.
    let payloadIndex: PayloadIndex
    /// Records payload fetches as read, a batch per commit.
    let readMarks: ReadMarks
    let blobs: BlobCache
    /// Serves a payload's `?variant=`.
    let mediaRoom: MediaController
    /// Limits opens reported per client address, the same count as `POST /api/notifications/{id}/opened`.
    let insightRoom: InsightController

    // MARK: payload URLs (docs/api.md#alert-pushes-and-payload-urls)

    /// `GET`/`HEAD /p/{token}`: the payload as `/api/notifications/{id}` answers it, for whoever
    /// holds the URL; 404 for a changed or unknown token, 410 for an expired one.
    func fetchPayloadByLink(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let token = try context.parameters.require("token")
        switch PayloadLinkCheck.check(token, links: links) {
        case .invalid:
            throw Problem(.notFound, "this payload URL is not valid (changed, or signed with a key that was rotated)")
        case .expired(let id):
            throw Problem(.gone, "this payload URL expired; the app can fetch the payload with its credentials at /api/notifications/\(id)")
        case .valid(let id, _):
            // Withdrawn (taken back, a cancelled campaign's, a removed user's): no longer served,
            // here as on the fast path. The image is the notification's now (a change may have
            // replaced the one the token names).
            var current = payloadIndex.get(id)?.payload
            if current == nil { current = try await notifications.servedPayload(id) }
            guard let payload = current else {
                throw Problem(.gone, "notification \(id) was withdrawn; its payload is no longer served")
            }
            let served = try await mediaRoom.variantOrSelf(request, payload)
            guard let source = try await blobs.servable(served) else {
                throw Problem(.notFound, "the payload of notification \(id) is no longer stored")
            }
            let (response, outcome) = try ImageResponse.make(request, source: source, cacheControl: "private")
            if outcome != .head {
                try await readMarks.mark(id)
                Metric.linkFetches.increment()
            }
            return response
        }
    }

    /// `POST /p/{token}/opened`: the same, with the payload URL for credentials, while the URL
    /// serves its payload: 410 once it expired or its notification was withdrawn (docs/security.md).
    func reportOpenedByLink(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try insightRoom.limitOpens(context)
        let token = try context.parameters.require("token")
        switch PayloadLinkCheck.check(token, links: links) {
        case .invalid:
            throw Problem(.notFound, "this payload URL is not valid (changed, or signed with a key that was rotated)")
        case .expired(let id):
            throw Problem(.gone, "this payload URL expired; the app reports the open with its credentials at POST /api/notifications/\(id)/opened")
        case .valid(let id, _):
            guard try await notifications.markOpened(id: id) else {
                throw Problem(.gone, "notification \(id) was withdrawn (its campaign cancelled, or its recipient removed)")
            }
            return Response(status: .noContent)
        }
    }
}
