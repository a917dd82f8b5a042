import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import RichPushCore

#if canImport(Glibc)
import Glibc
#endif

/// Why every push of one platform of one app fails, whatever its device: a flag or a file of
/// this server is wrong (or its push service is not there), and only a person can mend it
/// (issue #49: no silent dead ends).
///
/// `classify` reads a provider's reason. Only what the server's own settings decide counts: a
/// device's answer (400 BadDeviceToken, DeviceTokenNotForTopic, FCM's SENDER_ID_MISMATCH) never
/// does, and Web Push never does at all, because each subscription names a host its user chose
/// (one user's endpoint with a bad certificate must not make the server unready).
public struct ProviderFailure: Sendable, Hashable, CustomStringConvertible {
    /// What kind of mistake it is.
    public enum Cause: String, Sendable, Hashable, CaseIterable {
        /// The push service's certificate does not verify (`--push-ca` missing).
        case untrustedCertificate = "tls"
        /// The service refused the credentials (a key id, team id, service account, hub key).
        case authentication = "auth"
        /// APNs refused the topic (`--apns-topic`).
        case topic
        /// Nothing listens at the push service's address.
        case unreachable
    }

    public let cause: Cause
    /// What is wrong, then (after ": ") what to do: what `deliveries` prints and the log says.
    public let sentence: String

    public init(cause: Cause, sentence: String) {
        self.cause = cause
        self.sentence = sentence
    }

    public var description: String { sentence }

    /// The failure a provider's `reason` for a push of `platform` (`apns`, `fcm`, `web`,
    /// `notificationhubs`) of `app` means, or nil when it is the push's or the device's own.
    public static func classify(platform: String, app: String, reason: String) -> ProviderFailure? {
        // Web Push endpoints are the users': their hosts' failures are theirs.
        guard platform != "web" else { return nil }
        let fixes = Fixes(platform: platform, app: app)
        if reason.hasPrefix(ConnectionWords.untrusted) {
            return ProviderFailure(cause: .untrustedCertificate, sentence: reason)
        }
        if reason.hasPrefix(ConnectionWords.refused) {
            let what = reason.components(separatedBy: ": ").first ?? reason
            return ProviderFailure(cause: .unreachable, sentence: "\(what): \(fixes.address)")
        }
        let (status, code) = Self.statusAndCode(reason)
        switch platform {
        case "apns":
            if reason.hasPrefix("cannot sign the provider token") {
                return ProviderFailure(cause: .authentication, sentence: "cannot sign the APNs provider token: \(fixes.apnsKey)")
            }
            guard let status else { return nil }
            switch (status, code) {
            case (403, "ExpiredProviderToken"):
                return nil // renewed by the client, and tried again
            case (403, _):
                return ProviderFailure(cause: .authentication, sentence: "APNs refused the provider token (\(status) \(code)): \(fixes.apnsKey)")
            case (400, "BadTopic"), (400, "TopicDisallowed"), (400, "MissingTopic"):
                return ProviderFailure(cause: .topic, sentence: "APNs refused the topic (\(status) \(code)): \(fixes.apnsTopic)")
            default:
                return nil
            }
        case "fcm":
            if reason.contains("refused the service account's assertion") {
                // `… assertion: 400 invalid_grant (…)`: the status and OAuth's code.
                let detail = reason.components(separatedBy: "assertion: ").dropFirst().first
                    .map { $0.split(separator: " ").prefix(2).joined(separator: " ") }
                    .map { ConnectionWords.clean(String($0.prefix(80))) }
                return ProviderFailure(cause: .authentication,
                                       sentence: "Google refused the FCM service account's assertion\(detail.map { " (\($0))" } ?? ""): \(fixes.fcmAccount)")
            }
            guard let status else { return nil }
            // SENDER_ID_MISMATCH is a 403 too, but about the device's token (another project's app).
            guard status == 401 || (status == 403 && code == "PERMISSION_DENIED") else { return nil }
            return ProviderFailure(cause: .authentication, sentence: "FCM refused the service account (\(status) \(code)): \(fixes.fcmAccount)")
        case "notificationhubs":
            guard status == 401 else { return nil }
            return ProviderFailure(cause: .authentication, sentence: "the hub refused the connection string's key (401): \(fixes.hubKey)")
        default:
            return nil
        }
    }

    /// `403 InvalidProviderToken` → (403, "InvalidProviderToken"); `401 UNAUTHENTICATED: …` → (401, "UNAUTHENTICATED").
    private static func statusAndCode(_ reason: String) -> (Int?, String) {
        let words = reason.split(separator: " ", maxSplits: 2)
        guard let first = words.first, first.count == 3, let status = Int(first) else { return (nil, "") }
        let code = words.count > 1 ? String(words[1].prefix { $0 != ":" }) : ""
        return (status, code)
    }

    /// The flags (app `default`) or `--apps` fields (any other app) a fix names.
    private struct Fixes {
        let platform: String
        let app: String

        private var isDefault: Bool { app == AppName.default }
        private func field(_ name: String) -> String { "\(name) of app \(app) in the --apps file" }

        var apnsKey: String {
            isDefault ? "check --apns-key-id and --apns-team-id, and that --apns-key is that key's .p8 file"
                : "check \(field("apns.keyId and apns.teamId")), and that apns.key is that key's .p8 file"
        }
        var apnsTopic: String {
            isDefault ? "check --apns-topic (the app's bundle id, of the key's team)"
                : "check \(field("apns.topic")) (the app's bundle id, of the key's team)"
        }
        var fcmAccount: String {
            isDefault ? "check --fcm-service-account (a current key of the app's Firebase project)"
                : "check \(field("fcm.serviceAccount")) (a current key of the app's Firebase project)"
        }
        var hubKey: String {
            isDefault ? "check --anh-connection-string (its SharedAccessKeyName and SharedAccessKey)"
                : "check \(field("hub.connectionString")) (its SharedAccessKeyName and SharedAccessKey)"
        }
        var address: String {
            switch platform {
            case "apns": isDefault ? "start the push service there, or correct --apns-env" : "start the push service there, or correct \(field("apns.env"))"
            case "fcm": isDefault ? "start the push service there, or correct --fcm-endpoint" : "start the push service there, or correct \(field("fcm.endpoint"))"
            default: "start the push service there, or correct its address"
            }
        }
    }
}

/// A failed connection to a push service in words a person can act on, never a library's
/// description (BoringSSL's, with the path of the file it was built from, or NIO's errno dump).
public enum ConnectionWords {
    /// How a reason about a certificate that does not verify starts.
    public static let untrusted = "the push service's certificate is not trusted"
    /// How a reason about a refused connection starts.
    public static let refused = "nothing listens at "

    /// `error`, met connecting to or talking with `endpoint` (`host:port`), in words.
    public static func describe(_ error: any Error, endpoint: String) -> String {
        if let error = error as? PushHTTPError { return error.reason }
        if let error = error as? PushError { return clean(error.message) }
        let text = String(describing: error)
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            return "\(untrusted) (\(endpoint)): pass its CA with --push-ca FILE (the sandbox prints it)"
        }
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname || extra == .serverHostnameImpossibleToMatch {
            return "the push service's certificate (\(endpoint)) is not for that name: use a name its certificate lists (the sandbox's lists localhost and 127.0.0.1)"
        }
        if isRefused(error) || text.contains("Connection refused") {
            return "\(refused)\(endpoint) (connection refused): start the push service there, or correct its address"
        }
        if let channel = error as? ChannelError, case .connectTimeout(let amount) = channel {
            return "\(endpoint) did not take the connection within \(seconds(amount)): is the address right, and reachable from here?"
        }
        if let client = error as? HTTPClientError {
            if client == .connectTimeout { return "\(endpoint) did not take the connection in time: is the address right, and reachable from here?" }
            if client == .readTimeout || client == .deadlineExceeded { return "\(endpoint) took the connection but did not answer in time" }
            if client == .remoteConnectionClosed { return "\(endpoint) closed the connection without answering" }
        }
        if let connection = error as? NIOConnectionError, connection.connectionErrors.isEmpty,
           connection.dnsAError != nil || connection.dnsAAAAError != nil {
            return "the name \(connection.host) does not resolve: correct the push service's address"
        }
        if let ssl = error as? NIOSSLError {
            switch ssl {
            case .handshakeFailed:
                let code = libraryCode(text)
                return "the TLS handshake with \(endpoint) failed\(code.map { " (\($0))" } ?? ""): is it an https push service?"
            case .uncleanShutdown:
                return "\(endpoint) closed the TLS connection abruptly: is it an https push service?"
            default:
                break
            }
        }
        if let io = error as? IOError {
            return "\(endpoint): \(String(cString: strerror(io.errnoCode)).lowercased())"
        }
        return "\(endpoint): \(clean(text))"
    }

    /// `host:port` of `url` (its scheme's port when it names none), or `url` as it is.
    static func authority(of url: String) -> String {
        guard let components = URLComponents(string: url), let host = components.host else { return url }
        return "\(host):\(components.port ?? (components.scheme == "http" ? 80 : 443))"
    }

    /// Whether the connection was refused (ECONNREFUSED, maybe inside NIO's connection attempts).
    private static func isRefused(_ error: any Error) -> Bool {
        if let io = error as? IOError { return io.errnoCode == ECONNREFUSED }
        if let connection = error as? NIOConnectionError {
            return !connection.connectionErrors.isEmpty && connection.connectionErrors.allSatisfy { isRefused($0.error) }
        }
        return false
    }

    private static func seconds(_ amount: TimeAmount) -> String {
        let value = Double(amount.nanoseconds) / 1e9
        return value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    /// BoringSSL's reason code in an error's description (`CERTIFICATE_VERIFY_FAILED`, `WRONG_VERSION_NUMBER`).
    private static func libraryCode(_ text: String) -> String? {
        guard let range = text.range(of: "OPENSSL_internal:") else { return nil }
        let code = text[range.upperBound...].prefix { $0.isUppercase || $0.isNumber || $0 == "_" }
        return code.isEmpty ? nil : String(code)
    }

    /// `text` without what only the library's authors could use: BoringSSL's error stack reduced
    /// to its reason code, ` at /path/file.cc:320`, `(errno: 111)` and any other absolute file
    /// path. URLs are kept (their paths follow a host), and so is markup (`</Error>`).
    public static func clean(_ text: String) -> String {
        guard text.contains("/") || text.contains("errno") || text.contains("error:") else { return text }
        var cleaned = text
        for (expression, template) in rules {
            cleaned = expression.stringByReplacingMatches(in: cleaned, options: [], range: NSRange(cleaned.startIndex..., in: cleaned),
                                                          withTemplate: template)
        }
        return cleaned.trimmingCharacters(in: .whitespaces)
    }

    /// The rewrites of `clean`, in order.
    private static let rules: [(NSRegularExpression, String)] = ([
        // error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED → CERTIFICATE_VERIFY_FAILED
        (#"error:[0-9A-Fa-f]+:[^:\]]*:[^:\]]*:([A-Z0-9_]+)"#, "$1"),
        // " at /work/main/.build/checkouts/…/handshake.cc:320"
        (#"\s+at\s+/[^\s\])]*"#, ""),
        // NIO's "(errno: 111)"
        (#"\s*\(errno: -?\d+\)"#, ""),
        // Any other absolute path (not a URL's, which follows its host).
        (#"(?<![\w:/.\-~<])/(?:[\w.\-+@~]+/)+[\w.\-+@~]*(?::\d+)?"#, "…"),
    ] as [(String, String)]).map { (try! NSRegularExpression(pattern: $0.0), $0.1) }
}
