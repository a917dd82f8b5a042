import Foundation
import RichPushCore

/// A push as its provider would send it, for a dry run's samples (docs/api.md#dry-runs): the body
/// and the headers that carry its meaning, made by the providers' own builders
/// (`FCMProvider.message`, `WebPushProvider.message`, the stored APNs payload). Credentials, the
/// push's id, the APNs topic and what only the transport needs are left out; a Web Push body is
/// shown before it is encrypted.
public struct PushPreview: Sendable {
    /// APNs' payload (a hub's too), FCM's HTTP v1 body, or Web Push's plaintext.
    public var body: Data
    /// The headers it would carry (none for FCM, whose message holds its options).
    public var headers: [String: String]

    /// `job` as the provider of `platform` (`apns`, `fcm`, `web`, `hub`) would send it at `now`.
    public init(_ job: DeliveryJob, platform: String, now: Date = Date()) {
        let life = job.remainingLife(now: now) ?? 0
        switch platform {
        case "fcm":
            // The device's registration token is a credential of sorts (whoever holds it can push to
            // the phone through the app's project): shown as x's of its length, so the size is real.
            var shown = job
            shown.target = String(repeating: "x", count: job.target.count)
            body = FCMProvider.message(for: shown, life: life) ?? Data()
            headers = [:]
        case "web":
            let message = WebPushProvider.message(for: job)
            body = message?.plaintext ?? Data()
            var headers = ["TTL": String(max(0, life)), "Urgency": (message?.urgency ?? .normal).rawValue]
            if let topic = message?.topic { headers["Topic"] = topic }
            self.headers = headers
        case "hub":
            // As `NotificationHubsProvider` sends it: a tag per user, or a device's installation.
            body = job.payload
            var headers = ["ServiceBusNotification-Format": "apple",
                           "ServiceBusNotification-Tags": job.registrationId.map { "$InstallationId:{\($0)}" } ?? job.target,
                           "apns-push-type": job.mode.apnsPushType, "apns-priority": job.options.apnsPriority(job.mode)]
            if life != 0, let expiry = job.expiresAt { headers["ServiceBusNotification-Apns-Expiry"] = expiry.formatted(.iso8601) }
            self.headers = headers
        default:
            // As `APNsProvider` and `APNsClient` send it: a Live Activity's push with its own type and priority.
            body = job.payload
            let expiration = life == 0 ? 0 : Int((job.expiresAt ?? now).timeIntervalSince1970)
            var headers = ["apns-expiration": String(expiration)]
            if let activity = job.activity {
                headers["apns-push-type"] = "liveactivity"
                headers["apns-priority"] = String(activity.priority)
                if let channel = activity.channelId { headers["apns-channel-id"] = channel }
            } else {
                headers["apns-push-type"] = job.mode.apnsPushType
                headers["apns-priority"] = job.options.apnsPriority(job.mode)
                if let collapse = job.alertCollapseID { headers["apns-collapse-id"] = collapse }
            }
            self.headers = headers
        }
    }
}
