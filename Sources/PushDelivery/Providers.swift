import ServiceLifecycle
import Logging
import Foundation
import RichPushCore

/// A push service the outbox can deliver through.
public protocol PushProvider: Sendable {
    /// How notifications address their pushes for this provider.
    var addressing: DeliveryAddressing { get }
    /// Makes one attempt; the timestamp is Apple's on a 410.
    func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?)
    /// Starts one attempt and calls `completion` once with its outcome, from any thread. The
    /// outbox sends through this; the default runs `deliver` in a task, and a provider that can
    /// answer from its connection's event loop does so with no task per push.
    func start(_ job: DeliveryJob, completion: @escaping @Sendable (DeliveryOutcome, Date?) -> Void)
    /// Closes connections.
    func shutdown() async
    /// The service it sends to, as metrics name it (`apns`, `notificationhubs`).
    var platform: String { get }
    /// The device platforms whose pushes it sends (`apns`, `fcm`, `web`), which are the outbox
    /// rows this node claims; nil for every row (a hub, whose rows name no platform).
    var platforms: Set<String>? { get }
    /// The platform a push's duration is counted under.
    func platform(of job: DeliveryJob) -> String
    /// The service host a push goes to, when pushes of one platform go to many hosts chosen by
    /// users (Web Push's endpoints): the outbox sends at most a few at once to one such host,
    /// so a host that never answers holds only its own pushes. nil: no such limit.
    func concurrencyGroup(of job: DeliveryJob) -> String?
    /// Makes an APNs broadcast channel for `app`'s Live Activities (docs/api.md#live-activities)
    /// and returns its id; throws where `app` sends no APNs pushes directly.
    func createChannel(app: String) async throws -> String
    /// Deletes `app`'s broadcast channel `id` (one APNs no longer knows counts as deleted).
    func deleteChannel(_ id: String, app: String) async throws
}

extension PushProvider {
    public var platform: String { "other" }
    public var platforms: Set<String>? { nil }
    public func platform(of job: DeliveryJob) -> String { platform }
    public func concurrencyGroup(of job: DeliveryJob) -> String? { nil }

    public func createChannel(app: String) async throws -> String {
        throw PushError.configuration("app \(app) sends no APNs pushes directly: broadcast Live Activities need its --apns-key…")
    }

    public func deleteChannel(_ id: String, app: String) async throws {
        throw PushError.configuration("app \(app) sends no APNs pushes directly: it has no broadcast channels")
    }

    public func start(_ job: DeliveryJob, completion: @escaping @Sendable (DeliveryOutcome, Date?) -> Void) {
        Task {
            let (outcome, timestamp) = await deliver(job)
            completion(outcome, timestamp)
        }
    }
}

/// APNs direct: one push per device token, with its notification's priority and expiry (docs/api.md#options-badges-and-paced-sends).
public struct APNsProvider: PushProvider {
    public let client: APNsClient

    /// Wraps a client.
    public init(client: APNsClient) {
        self.client = client
    }

    public var addressing: DeliveryAddressing { .perDevice }
    public var platform: String { "apns" }

    public func createChannel(app: String) async throws -> String {
        try await client.createChannel()
    }

    public func deleteChannel(_ id: String, app: String) async throws {
        try await client.deleteChannel(id)
    }

    public func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?) {
        await withCheckedContinuation { continuation in
            start(job) { outcome, timestamp in continuation.resume(returning: (outcome, timestamp)) }
        }
    }

    public func start(_ job: DeliveryJob, completion: @escaping @Sendable (DeliveryOutcome, Date?) -> Void) {
        let life = job.sendingLife
        // `apns-expiration` is a moment: 0 for now or never, else the end of the push's life.
        let expiration = life == 0 ? Date(timeIntervalSince1970: 0) : (job.expiresAt ?? Date())
        if let activity = job.activity {
            // docs/api.md#live-activities: a broadcast's end deletes its channel once APNs took it.
            let client = self.client
            client.start(token: job.target, payload: job.payload, mode: job.mode, pushID: job.pushId, expiration: expiration,
                         priority: String(activity.priority), liveActivity: true, channelID: activity.channelId) { outcome, timestamp in
                if case .sent = outcome, activity.event == "end", let channel = activity.channelId {
                    Task {
                        do { try await client.deleteChannel(channel) } catch {
                            // APNs keeps a bounded number of channels per app: an operator deletes this one by hand.
                            Logger(label: "richpush.apns").warning("broadcast channel of an ended live activity not deleted",
                                                                   metadata: ["activity": "\(activity.id)", "channel": "\(channel)", "error": "\(error)"])
                        }
                    }
                }
                completion(outcome, timestamp)
            }
            return
        }
        client.start(token: job.target, payload: job.payload, mode: job.mode, pushID: job.pushId, expiration: expiration,
                     collapseID: job.alertCollapseID, priority: job.options.apnsPriority(job.mode), completion: completion)
    }

    public func shutdown() async {
        try? await client.shutdown()
    }
}

/// Notification Hubs: one send per notification, to the tag `username:<recipient>`.
public struct NotificationHubsProvider: PushProvider {
    public let client: NotificationHubsClient

    /// Wraps a client.
    public init(client: NotificationHubsClient) {
        self.client = client
    }

    public var addressing: DeliveryAddressing { .perUserTag }
    public var platform: String { "notificationhubs" }

    /// A per-user row carries its tag; a per-device row (a notification queued by another process,
    /// such as `richpush notify`) goes to that device's installation, mirrored under the registration id.
    public func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?) {
        if job.activity != nil {
            return (.failed(reason: "Live Activities go to APNs directly (--apns-key…), not through Notification Hubs", prune: false), nil)
        }
        let tag = job.registrationId.map { "$InstallationId:{\($0)}" } ?? job.target
        let life = job.sendingLife
        return (await client.send(payload: job.payload, mode: job.mode, tag: tag, priority: job.options.apnsPriority(job.mode),
                                  expiry: life == 0 ? nil : job.expiresAt), nil)
    }

    public func shutdown() async {
        try? await client.shutdown()
    }
}

/// Keeps a push service's view of device registrations in step with ours (Notification Hubs
/// can only deliver to tags it knows).
public protocol RegistrationMirror: Sendable {
    /// Creates or replaces the device's installation.
    func upsert(_ registration: Registration) async throws
    /// Removes it.
    func delete(registrationID: String) async throws
}

extension NotificationHubsClient: RegistrationMirror {
    public func upsert(_ registration: Registration) async throws {
        guard let handle = registration.handle else { return }
        switch try await upsertInstallation(id: registration.id, deviceToken: handle, tags: registration.tags) {
        case .sent: return
        case .failed(let reason, _): throw PushError.transport("Notification Hubs refused the installation: \(reason)")
        case .retry(let reason, _): throw PushError.transport("Notification Hubs is unavailable: \(reason)")
        }
    }

    public func delete(registrationID: String) async throws {
        switch try await deleteInstallation(id: registrationID) {
        case .sent: return
        case .failed(let reason, _) where reason.hasPrefix("404"): return
        case .failed(let reason, _), .retry(let reason, _):
            throw PushError.transport("Notification Hubs could not delete the installation: \(reason)")
        }
    }
}

/// Removes from a push service's copy (Notification Hubs installations) every registration
/// deleted here, by whichever process deleted it, so a removed user's devices stop getting
/// pushes through the hub. Runs in `serve` when a hub is configured; a failed deletion is tried
/// again on the next round.
public struct MirrorReconciler: Service {
    let registrations: RegistrationStore
    let mirror: any RegistrationMirror
    let interval: Duration
    let logger: Logger

    /// Creates the reconciler; it looks every `interval`.
    public init(registrations: RegistrationStore, mirror: any RegistrationMirror, interval: Duration = .seconds(1), logger: Logger) {
        self.registrations = registrations
        self.mirror = mirror
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        // Cancelled, its sleep returns at once: the loop ends rather than spin.
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            do {
                for id in try await registrations.pendingMirrorDeletions() {
                    do {
                        try await mirror.delete(registrationID: id)
                        try await registrations.mirrorDeleted(id)
                    } catch {
                        logger.warning("cannot remove a deleted registration from the hub yet", metadata: ["id": "\(id)", "error": "\(error)"])
                        break
                    }
                }
            } catch {
                logger.error("cannot read deleted registrations", metadata: ["error": "\(error)"])
            }
            // A graceful shutdown ends the pause too (a plain sleep held it up to `interval`).
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
    }
}

/// FCM HTTP v1: one message per registration token, `data` always and a `notification` with the
/// image in alert mode (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push).
public struct FCMProvider: PushProvider {
    public let client: FCMClient

    /// Wraps a client.
    public init(client: FCMClient) {
        self.client = client
    }

    public var addressing: DeliveryAddressing { .perDevice }
    public var platform: String { "fcm" }

    public func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?) {
        guard let body = Self.message(for: job, life: job.sendingLife) else { return (.failed(reason: "the push has no content for FCM", prune: false), nil) }
        return (await client.send(body), nil)
    }

    /// The body `job` goes to FCM as, living `life` seconds (what a dry run shows,
    /// docs/api.md#dry-runs); nil for a push with no content for FCM.
    public static func message(for job: DeliveryJob, life: Int) -> Data? {
        if let activity = job.activity {
            // docs/api.md#live-activities: a data message the app renders, each newer one replacing
            // the one before while the device is offline (the activity's collapse key), high
            // priority for the start and the end.
            let object = (try? JSONSerialization.jsonObject(with: activity.twin)) as? [String: Any] ?? [:]
            var data: [String: String] = [:]
            for (key, value) in object {
                if let text = value as? String { data[key] = text } else if JSONSerialization.isValidJSONObject(value),
                   let json = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes]) {
                    data[key] = String(decoding: json, as: UTF8.self)
                } else { data[key] = "\(value)" }
            }
            return FCMClient.message(token: job.target, data: data, notification: nil, collapseKey: activity.id,
                                     mode: activity.priority == 10 ? .alert : .silent, ttl: life)
        }
        guard let content = job.content else { return nil }
        // Android shows a notification image only up to 1 MB: the push variant (docs/configuration.md#the-media-store).
        let image = content.richUrl.map { $0 + ($0.contains("?") ? "&" : "?") + "variant=push" }
        let notification = job.mode == .alert ? (title: content.title, body: content.message, image: image) : nil
        // The collapse id is the Android notification's tag, never a collapse key: FCM keeps every
        // notification for an offline device, where it would keep only four keys (docs/security.md).
        return FCMClient.message(token: job.target, data: content.fcmData, notification: notification,
                                 collapseID: job.alertCollapseID, mode: job.mode, options: job.options, badge: content.badge, ttl: life)
    }

    public func shutdown() async {
        try? await client.shutdown()
    }
}

/// Web Push: each message encrypted for its subscription and sent with VAPID; alert pushes are
/// `Urgency: high` (unless their options say `normal`), silent ones `normal`, and both live as
/// long as their options' `expiresIn`, a day by default (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push, §22).
public struct WebPushProvider: PushProvider {
    public let client: WebPushClient

    /// Wraps a client.
    public init(client: WebPushClient) {
        self.client = client
    }

    public var addressing: DeliveryAddressing { .perDevice }
    public var platform: String { "web" }

    /// The endpoint's host: each push service (and each host a user names) is its own group.
    public func concurrencyGroup(of job: DeliveryJob) -> String? {
        guard let subscription = try? WebPushSubscription(jsonText: job.target) else { return nil }
        return "web:" + (URLComponents(string: subscription.endpoint)?.host?.lowercased() ?? "")
    }

    public func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?) {
        guard let subscription = try? WebPushSubscription(jsonText: job.target) else {
            // Not pruned: a stored handle that no longer reads is this server's problem, not the browser's.
            return (.failed(reason: "the registration's handle is not a PushSubscription", prune: false), nil)
        }
        guard let message = Self.message(for: job) else { return (.failed(reason: "the push has no content for Web Push", prune: false), nil) }
        let outcome = await client.send(Array(message.plaintext), to: subscription, ttl: job.sendingLife, urgency: message.urgency, topic: message.topic)
        return (outcome, nil)
    }

    /// What `job` goes to a browser as (what a dry run shows, docs/api.md#dry-runs): the message
    /// before it is encrypted, its `Urgency` and its `Topic`; nil for a push with no content for Web Push.
    public static func message(for job: DeliveryJob) -> (plaintext: Data, urgency: WebPushClient.Urgency, topic: String?)? {
        if let activity = job.activity {
            // docs/api.md#live-activities: one notification per activity, replaced by its Topic and tag.
            let urgency: WebPushClient.Urgency = activity.priority == 10 ? .high : .normal
            return (plaintext: activity.twin, urgency: urgency, topic: activity.id)
        }
        guard let content = job.content else { return nil }
        let high = job.mode == .alert && job.options.priority != .normal
        let urgency: WebPushClient.Urgency = high ? .high : .normal
        return (plaintext: content.webPushPlaintext, urgency: urgency, topic: job.collapseID)
    }

    public func shutdown() async {
        try? await client.shutdown()
    }
}

/// Sends each push through the provider of its device's platform (`apns` for devices registered
/// before platforms were recorded). A platform this server has no credentials for fails the push,
/// saying which flags would send it.
public struct PlatformRouter: PushProvider {
    /// Platform → provider.
    public let providers: [String: any PushProvider]

    /// Routes to `providers` by platform.
    public init(_ providers: [String: any PushProvider]) {
        self.providers = providers
    }

    public var addressing: DeliveryAddressing { .perDevice }
    public var platforms: Set<String>? { Set(providers.keys) }
    /// The device's platform; nil is an APNs device registered before platforms were recorded.
    public func platform(of job: DeliveryJob) -> String { job.platform ?? "apns" }

    private func provider(for job: DeliveryJob) -> (any PushProvider)? { providers[job.platform ?? "apns"] }

    public func concurrencyGroup(of job: DeliveryJob) -> String? { provider(for: job)?.concurrencyGroup(of: job) }

    private static func missing(_ job: DeliveryJob) -> DeliveryOutcome {
        guard job.app == AppName.default else {
            return .failed(reason: "app \(job.app) sends no \(job.platform ?? "apns") pushes: give it \(job.platform ?? "apns") credentials in serve --apps", prune: false)
        }
        let flags = switch job.platform ?? "apns" {
        case "fcm": "--fcm-service-account"
        case "web": "--vapid-key and --vapid-subject"
        default: "--apns-key, --apns-key-id, --apns-team-id and --apns-topic"
        }
        return .failed(reason: "this server sends no \(job.platform ?? "apns") pushes: start serve with \(flags)", prune: false)
    }

    public func createChannel(app: String) async throws -> String {
        guard let apns = providers["apns"] else {
            throw PushError.configuration(app == AppName.default ? "this server sends no APNs pushes: broadcast Live Activities need --apns-key, --apns-key-id, --apns-team-id and --apns-topic"
                                                                 : "app \(app) sends no APNs pushes: give it APNs credentials in serve --apps")
        }
        return try await apns.createChannel(app: app)
    }

    public func deleteChannel(_ id: String, app: String) async throws {
        guard let apns = providers["apns"] else { throw PushError.configuration("this server sends no APNs pushes: it has no broadcast channels") }
        try await apns.deleteChannel(id, app: app)
    }

    public func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?) {
        guard let provider = provider(for: job) else { return (Self.missing(job), nil) }
        return await provider.deliver(job)
    }

    public func start(_ job: DeliveryJob, completion: @escaping @Sendable (DeliveryOutcome, Date?) -> Void) {
        guard let provider = provider(for: job) else { return completion(Self.missing(job), nil) }
        provider.start(job, completion: completion)
    }

    public func shutdown() async {
        for provider in providers.values { await provider.shutdown() }
    }
}

/// Sends each push with its app's provider (docs/api.md#apps-and-api-keys): the `default` app's (the section 7 and
/// 12 flags) and those of `serve --apps`. Each app's provider has its own credentials and
/// connections, and this node claims only the pushes of the apps and platforms it can send.
public struct AppRouter: PushProvider {
    /// App name → its provider (a `PlatformRouter`, or a hub's).
    public let apps: [String: any PushProvider]

    /// Routes to `apps` by the app of each push's device.
    public init(_ apps: [String: any PushProvider]) {
        self.apps = apps
    }

    /// Apps whose provider sends through a hub are addressed by user tag.
    public var addressing: DeliveryAddressing {
        DeliveryAddressing(tagApps: Set(apps.filter { $0.value.addressing.tagApps.contains(AppName.default) }.keys))
    }

    /// `PLATFORM` for the default app's platforms, `APP/PLATFORM` for the others' (`*`: a hub's rows, any platform).
    public var platforms: Set<String>? {
        var sends: Set<String> = []
        for (app, provider) in apps {
            let platforms = provider.platforms ?? ["*"]
            sends.formUnion(app == AppName.default ? platforms : Set(platforms.map { "\(app)/\($0)" }))
        }
        return sends
    }

    public func platform(of job: DeliveryJob) -> String { apps[job.app]?.platform(of: job) ?? (job.platform ?? "apns") }

    public func concurrencyGroup(of job: DeliveryJob) -> String? { apps[job.app]?.concurrencyGroup(of: job) }

    private static func missing(_ job: DeliveryJob) -> DeliveryOutcome {
        .failed(reason: "this server has no app named \(job.app): add it to serve --apps", prune: false)
    }

    public func createChannel(app: String) async throws -> String {
        guard let provider = apps[app] else { throw PushError.configuration("this server has no app named \(app): add it to serve --apps") }
        return try await provider.createChannel(app: app)
    }

    public func deleteChannel(_ id: String, app: String) async throws {
        guard let provider = apps[app] else { throw PushError.configuration("this server has no app named \(app): add it to serve --apps") }
        try await provider.deleteChannel(id, app: app)
    }

    public func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?) {
        guard let provider = apps[job.app] else { return (Self.missing(job), nil) }
        return await provider.deliver(job)
    }

    public func start(_ job: DeliveryJob, completion: @escaping @Sendable (DeliveryOutcome, Date?) -> Void) {
        guard let provider = apps[job.app] else { return completion(Self.missing(job), nil) }
        provider.start(job, completion: completion)
    }

    public func shutdown() async {
        for provider in apps.values { await provider.shutdown() }
    }
}

/// Every app's hub copy of registrations (docs/api.md#apps-and-api-keys): a registration goes to its own app's hub; a
/// deleted one is removed from every hub (it is gone from ours, whichever app it was of; a hub
/// that never had it answers 404, which counts as done).
public struct AppMirrors: RegistrationMirror {
    /// App name → its hub.
    public let mirrors: [String: any RegistrationMirror]

    /// Mirrors each app's registrations into its own hub.
    public init(mirrors: [String: any RegistrationMirror]) {
        self.mirrors = mirrors
    }

    public func upsert(_ registration: Registration) async throws {
        try await mirrors[registration.app]?.upsert(registration)
    }

    public func delete(registrationID: String) async throws {
        for app in mirrors.keys.sorted() { try await mirrors[app]!.delete(registrationID: registrationID) }
    }
}
