import APNsSandbox
import CryptoExtras
import Foundation
import Hummingbird
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import PushDelivery
import RichPushCore

/// A local FCM HTTP v1 with its OAuth token endpoint, for development and tests: it checks what
/// Google checks.
///
/// `POST /token` takes a JWT-bearer grant and verifies the RS256 assertion against the service
/// account's public key: issuer, audience (this endpoint), the FCM scope, `iat` not in the future
/// and `exp` at most an hour after it and not past. `POST /v1/projects/<id>/messages:send` needs
/// one of its access tokens and the account's project, and a message with exactly one `token`
/// it issued, `data` of string values without reserved keys, and a `notification` whose `image`
/// is an https URL; it answers with Google's error model.
///
/// A message FCM accepted (`accepted`) is not yet one the device received (`delivered`). A
/// device is online unless taken offline (`setOffline`, `POST <prefix>/devices/{token}/offline`);
/// while it is, FCM answers 200 and holds its messages as Google documents: up to 100 without a
/// collapse key (past 100 every held message is discarded, `deleted`, and the app is told
/// through `onDeletedMessages`), the latest message of each collapse key, at most four keys ("no
/// determining factor" in which are kept: here the oldest key goes), and none past its
/// `android.ttl` (four weeks by default; `0s` is now or never). `setOnline` (`POST …/online`)
/// delivers what is held, oldest first. On the device, a notification replaces the shown one
/// with the same `android.notification.tag` (`shown(on:)`).
public final class FCMSandbox: PushStandIn {
    /// What the sandbox knows of the service account.
    public struct Account: Sendable {
        public var projectID: String
        public var clientEmail: String
        public var publicKey: _RSA.Signing.PublicKey
        public init(projectID: String, clientEmail: String, publicKey: _RSA.Signing.PublicKey) {
            self.projectID = projectID
            self.clientEmail = clientEmail
            self.publicKey = publicKey
        }
    }

    /// A message that passed every check.
    public struct AcceptedMessage: Sendable {
        public var token: String
        public var data: [String: String]
        public var notification: [String: String]?
        public var name: String
        /// `android.collapse_key`, when given: FCM holds one message per key for an offline device, at most four keys.
        public var collapseKey: String? = nil
        /// `apns.headers["apns-collapse-id"]`, when given (what FCM passes to Apple for iOS devices).
        public var apnsCollapseID: String? = nil
        /// `android.notification.tag`, when given: on the device, it replaces a shown notification with the same tag.
        public var tag: String? = nil
        /// The `android` block (AndroidConfig) as sent, checked: `priority`, `ttl`, `notification.channel_id`, …
        public var android: [String: any Sendable] = [:]
        /// `apns.headers` and `apns.payload.aps` as sent, checked as Apple would.
        public var apnsHeaders: [String: String] = [:]
        public var apnsAps: [String: any Sendable] = [:]
    }

    /// What became of the messages to one device (`GET <prefix>/devices/{token}`).
    public struct DeviceReport: Sendable, Equatable {
        /// False between `setOffline` and `setOnline`.
        public var online: Bool
        /// Messages FCM holds for it while it is offline.
        public var held: Int
        /// Messages it received.
        public var delivered: Int
        /// Held messages discarded because more than 100 without a collapse key were held (the
        /// app learns of it through `onDeletedMessages`).
        public var deleted: Int
        /// Held messages replaced by a later one with the same collapse key (as the key means).
        public var collapsed: Int
        /// Held messages dropped because a fifth collapse key came: pushes the device never gets.
        public var dropped: Int
        /// Messages whose `android.ttl` ended before the device came back.
        public var expired: Int
    }

    /// The most messages without a collapse key FCM holds for an offline device.
    public static let maxHeldMessages = 100
    /// The most collapse keys FCM holds a message of for an offline device.
    public static let maxCollapseKeys = 4
    /// A message's life without `android.ttl`: four weeks.
    public static let defaultTTL: TimeInterval = 2_419_200

    /// A message held for an offline device.
    private struct Held {
        var sequence: Int
        var expires: Date
        var message: AcceptedMessage
    }

    /// What FCM holds for an offline device.
    private struct Queue {
        /// Messages without a collapse key, oldest first.
        var plain: [Held] = []
        /// The latest message of each collapse key, oldest first.
        var collapsible: [Held] = []
        var count: Int { plain.count + collapsible.count }
    }

    private struct Tally {
        var delivered = 0
        var deleted = 0
        var collapsed = 0
        var dropped = 0
        var expired = 0
    }

    private struct State {
        var accessTokens: [String: Date] = [:]
        var devices: Set<String> = []
        var unregistered: Set<String> = []
        var failures: [String: [(status: Int, code: String, retryAfter: Int?)]] = [:]
        var exchanges = 0
        /// The devices offline, and what is held for each.
        var offline: [String: Queue] = [:]
        var tallies: [String: Tally] = [:]
        /// Orders held messages by their acceptance.
        var sequence = 0
    }

    public let account: Account
    private let state = NIOLockedValueBox(State())
    private let origin = NIOLockedValueBox("http://127.0.0.1")
    private let tokenLifetime: TimeInterval
    private let recorded: AcceptedMessages<AcceptedMessage>
    private let received: AcceptedMessages<AcceptedMessage>

    /// Access tokens live `tokenLifetime` seconds (Google's: 3,600).
    /// `keepAccepted` bounds the messages kept for `accepted` and for `delivered` (the counts keep going).
    public init(account: Account, tokenLifetime: TimeInterval = 3600, keepAccepted: Int = 100_000, logLine: (@Sendable (String) -> Void)? = nil) {
        self.account = account
        self.tokenLifetime = tokenLifetime
        recorded = AcceptedMessages(keep: keepAccepted, logLine: logLine)
        received = AcceptedMessages(keep: keepAccepted, logLine: nil)
    }

    /// Where this service is reached; the assertion's audience is `<origin>/token`.
    public func bound(origin: String) { self.origin.withLockedValue { $0 = origin } }
    public var tokenURI: String { "\(origin.withLockedValue { $0 })/token" }

    /// A registration token for a new app install, as the Firebase SDK gets one.
    public func register() -> String {
        let token = Base64URL.encode((0..<24).map { _ in UInt8.random(in: 0...255) }) + ":APA91b" + Base64URL.encode((0..<96).map { _ in UInt8.random(in: 0...255) })
        state.withLockedValue { _ = $0.devices.insert(token) }
        return token
    }

    /// The app was uninstalled: messages to `token` get 404 UNREGISTERED.
    public func unregister(_ token: String) { state.withLockedValue { _ = $0.unregistered.insert(token) } }

    /// The next `times` messages to `token` get `status` with FCM error `code`.
    public func fail(_ token: String, status: Int, code: String, retryAfter: Int? = nil, times: Int = 1) {
        state.withLockedValue { $0.failures[token, default: []] += Array(repeating: (status, code, retryAfter), count: times) }
    }

    /// Makes every access token issued so far invalid (FCM then answers 401).
    public func revokeAccessTokens() { state.withLockedValue { $0.accessTokens.removeAll() } }

    /// The messages FCM accepted (answered 200), oldest first: not all of them reach the device.
    public var accepted: [AcceptedMessage] { recorded.all }
    public var acceptedCount: Int { recorded.count }
    public var exchanges: Int { state.withLockedValue { $0.exchanges } }

    /// The messages devices received, in the order they arrived: at once for a device online,
    /// when it comes back for one offline, never for one FCM discarded.
    public var delivered: [AcceptedMessage] { received.all }
    /// How many messages devices received (the count goes on past `keepAccepted`).
    public var deliveredCount: Int { received.count }

    /// The messages `token`'s device received, in the order they arrived.
    public func delivered(to token: String) -> [AcceptedMessage] {
        received.all.filter { $0.token == token }
    }

    /// The notifications `token`'s device shows, oldest first: each received message with a
    /// notification, a later one replacing the one with its `android.notification.tag` (without
    /// a tag, each is shown on its own; a data message shows nothing).
    public func shown(on token: String) -> [AcceptedMessage] {
        var tray: [AcceptedMessage] = []
        for message in delivered(to: token) where message.notification != nil {
            if let tag = message.tag { tray.removeAll { $0.tag == tag } }
            tray.append(message)
        }
        return tray
    }

    /// Takes `token`'s device offline: FCM holds its messages from now on. False for a token the sandbox did not issue.
    @discardableResult
    public func setOffline(_ token: String) -> Bool {
        state.withLockedValue { (state: inout State) -> Bool in
            guard state.devices.contains(token) else { return false }
            if state.offline[token] == nil { state.offline[token] = Queue() }
            return true
        }
    }

    /// Brings `token`'s device back: it receives what FCM held for it (and still lives at `now`),
    /// oldest first, returned. Nothing for a device that was online.
    @discardableResult
    public func setOnline(_ token: String, now: Date = Date()) -> [AcceptedMessage] {
        state.withLockedValue { (state: inout State) -> [AcceptedMessage] in
            guard let queue = state.offline.removeValue(forKey: token) else { return [] }
            let live = (queue.plain + queue.collapsible).filter { $0.expires > now }.sorted { $0.sequence < $1.sequence }
            state.tallies[token, default: Tally()].expired += queue.count - live.count
            let messages = live.map(\.message)
            deliver(messages, in: &state)
            return messages
        }
    }

    /// What became of the messages to `token`'s device; nil for a token the sandbox did not issue.
    public func device(_ token: String) -> DeviceReport? {
        state.withLockedValue { (state: inout State) -> DeviceReport? in
            guard state.devices.contains(token) else { return nil }
            let tally = state.tallies[token] ?? Tally()
            return DeviceReport(online: state.offline[token] == nil, held: state.offline[token]?.count ?? 0, delivered: tally.delivered,
                                deleted: tally.deleted, collapsed: tally.collapsed, dropped: tally.dropped, expired: tally.expired)
        }
    }

    /// Hands an accepted message to its device, or holds it while the device is offline.
    private func arrive(_ message: AcceptedMessage, now: Date) {
        let ttl = (message.android["ttl"] as? String).flatMap { Double($0.dropLast()) } ?? Self.defaultTTL
        state.withLockedValue { state in
            state.sequence += 1
            guard var queue = state.offline[message.token] else {
                deliver([message], in: &state)
                return
            }
            let held = Held(sequence: state.sequence, expires: now.addingTimeInterval(ttl), message: message)
            Self.hold(held, in: &queue, tally: &state.tallies[message.token, default: Tally()], now: now)
            state.offline[message.token] = queue
        }
    }

    /// FCM's rules for an offline device's messages (its "Lifetime of a message" and
    /// "Non-collapsible and collapsible messages").
    private static func hold(_ held: Held, in queue: inout Queue, tally: inout Tally, now: Date) {
        // Expired messages are gone, and take no room.
        let before = queue.count
        queue.plain.removeAll { $0.expires <= now }
        queue.collapsible.removeAll { $0.expires <= now }
        tally.expired += before - queue.count
        guard held.expires > now else {
            // A `ttl` of 0: delivered now or never.
            tally.expired += 1
            return
        }
        if let key = held.message.collapseKey {
            if let index = queue.collapsible.firstIndex(where: { $0.message.collapseKey == key }) {
                queue.collapsible.remove(at: index)
                tally.collapsed += 1
            } else if queue.collapsible.count == maxCollapseKeys {
                queue.collapsible.removeFirst()
                tally.dropped += 1
            }
            queue.collapsible.append(held)
        } else if queue.plain.count == maxHeldMessages {
            // Past the limit, every held message goes, this one too.
            tally.deleted += queue.count + 1
            queue = Queue()
        } else {
            queue.plain.append(held)
        }
    }

    /// Records `messages` as received by their devices (under the state's lock, so that arrivals keep their order).
    private func deliver(_ messages: [AcceptedMessage], in state: inout State) {
        for message in messages {
            state.tallies[message.token, default: Tally()].delivered += 1
            received.record(message) { [:] }
        }
    }

    /// Adds `POST /register`, `POST /token` and `POST /v1/projects/{id}/messages:send` under
    /// `prefix` (bind the origin with the prefix too), and for development the device's side:
    /// `POST /devices/{token}/offline` and `/online` (which answers with the messages that
    /// arrived), and `GET /devices/{token}` (what became of its messages and what it shows).
    public func addRoutes(to router: Router<BasicRequestContext>, at prefix: String = "") {
        let router = router.group(RouterPath(prefix))
        // What the Firebase SDK does on an app's first start, for development: a new registration token.
        router.post("register") { [self] _, _ -> Response in
            Self.json(201, ["token": register()])
        }
        router.post("devices/:token/offline") { [self] _, context -> Response in
            let token = try Self.deviceToken(context)
            setOffline(token)
            return deviceAnswer(token)
        }
        router.post("devices/:token/online") { [self] _, context -> Response in
            let token = try Self.deviceToken(context)
            return deviceAnswer(token, arrived: setOnline(token))
        }
        router.get("devices/:token") { [self] _, context -> Response in
            try deviceAnswer(Self.deviceToken(context))
        }
        router.post("token") { [self] request, _ -> Response in
            let body = try await request.body.collect(upTo: 64 * 1024)
            return tokenVerdict(form: String(buffer: body))
        }
        router.post("v1/projects/:project/messages:send") { [self] request, context -> Response in
            let project = try context.parameters.require("project")
            let body = try await request.body.collect(upTo: 64 * 1024)
            return sendVerdict(project: project, authorization: request.headers[.authorization], body: Data(body.readableBytesView))
        }
    }

    /// The `{token}` of a device route (a registration token holds `:`, which a client may escape).
    static func deviceToken(_ context: BasicRequestContext) throws -> String {
        let raw = try context.parameters.require("token")
        return raw.removingPercentEncoding ?? raw
    }

    /// `{"token","online","held","delivered","deleted","collapsed","dropped","expired","shown":[…]}`,
    /// with `"arrived":[…]` when the device just came back; 404 for a token the sandbox did not issue.
    private func deviceAnswer(_ token: String, arrived: [AcceptedMessage]? = nil) -> Response {
        guard let report = device(token) else { return Self.error(404, "NOT_FOUND", nil, "the sandbox issued no registration token \(token)") }
        var object: [String: Any] = ["token": token, "online": report.online, "held": report.held, "delivered": report.delivered,
                                     "deleted": report.deleted, "collapsed": report.collapsed, "dropped": report.dropped,
                                     "expired": report.expired, "shown": shown(on: token).map(Self.summary)]
        if let arrived { object["arrived"] = arrived.map(Self.summary) }
        return Self.json(200, object)
    }

    /// A message as the device routes show it.
    static func summary(_ message: AcceptedMessage) -> [String: Any] {
        var object: [String: Any] = ["token": message.token, "name": message.name, "data": message.data]
        if let notification = message.notification { object["notification"] = notification }
        if let collapseKey = message.collapseKey { object["collapse_key"] = collapseKey }
        if let tag = message.tag { object["tag"] = tag }
        return object
    }

    func tokenVerdict(form: String, now: Date = Date()) -> Response {
        let fields = Dictionary(form.split(separator: "&").map { pair -> (String, String) in
            let kv = pair.split(separator: "=", maxSplits: 1)
            return (String(kv[0]), kv.count > 1 ? (String(kv[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : "")
        }, uniquingKeysWith: { a, _ in a })
        func refuse(_ description: String) -> Response {
            Self.json(400, ["error": "invalid_grant", "error_description": description])
        }
        guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return Self.json(400, ["error": "unsupported_grant_type", "error_description": "grant_type must be the JWT bearer grant"])
        }
        guard let jwt = fields["assertion"] else { return refuse("no assertion") }
        guard let parts = CompactJWT.parse(jwt), parts.algorithm == "RS256",
              account.publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: parts.signature), for: parts.signingInput,
                                                 padding: .insecurePKCS1v1_5) else {
            return refuse("Invalid JWT Signature.")
        }
        let claims = parts.claims
        guard claims["iss"] as? String == account.clientEmail else { return refuse("Invalid issuer") }
        guard claims["aud"] as? String == tokenURI else { return refuse("Invalid JWT audience: must be \(tokenURI)") }
        guard let scope = claims["scope"] as? String, scope.split(separator: " ").contains(Substring(FCMServiceAccount.scope)) else {
            return refuse("the scope does not include firebase.messaging")
        }
        let seconds = now.timeIntervalSince1970
        guard let iat = claims["iat"] as? Double, let exp = claims["exp"] as? Double, iat <= seconds + 60, exp > seconds, exp - iat <= 3600 else {
            return refuse("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe")
        }
        let token = "ya29.sandbox-" + Base64URL.encode((0..<24).map { _ in UInt8.random(in: 0...255) })
        state.withLockedValue { state in
            state.exchanges += 1
            state.accessTokens = state.accessTokens.filter { $0.value > now }
            state.accessTokens[token] = now.addingTimeInterval(tokenLifetime)
        }
        return Self.json(200, ["access_token": token, "expires_in": Int(tokenLifetime), "token_type": "Bearer"])
    }

    func sendVerdict(project: String, authorization: String?, body: Data, now: Date = Date()) -> Response {
        guard let authorization, authorization.hasPrefix("Bearer "),
              state.withLockedValue({ $0.accessTokens[String(authorization.dropFirst(7))] }).map({ $0 > now }) == true else {
            return Self.error(401, "UNAUTHENTICATED", nil, "Request had invalid authentication credentials.")
        }
        guard project == account.projectID else { return Self.error(403, "PERMISSION_DENIED", nil, "Permission denied on project \(project)") }
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any], let message = object["message"] as? [String: Any],
              Set(object.keys).isSubset(of: ["message", "validate_only"]) else {
            return Self.invalid("the body must be {\"message\": {...}}")
        }
        let known: Set<String> = ["token", "topic", "condition", "data", "notification", "android", "webpush", "apns", "fcm_options", "name"]
        if let unknown = Set(message.keys).subtracting(known).first { return Self.invalid("Invalid JSON payload received. Unknown name \"\(unknown)\" at 'message'") }
        guard let token = message["token"] as? String, message["topic"] == nil, message["condition"] == nil else {
            return Self.invalid("exactly one of token, topic or condition is needed; RichPush sends token")
        }
        var data: [String: String] = [:]
        if let raw = message["data"] {
            guard let map = raw as? [String: Any] else { return Self.invalid("data must be a map") }
            for (key, value) in map {
                guard let text = value as? String else { return Self.invalid("Invalid value at 'message.data[\(key)]' (TYPE_STRING)") }
                if ["from", "notification", "message_type"].contains(key) || key.hasPrefix("google.") || key.hasPrefix("gcm.") {
                    return Self.invalid("data key '\(key)' is reserved")
                }
                data[key] = text
            }
        }
        var notification: [String: String]?
        if let raw = message["notification"] {
            guard let map = raw as? [String: Any], Set(map.keys).isSubset(of: ["title", "body", "image"]) else {
                return Self.invalid("notification takes title, body and image")
            }
            var shown: [String: String] = [:]
            for (key, value) in map {
                guard let text = value as? String else { return Self.invalid("notification.\(key) must be a string") }
                shown[key] = text
            }
            if let image = shown["image"], !Loopback.isSecureOrLoopback(image) {
                return Self.invalid("notification.image must be an https URL")
            }
            notification = shown
        }
        var collapseKey: String?
        var tag: String?
        var androidBlock: [String: any Sendable] = [:]
        if let raw = message["android"] {
            guard let android = raw as? [String: Any] else { return Self.invalid("android must be an AndroidConfig object") }
            if let refusal = Self.androidRefusal(android) { return Self.invalid(refusal) }
            if let key = android["collapse_key"] {
                guard let text = key as? String else { return Self.invalid("Invalid value at 'message.android.collapse_key' (TYPE_STRING)") }
                collapseKey = text
            }
            tag = (android["notification"] as? [String: Any])?["tag"] as? String
            androidBlock = Self.sendable(android)
        }
        var apnsCollapseID: String?
        var apnsHeaders: [String: String] = [:]
        var apnsAps: [String: any Sendable] = [:]
        if let raw = message["apns"] {
            guard let apns = raw as? [String: Any], let headers = (apns["headers"] ?? [String: Any]()) as? [String: Any],
                  Set(apns.keys).isSubset(of: ["headers", "payload", "fcm_options", "live_activity_token"]) else {
                return Self.invalid("apns must be an ApnsConfig object with a headers map")
            }
            for (key, value) in headers {
                guard let text = value as? String else { return Self.invalid("Invalid value at 'message.apns.headers[\(key)]' (TYPE_STRING)") }
                if key == "apns-collapse-id" {
                    guard text.utf8.count <= 64 else { return Self.invalid("apns-collapse-id is longer than 64 bytes") }
                    apnsCollapseID = text
                }
                apnsHeaders[key] = text
            }
            if let priority = apnsHeaders["apns-priority"], !["5", "10", "1"].contains(priority) {
                return Self.invalid("apns-priority must be 10, 5 or 1 (got \(priority))")
            }
            if let expiration = apnsHeaders["apns-expiration"] {
                guard let stamp = Int(expiration), stamp >= 0 else { return Self.invalid("apns-expiration must be a UNIX time in seconds") }
                if stamp != 0 && Double(stamp) < now.timeIntervalSince1970 - 1 { return Self.invalid("apns-expiration \(stamp) is in the past") }
            }
            if let payload = apns["payload"] {
                guard let payload = payload as? [String: Any], let aps = (payload["aps"] ?? [String: Any]()) as? [String: Any] else {
                    return Self.invalid("apns.payload must be an object with an aps dictionary")
                }
                if let refusal = APSRules.refusal(aps) { return Self.invalid("apns.payload.aps: \(refusal)") }
                // Apple's rule for background pushes, which FCM passes on: content-available alone, at priority 5.
                if apnsHeaders["apns-push-type"] == "background" && ((aps["content-available"] as? Int) != 1 || apnsHeaders["apns-priority"] == "10") {
                    return Self.invalid("apns-push-type background needs aps.content-available 1 and apns-priority 5")
                }
                apnsAps = Self.sendable(aps)
            }
        }
        let size = data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count } + (notification?.values.reduce(0) { $0 + $1.utf8.count } ?? 0)
        guard size <= 4096 else { return Self.invalid("Android message is too big: \(size) bytes, at most 4096") }
        let verdict: (failure: (status: Int, code: String, retryAfter: Int?)?, known: Bool, gone: Bool) = state.withLockedValue { state in
            var failure: (status: Int, code: String, retryAfter: Int?)?
            if var queue = state.failures[token], !queue.isEmpty {
                failure = queue.removeFirst()
                state.failures[token] = queue
            }
            return (failure, state.devices.contains(token), state.unregistered.contains(token))
        }
        if let failure = verdict.failure {
            var response = Self.error(failure.status, Self.googleStatus(failure.status), failure.code, "scripted failure")
            if let retryAfter = failure.retryAfter { response.headers[.retryAfter] = String(retryAfter) }
            return response
        }
        guard verdict.known else { return Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token") }
        if verdict.gone { return Self.error(404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found.") }
        let name = "projects/\(project)/messages/0:\(UInt64.random(in: 1...UInt64.max))"
        let accepted = AcceptedMessage(token: token, data: data, notification: notification, name: name,
                                       collapseKey: collapseKey, apnsCollapseID: apnsCollapseID, tag: tag, android: androidBlock,
                                       apnsHeaders: apnsHeaders, apnsAps: apnsAps)
        // FCM answers 200 whether the device is online or not. (Handed over before it is counted
        // as accepted: a message seen in `accepted` has arrived or is held.)
        arrive(accepted, now: now)
        recorded.record(accepted) {
            ["token": token, "data": data, "notification": notification ?? [:], "name": name]
        }
        return Self.json(200, ["name": name])
    }

    /// What FCM refuses in an AndroidConfig (its v1 reference): unknown fields, a priority
    /// other than NORMAL or HIGH, a `ttl` that is not a duration of up to 28 days (`"3600s"`),
    /// a notification block with unknown fields, a field of the wrong type (the localization
    /// keys strings, their arguments lists of strings) or a negative `notification_count`.
    static func androidRefusal(_ android: [String: Any]) -> String? {
        let known: Set<String> = ["collapse_key", "priority", "ttl", "restricted_package_name", "data", "notification", "fcm_options", "direct_boot_ok"]
        if let unknown = Set(android.keys).subtracting(known).sorted().first { return "Unknown name \"\(unknown)\" at 'message.android'" }
        if let priority = android["priority"] {
            guard let text = priority as? String, ["NORMAL", "HIGH"].contains(text) else {
                return "Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), \"\(priority)\""
            }
        }
        if let ttl = android["ttl"] {
            guard let text = ttl as? String, text.hasSuffix("s"), let seconds = Double(text.dropLast()), seconds >= 0,
                  text.dropLast().allSatisfy({ $0.isNumber || $0 == "." }) else {
                return "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), \"\(ttl)\""
            }
            if seconds > 2_419_200 { return "message.android.ttl \(text) is more than 4 weeks" }
        }
        if let raw = android["notification"] {
            guard let notification = raw as? [String: Any] else { return "android.notification must be an AndroidNotification object" }
            let fields: Set<String> = ["title", "body", "icon", "color", "sound", "tag", "click_action", "body_loc_key", "body_loc_args", "title_loc_key",
                                       "title_loc_args", "channel_id", "ticker", "sticky", "event_time", "local_only", "notification_priority",
                                       "default_sound", "default_vibrate_timings", "default_light_settings", "vibrate_timings", "visibility",
                                       "notification_count", "light_settings", "image", "bypass_proxy_notification", "proxy"]
            if let unknown = Set(notification.keys).subtracting(fields).sorted().first {
                return "Unknown name \"\(unknown)\" at 'message.android.notification'"
            }
            for key in ["title", "body", "channel_id", "sound", "tag", "title_loc_key", "body_loc_key"]
            where notification[key] != nil && !(notification[key] is String) {
                return "Invalid value at 'message.android.notification.\(key)' (TYPE_STRING)"
            }
            // Localization arguments are repeated strings.
            for key in ["title_loc_args", "body_loc_args"] where notification[key] != nil && !(notification[key] is [String]) {
                return "Invalid value at 'message.android.notification.\(key)' (TYPE_STRING)"
            }
            if let count = notification["notification_count"] {
                guard let number = count as? Int, number >= 0 else { return "Invalid value at 'message.android.notification.notification_count' (TYPE_INT32)" }
            }
        }
        return nil
    }

    /// A JSON object's values as sendable ones (JSONSerialization's are).
    static func sendable(_ object: [String: Any]) -> [String: any Sendable] {
        object.mapValues { value -> any Sendable in
            if let nested = value as? [String: Any] { return sendable(nested) }
            if let text = value as? String { return text }
            if let texts = value as? [String] { return texts }
            if let number = value as? NSNumber { return number.doubleValue }
            return String(describing: value)
        }
    }

    static func googleStatus(_ status: Int) -> String {
        switch status {
        case 400: "INVALID_ARGUMENT"
        case 401: "UNAUTHENTICATED"
        case 403: "PERMISSION_DENIED"
        case 404: "NOT_FOUND"
        case 429: "RESOURCE_EXHAUSTED"
        case 503: "UNAVAILABLE"
        default: "INTERNAL"
        }
    }

    static func invalid(_ message: String) -> Response { error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message) }

    static func error(_ status: Int, _ googleStatus: String, _ fcmCode: String?, _ message: String) -> Response {
        var error: [String: Any] = ["code": status, "message": message, "status": googleStatus]
        if let fcmCode { error["details"] = [["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": fcmCode]] }
        return json(status, ["error": error])
    }

    static func json(_ status: Int, _ object: [String: Any]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return Response(status: .init(code: status), headers: [.contentType: "application/json; charset=UTF-8"],
                        body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
