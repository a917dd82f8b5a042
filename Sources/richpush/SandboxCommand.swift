import APNsSandbox
import ArgumentParser
import Foundation
import Hummingbird
import Logging

struct SandboxCommand: AsyncParsableCommand, LogsConfigWarnings {
    static let configuration = CommandConfiguration(
        commandName: "apns-sandbox",
        abstract: "A local stand-in for Apple's push service: APNs' HTTP/2 provider API over TLS.",
        discussion: """
            Checks what Apple checks (the ES256 provider token against --public-key, its age, kid and iss; \
            the device token, topic, push type and priority, payload size and JSON) and answers with Apple's \
            status codes and reasons. Without --tls-cert it makes a self-signed certificate for localhost and \
            127.0.0.1 and writes it to apns-sandbox-cert.pem: trust it with `serve --push-ca apns-sandbox-cert.pem`.

            Live Activities are served as Apple serves them: pushes of type liveactivity (topic \
            <bundle id>.push-type.liveactivity, aps.timestamp and aps.event start/update/end), channel \
            management (POST, GET and DELETE /1/apps/<bundle id>/channels, GET /1/apps/<bundle id>/all-channels, \
            which Apple serves on a host of its own) and broadcasts (POST /4/broadcasts/apps/<bundle id>), all on \
            this one listener with the same provider-token checks. The sandbox plays the iPhones behind the \
            tokens: what each phone did with every accepted live-activity push (a started activity and its update \
            token, an update shown, or a push dropped and why) is at GET /sandbox/phone, no token needed, and in \
            each log line's "phone" array.
            """)

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on.") var port = 2197
    @Option(help: "Team id the provider token must carry (iss).") var teamId: String
    @Option(help: "Key id the provider token must carry (kid).") var keyId: String
    @Option(help: "The provider key's public half, PEM (a .p8 private key is accepted too).") var publicKey: String
    @Option(help: "TLS certificate chain, PEM.") var tlsCert: String?
    @Option(help: "TLS private key, PEM.") var tlsKey: String?
    @Option(help: "Append each accepted push as a JSON line.") var log: String?
    @Option(help: "Make a device token fail: TOKEN=STATUS:REASON[:TIMES], e.g. <hex>=410:Unregistered.") var fail: [String] = []
    @Option(help: "A topic (bundle id) the key may push to; repeat for more. Without it any topic is accepted.") var topic: [String] = []
    @Option(help: "A device token's app: TOKEN=TOPIC; a push to it under another topic is 400 DeviceTokenNotForTopic. Repeatable.")
    var deviceTopic: [String] = []
    @Option(help: "Refuse a provider token renewed sooner than this after the last (Apple: 20m; 0 turns it off).", transform: Duration.parse)
    var tokenUpdateInterval: TimeInterval = 20 * 60
    @OptionGroup var logOptions: LogOptions
    @Option(help: "Answer each push after this long, e.g. 100ms (a slow network to Apple).", transform: Duration.parse)
    var delay: TimeInterval = 0

    func validate() throws {
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        try PathArgument.check(publicKey, "--public-key")
        if let tlsCert, let tlsKey { try TLSFiles.check(certificate: tlsCert, key: tlsKey) }
        for rule in deviceTopic where rule.split(separator: "=", maxSplits: 1).count != 2 {
            throw ValidationError("--device-topic '\(rule)' is not TOKEN=TOPIC")
        }
        for rule in fail where Self.parseFailure(rule) == nil {
            throw ValidationError("--fail '\(rule)' is not TOKEN=STATUS:REASON[:TIMES]")
        }
    }

    static func parseFailure(_ rule: String) -> (String, Int, String, Int)? {
        let sides = rule.split(separator: "=", maxSplits: 1)
        guard sides.count == 2 else { return nil }
        let parts = sides[1].split(separator: ":")
        guard parts.count >= 2, let status = Int(parts[0]) else { return nil }
        return (String(sides[0]), status, String(parts[1]), parts.count > 2 ? Int(parts[2]) ?? .max : .max)
    }

    func run() async throws {
        let pem = try String(contentsOfFile: publicKey, encoding: .utf8)
        var certificatePEM: String, keyPEM: String
        if let tlsCert, let tlsKey {
            certificatePEM = try String(contentsOfFile: tlsCert, encoding: .utf8)
            keyPEM = try String(contentsOfFile: tlsKey, encoding: .utf8)
        } else {
            (certificatePEM, keyPEM) = try APNsSandbox.selfSignedCertificate()
            try certificatePEM.write(toFile: "apns-sandbox-cert.pem", atomically: true, encoding: .utf8)
            Terminal.error("apns-sandbox: self-signed certificate written to apns-sandbox-cert.pem (serve --push-ca apns-sandbox-cert.pem)")
        }
        var configuration = try APNsSandbox.Configuration(teamID: teamId, keyID: keyId, publicKeyPEM: pem,
                                                          tlsCertificatePEM: certificatePEM, tlsKeyPEM: keyPEM)
        configuration.host = host
        configuration.port = port
        configuration.logPath = log
        configuration.topics = topic.isEmpty ? nil : Set(topic)
        for rule in deviceTopic {
            let parts = rule.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { throw ValidationError("--device-topic '\(rule)' is not TOKEN=TOPIC") }
            configuration.deviceTopics[parts[0].lowercased()] = parts[1]
        }
        configuration.minTokenUpdateInterval = tokenUpdateInterval
        configuration.responseDelay = .milliseconds(Int(delay * 1000))
        let sandbox = try APNsSandbox(configuration, keepAccepted: 1000)
        for rule in fail {
            if let (token, status, reason, times) = Self.parseFailure(rule) { sandbox.fail(token: token, status: status, reason: reason, times: times) }
        }
        logOptions.bootstrap()
        let logger = Logger(label: "apns-sandbox")
        if let warning = ConfigFile.unreadWarning { logger.warning("\(warning)") }
        try await sandbox.application(logger: logger).runService()
    }
}
