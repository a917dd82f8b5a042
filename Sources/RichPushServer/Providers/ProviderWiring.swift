import Logging
import Metrics
import PushDelivery
import RichPushAPI
import RichPushCore

/// The push side of `serve`, made from plain values (docs/delivery.md#delivery): each app's
/// providers, from an apps file and, for the app `default`, from `ProviderSettings`; then the
/// one provider, registration mirror and dispatcher the server sends through.
///
/// Made in two steps: the apps file (`addApps`) before the data directory is opened, so that a
/// bad one is named before anything is created; the settings' providers (`addSettings`) after.
public struct ProviderWiring {
    /// One app's provider (a router by platform, or its hub's) and, for a hub, the mirror of
    /// its registrations.
    public typealias AppProvider = (provider: any PushProvider, mirror: (any RegistrationMirror)?)

    /// The app `default`'s credentials and what every app shares.
    public let settings: ProviderSettings
    /// Each app's provider by app name, as added so far.
    public private(set) var apps: [String: AppProvider] = [:]
    /// Each app's frequency cap and quiet hours (docs/api.md#frequency-caps-and-quiet-hours): the file's, and
    /// `serve --frequency-cap`/`--quiet-hours`' for `default`.
    public var limits: [String: AppLimits] = [:]

    /// Wiring for `settings`, with no app yet.
    public init(settings: ProviderSettings) {
        self.settings = settings
    }

    /// Reads the apps file at `path` and makes each app's providers, noting in `configuration`
    /// what devices may ask of each app (the app `default`'s VAPID key as the server's own).
    /// Throws `AppsFileError` for a file that cannot be used, a credential that cannot be, and
    /// an app `default` in the file while `settings` configure a provider.
    public mutating func addApps(file path: String, to configuration: inout ServerConfiguration) throws {
        let definitions = try AppsFile.load(path)
        for definition in definitions {
            if definition.name == AppName.default && settings.configuresProvider {
                throw AppsFileError(path, app: definition.name, "name: the push flags (--apns-…, --fcm-…, --vapid-…, --anh-…) configure the app default; leave it out of the file, or the flags out")
            }
            let made = try definition.makeProvider(settings: settings, file: path)
            apps[definition.name] = (made.provider, made.mirror)
            if !definition.limits.isEmpty { limits[definition.name] = definition.limits }
            if definition.name == AppName.default {
                configuration.vapidPublicKey = made.profile.vapidPublicKey
            } else {
                configuration.apps[definition.name] = made.profile
            }
        }
    }

    /// Makes the app `default`'s providers from `settings`, when they configure any, and notes
    /// in `configuration` its VAPID public key, the extra roots (webhooks trust them too) and
    /// whether private push endpoints and webhooks are allowed. Throws when a credential file
    /// cannot be read or used.
    public mutating func addSettings(to configuration: inout ServerConfiguration) throws {
        let settings = self.settings
        let vapid = try settings.vapidKey.map { try VAPID(pem: $0, subject: settings.vapidSubject ?? "") }
        if let vapid { configuration.vapidPublicKey = vapid.publicKey }
        configuration.allowPrivatePushEndpoints = settings.allowPrivatePushEndpoints
        configuration.webhookRoots = settings.pushCA
        configuration.allowPrivateWebhooks = settings.allowPrivateWebhooks
        if let made = try Self.makeProvider(settings, vapid: vapid) { apps[AppName.default] = made }
    }

    /// What the server sends through: nil for no app; the app `default`'s provider as it is
    /// when it is the only app; else a router sending each push through its app's, with the
    /// hubs' mirrors, each app's registrations going to its own hub.
    public var chosen: AppProvider? {
        switch apps.count {
        case 0:
            return nil
        case 1 where apps.keys.first == AppName.default:
            return apps[AppName.default]
        default:
            return (AppRouter(apps.mapValues(\.provider)),
                    apps.contains { $0.value.mirror != nil } ? AppMirrors(mirrors: apps.compactMapValues(\.mirror)) : nil)
        }
    }

    /// A dispatcher sending `outbox`'s pushes through `chosen`, and the registrations' mirror;
    /// nil when no app has a provider (pushes then stay pending in the outbox).
    public func makeDispatcher(outbox: OutboxStore, logger: Logger) -> (dispatcher: OutboxDispatcher, mirror: (any RegistrationMirror)?)? {
        guard let (provider, mirror) = chosen else { return nil }
        // Users may set their own quiet hours whatever the apps say: the outbox always screens.
        var outbox = outbox
        outbox.guardrails = Guardrails(apps: limits, onHeldBack: { app, outcome in
            Counter(label: "richpush_held_back_pushes_total", dimensions: [("outcome", outcome.rawValue), ("app", app)]).increment()
        })
        return (OutboxDispatcher(outbox: outbox, provider: provider, logger: logger), mirror)
    }

    /// The settings' provider (a router by platform, even for APNs alone) and, for a hub, its
    /// mirror; nil when they configure none.
    private static func makeProvider(_ settings: ProviderSettings, vapid: VAPID?) throws -> AppProvider? {
        if let connection = settings.hubConnectionString, let hub = settings.hubName {
            let client = try NotificationHubsClient(connection: try NotificationHubsConnection(connection), hub: hub, extraRoots: settings.pushCA)
            return (NotificationHubsProvider(client: client), client)
        }
        var providers: [String: any PushProvider] = [:]
        if let key = settings.apnsKey, let keyID = settings.apnsKeyID, let teamID = settings.apnsTeamID, let topic = settings.apnsTopic {
            let credentials = try APNsCredentials(p8: key, keyID: keyID, teamID: teamID)
            let client = try APNsClient(credentials: credentials, topic: topic, environment: try APNsEnvironment(settings.apnsEnvironment),
                                        extraRoots: settings.pushCA)
            providers["apns"] = APNsProvider(client: client)
        }
        if let path = settings.fcmServiceAccount {
            providers["fcm"] = FCMProvider(client: try FCMClient(account: try FCMServiceAccount(file: path), endpoint: settings.fcmEndpoint,
                                                                 extraRoots: settings.pushCA))
        }
        if let vapid {
            providers["web"] = WebPushProvider(client: try WebPushClient(vapid: vapid, extraRoots: settings.pushCA,
                                                                         allowPrivateEndpoints: settings.allowPrivatePushEndpoints))
        }
        // Always through the router: a browser's or Android device's handle never goes to Apple.
        return providers.isEmpty ? nil : (PlatformRouter(providers), nil)
    }
}
