import APNsSandbox
import Foundation
import HTTPTypes
import PushDelivery
import PushTestSupport
import RichPushClient
import RichPushTestSupport
import Testing

/// `RichPushClient`'s Live Activity calls (SPEC §25) against a live server that sends to the APNs
/// sandbox: the tokens the library reports are the ones the server's pushes go to, lowercase, and
/// its refusals come back as `RichPushClientError` with the server's status.
@Suite("The device library's Live Activity calls against a live server (SPEC §25)")
struct ClientLiveActivityTests {
    static let type = "DeliveryAttributes"

    /// The `aps` of a push the sandbox accepted.
    static func aps(_ push: APNsSandbox.AcceptedPush) -> [String: Any] {
        ((try? JSONSerialization.jsonObject(with: push.payload)) as? [String: Any])?["aps"] as? [String: Any] ?? [:]
    }

    /// The `aps.event`s of the live-activity pushes the sandbox accepted for `token`, in order.
    static func events(_ apns: RunningSandbox, to token: String) -> [String] {
        apns.sandbox.accepted.filter { $0.token == token && $0.headers["apns-push-type"] == "liveactivity" }
            .map { aps($0)["event"] as? String ?? "?" }
    }

    static func hex(_ bytes: Data) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// Starts an activity of `type` for alice as root; its id.
    static func start(_ s: TestServer, stage: String) async throws -> String {
        let (started, body) = try await s.json(.post, "/api/live-activities", as: "root", body: """
            {"type":"\(type)","audience":{"users":["alice"]},"attributes":{"order":"A-1"},\
            "contentState":{"eta":10,"stage":"\(stage)"},"alert":{"title":"Your order","body":"On its way"}}
            """)
        #expect(started.status == .accepted, "\(String(describing: body))")
        let answer = try #require(body as? [String: Any], "\(started.status)")
        #expect(answer["devices"] as? Int == 1, "\(answer)")
        return try #require(answer["id"] as? String)
    }

    /// The status of an `.http` refusal, else nil.
    static func status(_ error: RichPushClientError?) -> Int? {
        guard case .http(let status)? = error?.kind else { return nil }
        return status
    }

    @Test("registerPushToStartToken's Data goes as lowercase hex and the phone the APNs sandbox plays starts the activity; reportActivityToken's rotated token, given as hex text in capitals, replaces the one before and the phone shows the update; another user's registration and an unknown activity are refused with the server's status")
    func tokens() async throws {
        try await RunningSandbox.with { apns in
            try await TestServer.run(provider: APNsProvider(client: try apns.client())) { s in
                let registration = try await s.registerDevice(tokenA, as: "alice")
                let alice = RichPushClient(baseURL: try ClientLibraryTests.baseURL(s), credentials: ClientLibraryTests.alice)

                // Bytes whose hex has the digits a-f, as ActivityKit's pushToStartTokenUpdates gives them.
                let pushToStart = Data((0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 171) })
                try await alice.registerPushToStartToken(type: Self.type, token: pushToStart, registration: registration)
                let activity = try await Self.start(s, stage: "packed")
                #expect(activity.hasPrefix("la_"))
                #expect(try await eventually { apns.sandbox.phoneActivities(pushToStartToken: Self.hex(pushToStart)).count == 1 },
                        "\(apns.sandbox.accepted.map { ($0.token, $0.headers["apns-push-type"] ?? "") })")
                let shown = try #require(apns.sandbox.phoneActivities(pushToStartToken: Self.hex(pushToStart)).first)
                #expect(shown.richpushActivity == activity)

                // The app reports the activity's update token as pushTokenUpdates gives it; iOS rotates it, and the
                // app reports the new one (here the phone's, as hex text in capitals with white space around).
                let first = Data((0..<32).map { UInt8(truncatingIfNeeded: 255 - $0) })
                try await alice.reportActivityToken(activity: activity, token: first, registration: registration)
                try await alice.reportActivityToken(activity: activity, token: " \(shown.updateToken.uppercased())\n", registration: registration)
                let (read, detail) = try await s.json(.get, "/api/live-activities/\(activity)", as: "root")
                #expect(read.status == .ok)
                let devices = (detail as? [String: Any])?["perDevice"] as? [[String: Any]] ?? []
                #expect(devices.count == 1 && devices.first?["registration"] as? String == registration, "\(devices)")
                #expect(devices.first?["hasUpdateToken"] as? Bool == true, "\(devices)")

                let (updated, _) = try await s.json(.patch, "/api/live-activities/\(activity)", as: "root", body: #"{"contentState":{"eta":5,"stage":"out for delivery"}}"#)
                #expect(updated.status == .accepted)
                let updateToken = shown.updateToken
                #expect(try await eventually { apns.sandbox.phoneEvents.contains { $0.token == updateToken && $0.event == "update" && $0.shown } },
                        "\(apns.sandbox.phoneEvents)")
                #expect(!Self.events(apns, to: Self.hex(first)).contains("update"), "the replaced token got the update")

                // Bob may not report for alice's registration, nor register a token for it; nobody reports for an activity that does not exist.
                let bob = alice.with(credentials: .basic(user: "bob", password: "builder"))
                let notHis = await #expect(throws: RichPushClientError.self) {
                    try await bob.reportActivityToken(activity: activity, token: first, registration: registration)
                }
                #expect(Self.status(notHis) == 404, "\(String(describing: notHis))")
                let notHers = await #expect(throws: RichPushClientError.self) {
                    try await bob.registerPushToStartToken(type: Self.type, token: pushToStart, registration: registration)
                }
                #expect(Self.status(notHers) == 404, "\(String(describing: notHers))")
                let unknown = await #expect(throws: RichPushClientError.self) {
                    try await alice.reportActivityToken(activity: "la_00000000000000000000", token: first, registration: registration)
                }
                #expect(Self.status(unknown) == 404, "\(String(describing: unknown))")
                // A token that is not hex: the server's 400, with its words.
                let notHex = await #expect(throws: RichPushClientError.self) {
                    try await alice.reportActivityToken(activity: activity, token: "not a token", registration: registration)
                }
                #expect(Self.status(notHex) == 400, "\(String(describing: notHex))")
                #expect(notHex?.message.contains("400") == true)
            }
        }
    }

    @Test("a push-to-start token given as hex text (capitals, white space around) replaces the one before: the next start goes to it; removePushToStartToken is accepted")
    func pushToStartText() async throws {
        try await RunningSandbox.with { apns in
            try await TestServer.run(provider: APNsProvider(client: try apns.client())) { s in
                let registration = try await s.registerDevice(tokenA, as: "alice")
                let alice = RichPushClient(baseURL: try ClientLibraryTests.baseURL(s), credentials: ClientLibraryTests.alice)
                let old = Data(repeating: 0xEE, count: 32)
                let new = Data((0..<32).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ 200) })
                try await alice.registerPushToStartToken(type: Self.type, token: old, registration: registration)
                try await alice.registerPushToStartToken(type: Self.type, token: "  \(Self.hex(new).uppercased()) ", registration: registration)
                _ = try await Self.start(s, stage: "packed")
                #expect(try await eventually { Self.events(apns, to: Self.hex(new)) == ["start"] },
                        "\(apns.sandbox.accepted.map { ($0.token, $0.headers["apns-push-type"] ?? "") })")
                #expect(Self.events(apns, to: Self.hex(old)).isEmpty, "the replaced push-to-start token got a start")

                try await alice.removePushToStartToken(type: Self.type, registration: registration)
            }
        }
    }
}
