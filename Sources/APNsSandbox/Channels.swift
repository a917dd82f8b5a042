import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// Broadcast channels and broadcast pushes, as Apple's "Sending channel management requests to
/// APNs" and "Sending broadcast push notification requests to APNs" describe them. Apple serves
/// channel management on a host of its own (api-manage-broadcast(.sandbox).push.apple.com, ports
/// 2196 and 2195); the sandbox serves it on its one listener, with the same provider-token checks
/// as pushes. Its answers carry `apns-request-id` (echoed, or a new UUID) instead of `apns-id`.
extension APNsSandbox {
    /// An answer of channel management: status, Apple's reason when refused, headers, body.
    struct Answer: Equatable {
        var status: Int
        var reason: String?
        var headers: [String: String] = [:]
        var body: Data?
    }

    /// The most channels an app may keep in one environment (Apple: 10,000).
    static let maxChannels = 10_000
    /// A broadcast's payload may be this big (Apple: 5 KB; a push to a device token, 4 KB).
    static let maxBroadcastPayload = 5120
    /// The status of a read or delete of a channel APNs does not know.
    static let unknownChannelStatus = 404

    // MARK: routes

    /// A channel management request: provider token, the app, then `operation`.
    func manage(_ request: Request, context: SandboxRequestContext,
                _ operation: (_ bundleID: String, _ headers: [String: String], _ body: Data) -> Answer) async throws -> Response {
        let bundleID = try context.parameters.require("bundle")
        let body = try await request.body.collect(upTo: 64 * 1024)
        trackConnection(context)
        let headers = Self.fields(request.headers)
        let answer: Answer
        if let refusal = authorizationRefusal(headers, connection: context.connection.map(ObjectIdentifier.init), now: Date()) {
            answer = Answer(status: refusal.status, reason: refusal.reason)
        } else if let refusal = bundleRefusal(bundleID) {
            answer = refusal
        } else {
            answer = operation(bundleID, headers, Data(body.readableBytesView))
        }
        return Self.response(answer, requestID: headers["apns-request-id"])
    }

    /// `POST /4/broadcasts/apps/{bundleId}`: a broadcast push on a channel, checked as channel
    /// management requests are first (provider token, the app).
    func handleBroadcast(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        if configuration.responseDelay > .zero { try await Task.sleep(for: configuration.responseDelay) }
        return try await manage(request, context: context) { bundleID, headers, body in
            switch broadcastVerdict(bundleID: bundleID, headers: headers, body: body) {
            case .reject(let status, let reason, let timestamp):
                var answer = Answer(status: status, reason: reason)
                if let timestamp { answer.body = Self.reasonBody(reason, timestamp: timestamp) }
                return answer
            case .accept(let push):
                noteProviderToken(headers)
                record(push)
                return Answer(status: 200, headers: ["apns-request-id": push.apnsID])
            }
        }
    }

    /// nil when the key may serve `bundleID`, else Apple's refusal (400 TopicDisallowed, as for pushes).
    func bundleRefusal(_ bundleID: String) -> Answer? {
        if let topics = configuration.topics, !topics.contains(bundleID) { return Answer(status: 400, reason: "TopicDisallowed") }
        return nil
    }

    // MARK: channel management

    /// `POST /1/apps/{bundleId}/channels` with `{"message-storage-policy": 0|1, "push-type": "LiveActivity"}`:
    /// 201 with the new channel's id (base64) in `apns-channel-id`.
    func createChannel(bundleID: String, headers: [String: String], body: Data) -> Answer {
        guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else {
            return Answer(status: 400, reason: "BadRequestPayload")
        }
        guard let pushType = object["push-type"] else { return Answer(status: 400, reason: "MissingPushType") }
        guard pushType as? String == "LiveActivity" else { return Answer(status: 400, reason: "InvalidPushType") }
        guard let policy = object["message-storage-policy"] as? NSNumber, !APSRules.isBool(policy),
              policy.doubleValue == 0 || policy.doubleValue == 1
        else { return Answer(status: 400, reason: "BadRequestPayload") }
        let id: String? = state.withLockedValue { state in
            // Apple's limit per app; and, since any bundle id may make them when no topics are set, ten apps' worth in all.
            guard state.channels.count < 10 * Self.maxChannels, state.channels.values.filter({ $0.bundleID == bundleID }).count < Self.maxChannels
            else { return nil }
            var candidate = Self.newChannelID()
            while state.channels[candidate] != nil { candidate = Self.newChannelID() }
            state.channelsMade += 1
            state.channels[candidate] = BroadcastChannel(bundleID: bundleID, messageStoragePolicy: policy.intValue, sequence: state.channelsMade)
            return candidate
        }
        guard let id else { return Answer(status: 400, reason: "CannotCreateChannelConfig") }
        return Answer(status: 201, headers: ["apns-channel-id": id])
    }

    /// `GET /1/apps/{bundleId}/channels` with `apns-channel-id`: 200 with the channel's configuration.
    func readChannel(bundleID: String, headers: [String: String]) -> Answer {
        switch channel(bundleID: bundleID, headers: headers) {
        case .refused(let refusal):
            return refusal
        case .found(_, let channel):
            let object: [String: Any] = ["message-storage-policy": channel.messageStoragePolicy, "push-type": "LiveActivity"]
            return Answer(status: 200, body: Self.json(object))
        }
    }

    /// `DELETE /1/apps/{bundleId}/channels` with `apns-channel-id`: 204. Its subscribers hear nothing more.
    func deleteChannel(bundleID: String, headers: [String: String]) -> Answer {
        switch channel(bundleID: bundleID, headers: headers) {
        case .refused(let refusal):
            return refusal
        case .found(let id, _):
            state.withLockedValue {
                $0.channels.removeValue(forKey: id)
                $0.phones.forget(channel: id)
            }
            return Answer(status: 204)
        }
    }

    /// `GET /1/apps/{bundleId}/all-channels`: 200 with `{"channels": [ids]}`, oldest first.
    func allChannels(bundleID: String) -> Answer {
        let ids = state.withLockedValue { state in
            state.channels.filter { $0.value.bundleID == bundleID }.sorted { $0.value.sequence < $1.value.sequence }.map { $0.key }
        }
        return Answer(status: 200, body: Self.json(["channels": ids]))
    }

    /// The channel `apns-channel-id` names, or the refusal: 400 MissingChannelId without one,
    /// 400 BadChannelId when it is not base64, `unknownChannelStatus` ChannelNotRegistered when
    /// the app has no such channel.
    private func channel(bundleID: String, headers: [String: String]) -> ChannelLookup {
        guard let id = headers["apns-channel-id"], !id.isEmpty else { return .refused(Answer(status: 400, reason: "MissingChannelId")) }
        guard Data(base64Encoded: id) != nil else { return .refused(Answer(status: 400, reason: "BadChannelId")) }
        guard let channel = state.withLockedValue({ $0.channels[id] }), channel.bundleID == bundleID else {
            return .refused(Answer(status: Self.unknownChannelStatus, reason: "ChannelNotRegistered"))
        }
        return .found(id, channel)
    }

    /// A channel named by a request, or why not.
    private enum ChannelLookup {
        case found(String, BroadcastChannel)
        case refused(Answer)
    }

    // MARK: broadcast

    /// Apple's checks of a broadcast push once its provider token and app passed: `apns-channel-id`
    /// (400 MissingChannelId, BadChannelId, ChannelNotRegistered for an unknown or deleted
    /// channel), `apns-push-type: liveactivity` (400 MissingPushType, InvalidPushType),
    /// `apns-expiration` (400 BadExpirationDate when missing, malformed, past, or not 0 on a
    /// channel that stores no message), `apns-priority` (1, 5 or 10; 10 when absent), the payload
    /// (400 PayloadEmpty, 413 PayloadTooLarge past 5 KB, 400 BadPayload for a payload that is not a
    /// Live Activity's), and failures asked for (`fail(token:)` with the channel id).
    func broadcastVerdict(bundleID: String, headers: [String: String], body: Data, now: Date = Date()) -> Verdict {
        guard let channelID = headers["apns-channel-id"], !channelID.isEmpty else { return .reject(400, "MissingChannelId", timestamp: nil) }
        guard let pushType = headers["apns-push-type"] else { return .reject(400, "MissingPushType", timestamp: nil) }
        guard pushType == "liveactivity" else { return .reject(400, "InvalidPushType", timestamp: nil) }
        // 0 is "deliver once, store nothing"; any other moment must be ahead.
        guard let expiration = headers["apns-expiration"].flatMap({ Int($0) }), expiration >= 0,
              expiration == 0 || Double(expiration) >= now.timeIntervalSince1970 - 1
        else { return .reject(400, "BadExpirationDate", timestamp: nil) }
        guard ["1", "5", "10"].contains(headers["apns-priority"] ?? "10") else { return .reject(400, "BadPriority", timestamp: nil) }
        guard Data(base64Encoded: channelID) != nil else { return .reject(400, "BadChannelId", timestamp: nil) }
        guard let channel = state.withLockedValue({ $0.channels[channelID] }), channel.bundleID == bundleID else {
            return .reject(400, "ChannelNotRegistered", timestamp: nil)
        }
        // "Providing a nonzero expiration for a channel created with the No Message Stored storage
        // policy results in message rejection."
        if channel.messageStoragePolicy == 0 && expiration != 0 { return .reject(400, "BadExpirationDate", timestamp: nil) }
        if body.isEmpty { return .reject(400, "PayloadEmpty", timestamp: nil) }
        if body.count > Self.maxBroadcastPayload { return .reject(413, "PayloadTooLarge", timestamp: nil) }
        guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any],
              let aps = object["aps"] as? [String: Any],
              APSRules.refusal(aps, liveActivity: true) == nil, APSRules.liveActivityRefusal(aps) == nil
        else { return .reject(400, "BadPayload", timestamp: nil) }
        if let injected = injectedFailure(channelID.lowercased(), now: now) { return injected }
        let requestID = headers["apns-request-id"] ?? UUID().uuidString.lowercased()
        return .accept(AcceptedPush(token: channelID, headers: Self.recordedHeaders(headers), payload: body, apnsID: requestID, isBroadcast: true))
    }

    // MARK: answers

    /// `answer` as a response: `apns-request-id` as answered, else echoed, else new; a refusal's
    /// reason as Apple's JSON.
    static func response(_ answer: Answer, requestID: String?) -> Response {
        var headers = HTTPFields()
        for (name, value) in answer.headers {
            if let field = HTTPField.Name(name) { headers[field] = value }
        }
        if let field = HTTPField.Name("apns-request-id"), headers[field] == nil {
            headers[field] = requestID ?? UUID().uuidString.lowercased()
        }
        let body = answer.body ?? answer.reason.map { reasonBody($0, timestamp: nil) }
        guard let body else { return Response(status: .init(code: answer.status), headers: headers) }
        headers[.contentType] = "application/json"
        return Response(status: .init(code: answer.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// Apple's error JSON: `{"reason"}`, and `timestamp` (milliseconds) when there is one.
    static func reasonBody(_ reason: String, timestamp: Date?) -> Data {
        var object: [String: Any] = ["reason": reason]
        if let timestamp { object["timestamp"] = Int64(timestamp.timeIntervalSince1970 * 1000) }
        return json(object)
    }

    /// JSON of `object`, keys sorted.
    static func json(_ object: Any) -> Data {
        (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
    }

    /// A new channel id: 16 random bytes in base64, as Apple's are base64.
    static func newChannelID() -> String {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }).base64EncodedString()
    }
}
