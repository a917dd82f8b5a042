import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import RichPushCore

/// Sends through FCM HTTP v1 (`POST /v1/projects/<project>/messages:send`) with an OAuth 2 access
/// token from the service account, and reads Google's error model: `UNREGISTERED` prunes the
/// registration, `INVALID_ARGUMENT` and other refusals fail it, `QUOTA_EXCEEDED`, `UNAVAILABLE`,
/// `INTERNAL` and other 429s and 5xx are retried after `Retry-After`, and a 401 renews the token.
public final class FCMClient: Sendable {
    public let account: FCMServiceAccount
    /// `--fcm-endpoint`: `https://fcm.googleapis.com`, or a stand-in.
    public let endpoint: String
    private let http: HTTPClient
    private let tokens: FCMTokenManager

    /// `extraRoots` (PEM files, `--push-ca`) are trusted beside the system's, for FCM and the token endpoint.
    public init(account: FCMServiceAccount, endpoint: String = "https://fcm.googleapis.com", extraRoots: [String] = [],
                connectTimeout: TimeAmount = .seconds(10), readTimeout: TimeAmount = .seconds(30)) throws {
        self.account = account
        self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        http = try PushTLS.httpClient(extraRoots: extraRoots, connectTimeout: connectTimeout, readTimeout: readTimeout)
        tokens = FCMTokenManager(account: account, http: http)
    }

    /// Closes the connections.
    public func shutdown() async throws {
        try await http.shutdown()
    }

    /// The message FCM takes (`{"message":{...}}`): `data` always (string values, the app reads
    /// them in the background), and a `notification` with the image in alert mode.
    ///
    /// A `collapseID` (`rp-<notification id>`) is what a resend replaces instead of adding a
    /// second alert: on Android the shown notification's `android.notification.tag` (a data
    /// message shows nothing, so has no tag), and `apns-collapse-id` for FCM's iOS devices (APNs
    /// keeps one notification per app for an offline device anyway). It is not Android's
    /// `collapse_key`: FCM keeps at most four collapse keys for an offline device and drops the
    /// rest, so a key per notification loses pushes (docs/delivery.md). `collapseKey`, set only where
    /// collapsing is meant (a newer message makes the older one worthless, as a live activity's
    /// state does), goes in `android.collapse_key`.
    ///
    /// Given the push's `mode`, its options go in each platform's form (docs/api.md#options-badges-and-paced-sends):
    /// `android.priority` (`HIGH` for an alert unless `normal`), `android.ttl` (`ttl` seconds),
    /// `android.notification.channel_id`, `notification_count`, `sound` and the localization keys
    /// (`title_loc_key`, `body_loc_key`, `body_loc_args`); for iOS devices `apns-priority`,
    /// `apns-expiration` and the `aps` of `APS.alertPush` (`thread-id`, `category`, `badge`,
    /// `sound`, `interruption-level`, `relevance-score`, and the alert's `subtitle` and
    /// localization keys); for browsers, `TTL` and `Urgency`.
    public static func message(token: String, data: [String: String], notification: (title: String?, body: String, image: String?)?,
                               collapseID: String? = nil, collapseKey: String? = nil, mode: PushMode? = nil, options: PushOptions = PushOptions(), badge: Int? = nil,
                               ttl: Int? = nil, now: Date = Date()) -> Data {
        var message: [String: Any] = ["token": token, "data": data]
        var android: [String: Any] = [:]
        // AndroidNotification: only for a message that shows one.
        var androidNotification: [String: Any] = [:]
        var apnsHeaders: [String: String] = [:]
        if let collapseKey { android["collapse_key"] = collapseKey }
        if let collapseID {
            apnsHeaders["apns-collapse-id"] = collapseID
            if notification != nil { androidNotification["tag"] = collapseID }
        }
        if let mode {
            let high = mode == .alert && options.priority != .normal
            android["priority"] = high ? "HIGH" : "NORMAL"
            apnsHeaders["apns-priority"] = options.apnsPriority(mode)
            var webHeaders = ["Urgency": high ? "high" : "normal"]
            if let ttl {
                android["ttl"] = "\(ttl)s"
                apnsHeaders["apns-expiration"] = ttl == 0 ? "0" : String(Int(now.timeIntervalSince1970) + ttl)
                webHeaders["TTL"] = String(ttl)
            }
            message["webpush"] = ["headers": webHeaders]
            if let notification {
                if let channel = options.androidChannelId { androidNotification["channel_id"] = channel }
                if let badge { androidNotification["notification_count"] = badge }
                if let sound = options.sound, !sound.isEmpty { androidNotification["sound"] = sound }
                // Device-side localization keys (docs/api.md#templates-and-localization-keys): Android's names here, Apple's in `aps`.
                if let key = options.titleLocKey { androidNotification["title_loc_key"] = key }
                if let key = options.locKey { androidNotification["body_loc_key"] = key }
                if let arguments = options.locArgs { androidNotification["body_loc_args"] = arguments }
                // The alert push's own `aps` (APNs gets the same from `AlertPush`), less the alert
                // when it adds nothing to `notification`: FCM makes the APNs alert from
                // `notification`, and `aps.alert` is there only for what FCM has no field for
                // (the subtitle, and the localization keys of an iOS device).
                var aps = APS.alertPush(title: notification.title, body: notification.body, options: options, badge: badge)
                if options.subtitle == nil && options.titleLocKey == nil && options.locKey == nil { aps.alert = nil }
                message["apns"] = ["headers": apnsHeaders, "payload": ["aps": aps.dictionary]]
            } else {
                // A data message reaches an iOS app only as a background push: its push type and
                // content-available, at priority 5 (set above), as Apple requires.
                apnsHeaders["apns-push-type"] = "background"
                apnsHeaders["apns-priority"] = "5" // a high-priority data message (a Live Activity's start) is still background to iOS
                message["apns"] = ["headers": apnsHeaders, "payload": ["aps": APS.background.dictionary]]
            }
        }
        if !androidNotification.isEmpty { android["notification"] = androidNotification }
        if !android.isEmpty { message["android"] = android }
        if message["apns"] == nil && !apnsHeaders.isEmpty { message["apns"] = ["headers": apnsHeaders] }
        if let notification {
            var shown: [String: Any] = ["body": notification.body]
            if let title = notification.title { shown["title"] = title }
            if let image = notification.image { shown["image"] = image }
            message["notification"] = shown
        }
        return try! JSONSerialization.data(withJSONObject: ["message": message], options: [.sortedKeys, .withoutEscapingSlashes])
    }

    /// Sends one message body made by `message(…)`.
    public func send(_ body: Data) async -> DeliveryOutcome {
        await send(body, renewed: false)
    }

    private func send(_ body: Data, renewed: Bool) async -> DeliveryOutcome {
        let token: String
        do {
            token = try await tokens.token()
        } catch let error as PushError {
            return .retry(reason: "no FCM access token: \(error.message)", after: nil)
        } catch {
            // The token endpoint could not be reached: in words (a refused certificate names --push-ca).
            return .retry(reason: ConnectionWords.describe(error, endpoint: ConnectionWords.authority(of: account.tokenURI)), after: nil)
        }
        var request = HTTPClientRequest(url: "\(endpoint)/v1/projects/\(account.projectID)/messages:send")
        request.method = .POST
        request.headers.add(name: "authorization", value: "Bearer \(token)")
        request.headers.add(name: "content-type", value: "application/json; charset=utf-8")
        request.body = .bytes(ByteBuffer(data: body))
        do {
            let response = try await http.execute(request, timeout: .seconds(30))
            let answer = try await response.body.collect(upTo: 64 * 1024)
            let status = Int(response.status.code)
            if status == 200 {
                let name = (try? JSONSerialization.jsonObject(with: Data(buffer: answer)) as? [String: Any])?["name"] as? String
                return .sent(id: name)
            }
            let error = FCMError(status: status, body: Data(buffer: answer))
            let retryAfter = response.headers.first(name: "retry-after").flatMap(Double.init)
            if status == 401 && !renewed && error.code == "UNAUTHENTICATED" {
                // The access token was revoked or expired early: one more try with a new one.
                await tokens.invalidate(token)
                return await send(body, renewed: true)
            }
            switch error.code {
            case "UNREGISTERED":
                return .failed(reason: error.description, prune: true)
            case "QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL":
                return .retry(reason: error.description, after: retryAfter)
            default:
                if status == 429 || status >= 500 { return .retry(reason: error.description, after: retryAfter) }
                return .failed(reason: error.description, prune: false)
            }
        } catch {
            return .retry(reason: ConnectionWords.describe(error, endpoint: ConnectionWords.authority(of: endpoint)), after: nil)
        }
    }
}

/// Google's error body: `{"error":{"code","message","status","details":[{"errorCode":…}]}}`.
struct FCMError: CustomStringConvertible {
    let status: Int
    /// FCM's `errorCode` (`UNREGISTERED`, `QUOTA_EXCEEDED`, …), else Google's `status` (`INVALID_ARGUMENT`, …).
    let code: String
    let message: String

    init(status: Int, body: Data) {
        self.status = status
        let error = (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["error"] as? [String: Any]
        let details = error?["details"] as? [[String: Any]] ?? []
        let fcmCode = details.lazy.compactMap { $0["errorCode"] as? String }.first
        code = fcmCode ?? (error?["status"] as? String) ?? "HTTP_\(status)"
        message = (error?["message"] as? String) ?? String(decoding: body.prefix(200), as: UTF8.self)
    }

    var description: String { "\(status) \(code): \(message.prefix(300))" }
}
