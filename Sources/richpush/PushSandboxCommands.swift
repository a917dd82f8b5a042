import ArgumentParser
import CryptoExtras
import Foundation
import Hummingbird
import Logging
import PushDelivery
import PushSandboxes

/// `richpush fcm-sandbox`: a local FCM HTTP v1 and OAuth token endpoint (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push).
struct FCMSandboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fcm-sandbox",
        abstract: "A local stand-in for FCM HTTP v1 and Google's OAuth token endpoint.",
        discussion: """
            Checks what Google checks: the RS256 assertion of the JWT-bearer grant at /token (signature against \
            the service account's key, issuer, audience, scope, lifetime), and at /v1/projects/<id>/messages:send \
            the access token, the project, and the message (one token it issued, string data without reserved \
            keys, notification title/body/image, 4 KB). POST /register gives a new registration token, as the \
            Firebase SDK does for an app. Point serve at it with --fcm-endpoint http://127.0.0.1:<port> and a \
            service account whose token_uri is http://127.0.0.1:<port>/token.

            POST /devices/<token>/offline takes a device offline: messages to it are still accepted (200) and \
            held as FCM holds them (at most 100 without a collapse key, past which all are discarded; the latest \
            per collapse key, at most 4 keys; none past its android.ttl). POST /devices/<token>/online delivers \
            them and answers with what arrived; GET /devices/<token> tells what became of its messages and which \
            notifications it shows (one per android.notification.tag). --log writes accepted messages, not \
            delivered ones.
            """)

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on.") var port = 8093
    @Option(help: ArgumentHelp("The service account JSON serve uses (its project, e-mail and key).", valueName: "file"))
    var serviceAccount: String
    @Option(help: "Append each accepted message as a JSON line.") var log: String?
    @Option(help: "Access tokens' lifetime in seconds (Google: 3600).") var tokenLifetime: Int = 3600
    @OptionGroup var logOptions: LogOptions

    func validate() throws {
        try PathArgument.check(serviceAccount, "--service-account")
    }

    func run() async throws {
        let account = try FCMServiceAccount(file: serviceAccount)
        let sandbox = FCMSandbox(account: .init(projectID: account.projectID, clientEmail: account.clientEmail, publicKey: account.publicKey),
                                 tokenLifetime: TimeInterval(tokenLifetime), keepAccepted: 1000, logLine: try JSONLines.writer(log))
        sandbox.bound(origin: "http://\(host):\(port)")
        logOptions.bootstrap()
        let app = Application(router: sandbox.router(), configuration: .init(address: .hostname(host, port: port), serverName: "fcm-sandbox"),
                              logger: Logger(label: "fcm-sandbox"))
        try await app.runService()
    }
}

/// `richpush webpush-sandbox`: a local Web Push service (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push).
struct WebPushSandboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webpush-sandbox",
        abstract: "A local stand-in for a browser's Web Push service (RFC 8030).",
        discussion: """
            POST /subscribe with {"applicationServerKey": "<GET /api/webpush/key>"} makes a subscription as a \
            browser's pushManager.subscribe does; register it with RichPush as a "web" handle. Each message to \
            /push/<id> is checked as push services do (VAPID signature, key, audience, expiry and subject; TTL, \
            Urgency, aes128gcm, 4 KB) and decrypted with the subscription's private key; --log writes each as a \
            JSON line.
            """)

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on.") var port = 8094
    @Option(help: "Append each accepted message, decrypted, as a JSON line.") var log: String?
    @OptionGroup var logOptions: LogOptions

    func run() async throws {
        let sandbox = WebPushSandbox(keepAccepted: 1000, logLine: try JSONLines.writer(log))
        sandbox.bound(origin: "http://\(host):\(port)")
        logOptions.bootstrap()
        let app = Application(router: sandbox.router(), configuration: .init(address: .hostname(host, port: port), serverName: "webpush-sandbox"),
                              logger: Logger(label: "webpush-sandbox"))
        try await app.runService()
    }
}

/// Appends lines to a file (the sandboxes' logs of accepted messages).
enum JSONLines {
    /// A writer to `path`, made if missing; a file that cannot be written is a usage error (exit 2).
    static func writer(_ path: String?) throws -> (@Sendable (String) -> Void)? {
        guard let path else { return nil }
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        guard let handle = FileHandle(forWritingAtPath: path) else { throw ValidationError("--log \(path): cannot open it for writing") }
        let box = LockedHandle(handle)
        return { line in box.append(line + "\n") }
    }

    final class LockedHandle: @unchecked Sendable {
        private let handle: FileHandle
        private let lock = NSLock()
        init(_ handle: FileHandle) { self.handle = handle }
        func append(_ text: String) {
            lock.lock()
            defer { lock.unlock() }
            handle.seekToEndOfFile()
            handle.write(Data(text.utf8))
        }
    }
}
