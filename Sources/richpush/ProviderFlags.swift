import ArgumentParser
import Foundation
import MediaStore
import Logging
import PushDelivery
import RichPushCore
import RichPushServer

/// The push-provider flags of `serve` (docs/delivery.md#delivery); each also reads `RICHPUSH_<FLAG>`.
/// The server makes the providers from what they say (`settings`).
struct ProviderFlags: ParsableArguments {
    @Option(name: .customLong("apns-key"), help: "APNs auth key, AuthKey_<KID>.p8 (env RICHPUSH_APNS_KEY).")
    var apnsKeyValue: String = Environment.string("RICHPUSH_APNS_KEY") ?? ""
    var apnsKey: String? { apnsKeyValue.isEmpty ? nil : apnsKeyValue }
    @Option(name: .customLong("apns-key-id"), help: "APNs key id (env RICHPUSH_APNS_KEY_ID).")
    var apnsKeyIdValue: String = Environment.string("RICHPUSH_APNS_KEY_ID") ?? ""
    var apnsKeyId: String? { apnsKeyIdValue.isEmpty ? nil : apnsKeyIdValue }
    @Option(name: .customLong("apns-team-id"), help: "Apple team id (env RICHPUSH_APNS_TEAM_ID).")
    var apnsTeamIdValue: String = Environment.string("RICHPUSH_APNS_TEAM_ID") ?? ""
    var apnsTeamId: String? { apnsTeamIdValue.isEmpty ? nil : apnsTeamIdValue }
    @Option(name: .customLong("apns-topic"), help: "The app's bundle id, sent as apns-topic (env RICHPUSH_APNS_TOPIC).")
    var apnsTopicValue: String = Environment.string("RICHPUSH_APNS_TOPIC") ?? ""
    var apnsTopic: String? { apnsTopicValue.isEmpty ? nil : apnsTopicValue }
    @Option(help: "sandbox, production, or https://host:port (env RICHPUSH_APNS_ENV).")
    var apnsEnv: String = Environment.string("RICHPUSH_APNS_ENV") ?? "sandbox"
    // A secret: read from the environment when used, never shown as a default by --help.
    @Option(name: .customLong("anh-connection-string"), help: "Notification Hubs connection string (env RICHPUSH_ANH_CONNECTION_STRING).")
    var anhConnectionStringValue: String?
    @Option(name: .customLong("anh-connection-string-file"),
            help: ArgumentHelp("A file holding the connection string, e.g. a Docker secret (env RICHPUSH_ANH_CONNECTION_STRING_FILE).", valueName: "path"))
    var anhConnectionStringFile: String?
    var anhConnectionString: String? {
        try? Environment.secret(anhConnectionStringValue, file: anhConnectionStringFile, fileFlag: "--anh-connection-string-file",
                                variable: "RICHPUSH_ANH_CONNECTION_STRING")
    }
    @Option(name: .customLong("anh-hub"), help: "Notification Hubs hub name (env RICHPUSH_ANH_HUB).")
    var anhHubValue: String = Environment.string("RICHPUSH_ANH_HUB") ?? ""
    var anhHub: String? { anhHubValue.isEmpty ? nil : anhHubValue }
    @Option(help: ArgumentHelp("FCM HTTP v1: the Firebase service account's JSON key file (env RICHPUSH_FCM_SERVICE_ACCOUNT).", valueName: "file"))
    var fcmServiceAccount: String?
    @Option(help: "FCM's base URL, or a stand-in's (env RICHPUSH_FCM_ENDPOINT).")
    var fcmEndpoint: String = Environment.string("RICHPUSH_FCM_ENDPOINT") ?? "https://fcm.googleapis.com"
    @Option(help: ArgumentHelp("Web Push: the VAPID signing key, P-256 in PEM (env RICHPUSH_VAPID_KEY).", valueName: "pem"))
    var vapidKey: String?
    @Option(help: "Web Push: a mailto: or https: contact for the push services (env RICHPUSH_VAPID_SUBJECT).")
    var vapidSubject: String = Environment.string("RICHPUSH_VAPID_SUBJECT") ?? ""
    /// The flags, else their variables (an optional flag's default cannot come from the environment).
    var fcmAccountPath: String? { fcmServiceAccount ?? Environment.string("RICHPUSH_FCM_SERVICE_ACCOUNT") }
    var vapidKeyPath: String? { vapidKey ?? Environment.string("RICHPUSH_VAPID_KEY") }
    @Option(help: "Extra trusted root certificates (PEM) for push connections (env RICHPUSH_PUSH_CA).")
    var pushCa: [String] = Environment.strings("RICHPUSH_PUSH_CA") ?? []
    @Flag(inversion: .prefixedNo, help: "Web Push: accept and send to endpoints at private, loopback and other non-public addresses, over http and on any port, as local stand-ins need; never in production (env RICHPUSH_ALLOW_PRIVATE_PUSH_ENDPOINTS).")
    var allowPrivatePushEndpoints: Bool = Environment.bool("RICHPUSH_ALLOW_PRIVATE_PUSH_ENDPOINTS") ?? false
    @Flag(inversion: .prefixedNo, help: "Webhooks: deliver to receivers at loopback, private and other non-public addresses, and over http, as a receiver on this machine or a private network needs; never for receivers others choose (env RICHPUSH_ALLOW_PRIVATE_WEBHOOKS).")
    var allowPrivateWebhooks: Bool = Environment.bool("RICHPUSH_ALLOW_PRIVATE_WEBHOOKS") ?? false

    func validate() throws {
        // Files first, as paths: a missing one is said to be missing before anything is opened.
        try PathArgument.check(apnsKey, "--apns-key (env RICHPUSH_APNS_KEY)")
        try PathArgument.check(fcmAccountPath, "--fcm-service-account (env RICHPUSH_FCM_SERVICE_ACCOUNT)")
        try PathArgument.check(vapidKeyPath, "--vapid-key (env RICHPUSH_VAPID_KEY)")
        for path in pushCa { try PathArgument.check(path, "--push-ca (env RICHPUSH_PUSH_CA)") }
        _ = try Environment.secret(anhConnectionStringValue, file: anhConnectionStringFile, fileFlag: "--anh-connection-string-file",
                                   variable: "RICHPUSH_ANH_CONNECTION_STRING")
        let apns = [apnsKey, apnsKeyId, apnsTeamId, apnsTopic]
        if apns.contains(where: { $0 != nil }) && apns.contains(where: { $0 == nil }) {
            throw ValidationError("APNs needs all of --apns-key, --apns-key-id, --apns-team-id and --apns-topic")
        }
        if (anhConnectionString == nil) != (anhHub == nil) {
            throw ValidationError("Notification Hubs needs both --anh-connection-string and --anh-hub")
        }
        if apnsKey != nil && anhConnectionString != nil {
            throw ValidationError("choose one push provider: APNs (--apns-…) or Notification Hubs (--anh-…)")
        }
        if anhConnectionString != nil && (fcmAccountPath != nil || vapidKeyPath != nil) {
            throw ValidationError("Notification Hubs sends to APNs here; FCM and Web Push go direct, beside APNs (--apns-…), not beside a hub")
        }
        if !vapidSubject.isEmpty && !(vapidSubject.hasPrefix("mailto:") && vapidSubject.count > 7 || vapidSubject.hasPrefix("https://") && vapidSubject.count > 8) {
            throw ValidationError("--vapid-subject (env RICHPUSH_VAPID_SUBJECT) must be a mailto: or https: URI, got '\(vapidSubject.prefix(80))'")
        }
        if (vapidKeyPath == nil) != vapidSubject.isEmpty {
            throw ValidationError("Web Push needs both --vapid-key and --vapid-subject (env RICHPUSH_VAPID_KEY, RICHPUSH_VAPID_SUBJECT)")
        }
        guard Loopback.isSecureOrLoopback(fcmEndpoint) else {
            throw ValidationError("--fcm-endpoint must be https (http only on loopback, for a stand-in), got '\(fcmEndpoint.prefix(80))'")
        }
        _ = try APNsEnvironment(apnsEnv)
    }

    /// What the flags (else their variables) say, for `ProviderWiring`.
    var settings: ProviderSettings {
        ProviderSettings(apnsKey: apnsKey, apnsKeyID: apnsKeyId, apnsTeamID: apnsTeamId, apnsTopic: apnsTopic, apnsEnvironment: apnsEnv,
                         hubConnectionString: anhConnectionString, hubName: anhHub, fcmServiceAccount: fcmAccountPath, fcmEndpoint: fcmEndpoint,
                         vapidKey: vapidKeyPath, vapidSubject: vapidSubject.isEmpty ? nil : vapidSubject, pushCA: pushCa,
                         allowPrivatePushEndpoints: allowPrivatePushEndpoints, allowPrivateWebhooks: allowPrivateWebhooks)
    }
}
