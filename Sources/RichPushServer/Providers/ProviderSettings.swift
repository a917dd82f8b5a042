/// The push providers `serve` is given besides an apps file (docs/delivery.md#delivery): the
/// credentials of the app `default`, and what every app shares (the extra trusted roots, FCM's
/// endpoint, whether private endpoints are allowed). Plain values: checking that they go
/// together is the caller's, in its own words (`serve`'s flags); the files they name are read
/// when `ProviderWiring` makes the providers.
public struct ProviderSettings: Sendable, Equatable {
    /// APNs: the auth key file (`AuthKey_<KID>.p8`); with `apnsKeyID`, `apnsTeamID` and
    /// `apnsTopic`, all four or none.
    public var apnsKey: String?
    /// APNs: the auth key's id.
    public var apnsKeyID: String?
    /// APNs: the Apple team id.
    public var apnsTeamID: String?
    /// APNs: the app's bundle id, sent as `apns-topic`.
    public var apnsTopic: String?
    /// APNs: `sandbox`, `production`, or `https://host:port` (a stand-in).
    public var apnsEnvironment: String
    /// Notification Hubs: the connection string; with `hubName`, both or neither. A hub sends to
    /// APNs itself, so it goes with no other provider.
    public var hubConnectionString: String?
    /// Notification Hubs: the hub's name.
    public var hubName: String?
    /// FCM HTTP v1: the Firebase service account's JSON key file.
    public var fcmServiceAccount: String?
    /// FCM's base URL, or a stand-in's: also that of every app of an apps file that names none.
    public var fcmEndpoint: String
    /// Web Push: the VAPID signing key file, P-256 in PEM; with `vapidSubject`.
    public var vapidKey: String?
    /// Web Push: a `mailto:` or `https:` contact for the push services.
    public var vapidSubject: String?
    /// Extra trusted root certificates (PEM files) for every app's push connections, and for
    /// webhook receivers.
    public var pushCA: [String]
    /// Web Push endpoints may be http, on any port, at private and loopback addresses, as
    /// local stand-ins need; never in production.
    public var allowPrivatePushEndpoints: Bool
    /// Webhook receivers may be http, at loopback and private addresses.
    public var allowPrivateWebhooks: Bool

    /// Settings; by default, no provider, APNs' sandbox and FCM's own endpoint.
    public init(apnsKey: String? = nil, apnsKeyID: String? = nil, apnsTeamID: String? = nil, apnsTopic: String? = nil,
                apnsEnvironment: String = "sandbox", hubConnectionString: String? = nil, hubName: String? = nil,
                fcmServiceAccount: String? = nil, fcmEndpoint: String = "https://fcm.googleapis.com",
                vapidKey: String? = nil, vapidSubject: String? = nil, pushCA: [String] = [],
                allowPrivatePushEndpoints: Bool = false, allowPrivateWebhooks: Bool = false) {
        self.apnsKey = apnsKey
        self.apnsKeyID = apnsKeyID
        self.apnsTeamID = apnsTeamID
        self.apnsTopic = apnsTopic
        self.apnsEnvironment = apnsEnvironment
        self.hubConnectionString = hubConnectionString
        self.hubName = hubName
        self.fcmServiceAccount = fcmServiceAccount
        self.fcmEndpoint = fcmEndpoint
        self.vapidKey = vapidKey
        self.vapidSubject = vapidSubject
        self.pushCA = pushCA
        self.allowPrivatePushEndpoints = allowPrivatePushEndpoints
        self.allowPrivateWebhooks = allowPrivateWebhooks
    }

    /// Whether any provider is configured (then the app `default` is these settings', and an
    /// apps file may not name it).
    public var configuresProvider: Bool {
        apnsKey != nil || hubConnectionString != nil || fcmServiceAccount != nil || vapidKey != nil
    }
}
