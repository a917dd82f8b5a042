import ArgumentParser
import Foundation
import MediaStore
import Logging
import PushDelivery

/// The push-provider flags of `serve` (SPEC §7); each also reads `RICHPUSH_<FLAG>`.
struct PushOptions: ParsableArguments {
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
    @Option(help: "Extra trusted root certificates (PEM) for push connections (env RICHPUSH_PUSH_CA).")
    var pushCa: [String] = Environment.strings("RICHPUSH_PUSH_CA") ?? []

    func validate() throws {
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
        _ = try APNsEnvironment(apnsEnv)
    }

    /// The configured provider and, for a hub, the registration mirror; nil when none is configured.
    func makeProvider() throws -> (provider: any PushProvider, mirror: (any RegistrationMirror)?)? {
        if let key = apnsKey, let keyID = apnsKeyId, let teamID = apnsTeamId, let topic = apnsTopic {
            let credentials = try APNsCredentials(p8: key, keyID: keyID, teamID: teamID)
            let client = try APNsClient(credentials: credentials, topic: topic, environment: try APNsEnvironment(apnsEnv), extraRoots: pushCa)
            return (APNsProvider(client: client), nil)
        }
        if let connection = anhConnectionString, let hub = anhHub {
            let client = try NotificationHubsClient(connection: try NotificationHubsConnection(connection), hub: hub, extraRoots: pushCa)
            return (NotificationHubsProvider(client: client), client)
        }
        return nil
    }
}
