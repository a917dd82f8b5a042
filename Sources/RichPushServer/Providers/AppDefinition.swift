import PushDelivery
import RichPushAPI
import RichPushCore

/// One app of `serve --apps` (docs/api.md#apps-and-api-keys), its credentials read from files so they can be mounted secrets.
struct AppDefinition {
    struct APNs {
        var key: String
        var keyID: String
        var teamID: String
        var topic: String
        var environment: String
    }
    struct FCM {
        var serviceAccount: String
        var endpoint: String?
    }
    struct WebPush {
        var vapidKey: String
        var subject: String
    }
    struct Hub {
        var connectionString: String
        var name: String
    }
    var name: String
    var apns: APNs?
    var fcm: FCM?
    var webPush: WebPush?
    var hub: Hub?
    /// Its frequency cap and quiet hours (docs/api.md#frequency-caps-and-quiet-hours).
    var limits = AppLimits()

    /// The app's provider (a router by platform, or its hub's), the hub as its registrations'
    /// mirror, and what devices may ask of it. The extra roots, the FCM endpoint and private
    /// endpoints come from `settings`, shared by every app. A credential that cannot be used is
    /// an `AppsFileError` naming `file`, the app and its field.
    func makeProvider(settings: ProviderSettings, file: String) throws -> (provider: any PushProvider, mirror: (any RegistrationMirror)?, profile: AppProfile) {
        func failing(_ field: String, _ body: () throws -> Void) throws {
            do { try body() } catch let error as AppsFileError { throw error } catch { throw AppsFileError(file, app: name, "\(field): \(error)") }
        }
        if let hub {
            var client: NotificationHubsClient?
            try failing("hub") {
                client = try NotificationHubsClient(connection: try NotificationHubsConnection(hub.connectionString), hub: hub.name, extraRoots: settings.pushCA)
            }
            return (NotificationHubsProvider(client: client!), client!, AppProfile(hub: true))
        }
        var providers: [String: any PushProvider] = [:]
        var profile = AppProfile()
        if let apns {
            try failing("apns.key") {
                let credentials = try APNsCredentials(p8: apns.key, keyID: apns.keyID, teamID: apns.teamID)
                let client = try APNsClient(credentials: credentials, topic: apns.topic, environment: try APNsEnvironment(apns.environment),
                                            extraRoots: settings.pushCA)
                providers["apns"] = APNsProvider(client: client)
            }
        }
        if let fcm {
            try failing("fcm.serviceAccount") {
                providers["fcm"] = FCMProvider(client: try FCMClient(account: try FCMServiceAccount(file: fcm.serviceAccount),
                                                                     endpoint: fcm.endpoint ?? settings.fcmEndpoint, extraRoots: settings.pushCA))
            }
        }
        if let webPush {
            try failing("webpush.vapidKey") {
                let vapid = try VAPID(pem: webPush.vapidKey, subject: webPush.subject)
                profile.vapidPublicKey = vapid.publicKey
                providers["web"] = WebPushProvider(client: try WebPushClient(vapid: vapid, extraRoots: settings.pushCA,
                                                                             allowPrivateEndpoints: settings.allowPrivatePushEndpoints))
            }
        }
        return (PlatformRouter(providers), nil, profile)
    }
}
