import Foundation
import MediaStore
import Prometheus
import PushDelivery
import RichPushCore

/// Every feature room's controller, built once by `buildApplication`: what an `Endpoint`'s
/// handler is given. A room's controller holds the stores and values its handlers use; this
/// holds the controllers only.
package struct Rooms: Sendable {
    let operations: OperationsController
    let media: MediaController
    let devices: DevicesController
    let notifications: NotificationsController
    let payloadLinks: PayloadLinksController
    let campaigns: CampaignsController
    let insight: InsightController
    let accounts: AccountsController
    let audiences: AudiencesController
    let segments: SegmentsController
    let liveActivities: LiveActivitiesController
    let console: ConsoleController
    let audit: AuditController

    /// The stores a server's rooms share, and what answers from memory.
    package struct Parts: Sendable {
        package var media: MediaStore
        package var users: UserStore
        package var sessions: SessionStore
        package var registrations: RegistrationStore
        package var topics: TopicStore
        package var segments: SegmentStore
        package var notifications: NotificationStore
        package var campaigns: CampaignStore
        package var campaignQueuer: CampaignQueuer
        package var liveActivities: LiveActivityStore
        package var deliveries: DeliveryStore
        /// The audit log (docs/operations.md#audit-log): read by its route, written by the stores.
        package var audit: AuditStore
        package var idempotency: IdempotencyStore
        package var links: PayloadLinks
        package var blobs: BlobCache
        package var payloadIndex: PayloadIndex
        package var readMarks: ReadMarks
        package var authenticator: Authenticator
        package var dispatcher: any PushDispatching
        package var mirror: (any RegistrationMirror)?
        package var prometheus: PrometheusCollectorRegistry

        /// The parts, named.
        package init(media: MediaStore, users: UserStore, sessions: SessionStore, registrations: RegistrationStore, topics: TopicStore,
                     segments: SegmentStore, notifications: NotificationStore, campaigns: CampaignStore, campaignQueuer: CampaignQueuer,
                     liveActivities: LiveActivityStore, deliveries: DeliveryStore, audit: AuditStore,
                     idempotency: IdempotencyStore, links: PayloadLinks, blobs: BlobCache, payloadIndex: PayloadIndex, readMarks: ReadMarks,
                     authenticator: Authenticator, dispatcher: any PushDispatching, mirror: (any RegistrationMirror)?,
                     prometheus: PrometheusCollectorRegistry) {
            self.media = media
            self.users = users
            self.sessions = sessions
            self.registrations = registrations
            self.topics = topics
            self.segments = segments
            self.notifications = notifications
            self.campaigns = campaigns
            self.campaignQueuer = campaignQueuer
            self.liveActivities = liveActivities
            self.deliveries = deliveries
            self.audit = audit
            self.idempotency = idempotency
            self.links = links
            self.blobs = blobs
            self.payloadIndex = payloadIndex
            self.readMarks = readMarks
            self.authenticator = authenticator
            self.dispatcher = dispatcher
            self.mirror = mirror
            self.prometheus = prometheus
        }
    }

    /// Each room with what it needs of `parts` and `settings`; `/openapi.json` made once.
    package init(_ parts: Parts, settings: APISettings) throws {
        let p = parts
        let mediaRoom = MediaController(publicMedia: settings.publicMedia, media: p.media, blobs: p.blobs,
                                        uploads: Gate(limit: settings.maxConcurrentUploads))
        let devicesRoom = DevicesController(apps: settings.apps, allowPrivatePushEndpoints: settings.allowPrivatePushEndpoints,
                                            registrations: p.registrations, mirror: p.mirror, dispatcher: p.dispatcher)
        let campaignsRoom = CampaignsController(apps: settings.apps, campaigns: p.campaigns, campaignQueuer: p.campaignQueuer,
                                                idempotency: p.idempotency, dispatcher: p.dispatcher, payloadIndex: p.payloadIndex)
        let insightRoom = InsightController(notifications: p.notifications, campaigns: p.campaigns,
                                            openRate: RateLimiter(perMinute: settings.opensPerMinute))
        operations = OperationsController(metricsOnOwnPort: settings.metricsOnOwnPort, media: p.media, dispatcher: p.dispatcher, prometheus: p.prometheus,
                                          openAPI: try OpenAPIDocument.make(Endpoint.all, publicMedia: settings.publicMedia, apps: settings.apps))
        media = mediaRoom
        devices = devicesRoom
        notifications = NotificationsController(apps: settings.apps, defaultImage: settings.defaultImage, users: p.users, notifications: p.notifications,
                                                idempotency: p.idempotency, dispatcher: p.dispatcher, payloadIndex: p.payloadIndex,
                                                readMarks: p.readMarks, blobs: p.blobs,
                                                notificationRate: RateLimiter(perMinute: settings.notificationsPerMinute), mediaRoom: mediaRoom)
        payloadLinks = PayloadLinksController(links: p.links, notifications: p.notifications, payloadIndex: p.payloadIndex, readMarks: p.readMarks,
                                              blobs: p.blobs, mediaRoom: mediaRoom, insightRoom: insightRoom)
        campaigns = campaignsRoom
        insight = insightRoom
        accounts = AccountsController(sessionLifetime: settings.sessionLifetime, users: p.users, sessions: p.sessions, topics: p.topics, authenticator: p.authenticator)
        audiences = AudiencesController(users: p.users, topics: p.topics)
        let segmentsRoom = SegmentsController(segments: p.segments)
        segments = segmentsRoom
        let liveActivitiesRoom = LiveActivitiesController(apps: settings.apps, activities: p.liveActivities, dispatcher: p.dispatcher)
        liveActivities = liveActivitiesRoom
        let auditRoom = AuditController(audit: p.audit)
        audit = auditRoom
        console = ConsoleController(apps: settings.apps, defaultImage: settings.defaultImage, traceURL: settings.traceURL, sessionLifetime: settings.sessionLifetime,
                                    servedOverHTTPS: settings.servedOverHTTPS, authenticator: p.authenticator, sessions: p.sessions, media: p.media,
                                    users: p.users, registrations: p.registrations, notifications: p.notifications, campaigns: p.campaigns,
                                    segments: p.segments, deliveries: p.deliveries, mediaRoom: mediaRoom, devicesRoom: devicesRoom, campaignsRoom: campaignsRoom,
                                    insightRoom: insightRoom, segmentsRoom: segmentsRoom, liveActivitiesRoom: liveActivitiesRoom, auditRoom: auditRoom)
    }
}
