@testable import APNsSandbox
import Crypto
import Foundation
import SQLEngine
import HTTPTypes
import HummingbirdCore
import HummingbirdTesting
import MediaStore
import PushDelivery
@testable import RichPushCore
@testable import RichPushAPI
import RichPushServer
import PushTestSupport
import RichPushTestSupport
import Testing

@Suite("Delivery through the APNs sandbox (TLS, HTTP/2)")
struct DeliveryTests {
    let logo = try! Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))

    func deliveries(_ s: TestServer, _ id: Int) async throws -> [Delivery] {
        try await DeliveryStore(database: s.database).list(notification: Int64(id))
    }

    @Test("the tutorial end to end: register, POST, the silent push arrives with Apple's headers, the device fetches the image", arguments: StoreEngine.all)
    func tutorial(engine: StoreEngine) async throws {
        try await RunningSandbox.with { apns in
            try await TestServer.run(engine: engine, provider: APNsProvider(client: try apns.client())) { s in
                _ = try await s.registerDevice(tokenA)
                let (created, object) = try await s.json(.post, "/api/notifications")
                #expect(created.status == .created)
                let id = try #require((object as? [String: Any])?["id"] as? Int)
                #expect(try await eventually { apns.sandbox.acceptedCount == 1 })
                let push = try #require(apns.sandbox.accepted.first)
                #expect(push.token == tokenA)
                #expect(String(decoding: push.payload, as: UTF8.self)
                    == #"{"aps":{"content-available":1,"sound":""},"richId":"\#(id)","richMessage":"Check this image out!","richType":"img"}"#)
                #expect(push.headers["apns-push-type"] == "background")
                #expect(push.headers["apns-priority"] == "5")
                #expect(push.headers["apns-topic"] == RunningSandbox.topic)
                #expect(push.headers["apns-expiration"].flatMap(Int.init) != nil)
                // The device app: read richId, fetch with Basic auth.
                let payload = try JSONSerialization.jsonObject(with: push.payload) as! [String: Any]
                let richId = Int(payload["richId"] as! String)!
                let image = try await s.request(.get, "/api/notifications/\(richId)")
                #expect(image.status == .ok)
                #expect(image.headers[.contentType] == "image/png")
                #expect(image.bytes == logo)
                let (_, list) = try await s.json(.get, "/api/notifications")
                #expect((list as? [[String: Any]])?.first?["read"] as? Bool == true)
                #expect(try await eventually { try await deliveries(s, id).first?.state == .sent })
                let delivery = try #require(try await deliveries(s, id).first)
                #expect(delivery.pushId.uppercased() == push.headers["apns-id"])
                // The collapse id is the notification's: a resend of it folds into the shown alert.
                #expect(push.headers["apns-collapse-id"] == "rp-\(richId)")
            }
        }
    }

    @Test("410 Unregistered prunes the registration; the device is not tried again", arguments: StoreEngine.all)
    func unregistered(engine: StoreEngine) async throws {
        try await RunningSandbox.with { apns in
            try await TestServer.run(engine: engine, provider: APNsProvider(client: try apns.client())) { s in
                _ = try await s.registerDevice(tokenA)
                _ = try await s.registerDevice(tokenB)
                apns.sandbox.fail(token: tokenA, status: 410, reason: "Unregistered")
                let (_, object) = try await s.json(.post, "/api/notifications")
                let id = try #require((object as? [String: Any])?["id"] as? Int)
                #expect(try await eventually { try await deliveries(s, id).allSatisfy { $0.state != .pending } })
                let byTarget = Dictionary(uniqueKeysWithValues: try await deliveries(s, id).map { ($0.target, $0) })
                #expect(byTarget[tokenA]?.state == .failed)
                #expect(byTarget[tokenA]?.reason == "410 Unregistered")
                #expect(byTarget[tokenB]?.state == .sent)
                #expect(try await RegistrationStore(database: s.database).list(for: "alice").compactMap(\.handle) == [tokenB])
                let (_, second) = try await s.json(.post, "/api/notifications")
                let next = try #require((second as? [String: Any])?["id"] as? Int)
                #expect(try await deliveries(s, next).map(\.target) == [tokenB])
                #expect(try await eventually { apns.sandbox.acceptedCount == 2 })
                #expect(apns.sandbox.accepted.allSatisfy { $0.token == tokenB })
            }
        }
    }

    @Test("400 BadDeviceToken and DeviceTokenNotForTopic fail the push but keep the registration (a wrong --apns-env or topic must not wipe devices)", arguments: StoreEngine.all)
    func badTokenKeepsRegistration(engine: StoreEngine) async throws {
        try await RunningSandbox.with { apns in
            try await TestServer.run(engine: engine, provider: APNsProvider(client: try apns.client())) { s in
                _ = try await s.registerDevice(tokenA)
                _ = try await s.registerDevice(tokenB)
                apns.sandbox.fail(token: tokenA, status: 400, reason: "BadDeviceToken")
                apns.sandbox.fail(token: tokenB, status: 400, reason: "DeviceTokenNotForTopic")
                let (_, object) = try await s.json(.post, "/api/notifications")
                let id = try #require((object as? [String: Any])?["id"] as? Int)
                #expect(try await eventually { try await deliveries(s, id).allSatisfy { $0.state == .failed } })
                #expect(Set(try await deliveries(s, id).compactMap(\.reason)) == ["400 BadDeviceToken", "400 DeviceTokenNotForTopic"])
                #expect(try await RegistrationStore(database: s.database).list(for: "alice").compactMap(\.handle).sorted() == [tokenA, tokenB].sorted())
            }
        }
    }

    @Test("429 and 503 are retried until Apple accepts, keeping the apns-id", arguments: StoreEngine.all)
    func retries(engine: StoreEngine) async throws {
        try await RunningSandbox.with { apns in
            try await TestServer.run(engine: engine, provider: APNsProvider(client: try apns.client())) { s in
                _ = try await s.registerDevice(tokenA)
                apns.sandbox.fail(token: tokenA, status: 429, reason: "TooManyRequests", times: 1)
                let (_, object) = try await s.json(.post, "/api/notifications")
                let id = try #require((object as? [String: Any])?["id"] as? Int)
                #expect(try await eventually { try await deliveries(s, id).first?.attempts ?? 0 >= 1 })
                apns.sandbox.fail(token: tokenA, status: 503, reason: "ServiceUnavailable", times: 1)
                #expect(try await eventually { try await deliveries(s, id).first?.state == .sent })
                let delivery = try #require(try await deliveries(s, id).first)
                #expect(delivery.attempts >= 2)
                #expect(apns.sandbox.acceptedCount == 1)
                #expect(apns.sandbox.accepted.first?.headers["apns-id"] == delivery.pushId.uppercased())
            }
        }
    }

    @Test("403 ExpiredProviderToken renews the JWT once and the push goes through", arguments: StoreEngine.all)
    func expiredProviderToken(engine: StoreEngine) async throws {
        try await RunningSandbox.with { apns in
            let tokens = APNsTokenManager(credentials: apns.credentials)
            try await TestServer.run(engine: engine, provider: APNsProvider(client: try apns.client(tokens: tokens))) { s in
                _ = try await s.registerDevice(tokenA)
                _ = try await s.json(.post, "/api/notifications")
                #expect(try await eventually { apns.sandbox.acceptedCount == 1 })
                #expect(tokens.issued == 1)
                try await Task.sleep(for: .milliseconds(1100))
                apns.sandbox.expireProviderTokens(issuedBefore: Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)))
                let (_, object) = try await s.json(.post, "/api/notifications")
                let id = try #require((object as? [String: Any])?["id"] as? Int)
                #expect(try await eventually { try await deliveries(s, id).first?.state == .sent })
                #expect(try await deliveries(s, id).first?.attempts == 2)
                #expect(tokens.issued == 2)
            }
        }
    }

    @Test("one provider token is reused across many pushes, many in flight on the HTTP/2 connection", arguments: StoreEngine.all)
    func tokenReuse(engine: StoreEngine) async throws {
        try await RunningSandbox.with { apns in
            let tokens = APNsTokenManager(credentials: apns.credentials)
            try await TestServer.run(engine: engine, provider: APNsProvider(client: try apns.client(tokens: tokens))) { s in
                for i in 0..<40 { _ = try await s.registerDevice(String(format: "%064x", i + 1)) }
                _ = try await s.json(.post, "/api/notifications")
                #expect(try await eventually { apns.sandbox.acceptedCount == 40 })
                #expect(apns.sandbox.providerTokensSeen == 1)
                #expect(tokens.issued == 1)
            }
        }
    }

    @Test("the sandbox speaks HTTP/2 to a client that offers no ALPN (prior knowledge, as aioapns connects), through hyper-h2, and answers as Apple: the apns-id as sent, a 200 on its HEADERS frame alone")
    func priorKnowledge() async throws {
        try await RunningSandbox.with { apns in
            let jwt = try APNsTokenManager(credentials: apns.credentials).token()
            let script = Fixtures.packageRoot.appendingPathComponent("scripts/h2-push.py").path
            let payload = #"{"aps":{"alert":{"body":"hi"},"mutable-content":1},"richId":"1"}"#
            let output = try await onOwnThread { () throws -> String in
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                process.arguments = ["python3", script, String(apns.port), apns.certificatePath, jwt, RunningSandbox.topic, tokenA, payload]
                let out = Pipe()
                process.standardOutput = out
                try process.run()
                let data = out.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                return String(decoding: data, as: UTF8.self)
            }
            let result = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")
            #expect(result["status"] as? String == "200")
            #expect(result["alpn"] is NSNull) // no protocol was negotiated: HTTP/2 by prior knowledge
            // As Apple answers: the apns-id echoed exactly as sent, and a 200 that ends on its HEADERS frame, no DATA.
            #expect(result["echoedId"] as? String == result["sentId"] as? String)
            #expect(result["dataFrames"] as? Int == 0 && result["endedOnHeaders"] as? Bool == true, "\(result)")
            #expect(apns.sandbox.acceptedCount == 1)
            #expect(apns.sandbox.accepted.first?.token == tokenA)
        }
    }

    @Test("the sandbox echoes apns-id exactly as sent (clients match answers by it), and names a push without one in lowercase")
    func apnsIDEcho() async throws {
        try await RunningSandbox.with { apns in
            let client = try apns.client()
            let silent = Data(#"{"aps":{"content-available":1}}"#.utf8)
            let token = String(repeating: "ef", count: 32)
            for id in [UUID().uuidString.lowercased(), UUID().uuidString] {
                let (outcome, _) = await client.send(token: token, payload: silent, pushID: id, expiration: Date().addingTimeInterval(60))
                #expect(outcome == .sent(id: id), "\(id): \(outcome)")
            }
            let answer = APNsSandbox.answer(400, "BadDeviceToken")
            let generated = try #require(answer.headers[HTTPField.Name("apns-id")!])
            #expect(generated == generated.lowercased() && UUID(uuidString: generated) != nil)
            try await client.shutdown()
        }
    }

    @Test("aioapns, a client nobody here wrote, sends through the sandbox: its answers match its ids, a 200 parses, a refusal reads; a second client with a token of its own is served beside it")
    func aioapnsPeer() async throws {
        guard (try? await python("import aioapns"))?.status == 0 else {
            #expect(ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] != "1", "the aioapns test needs PyPI's aioapns; .ci/run installs it")
            return
        }
        try await RunningSandbox.with { apns in
            let dir = try Fixtures.tempDirectory()
            defer { try? FileManager.default.removeItem(at: dir) }
            let keyPath = dir.appendingPathComponent("AuthKey.p8").path
            try apns.key.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
            let script = Fixtures.packageRoot.appendingPathComponent("scripts/aioapns-push.py").path
            let good = [String(repeating: "ab", count: 32), String(repeating: "cd", count: 32)]
            @Sendable func run(_ tokens: [String]) async throws -> [[String: Any]] {
                let output = try await onOwnThread { () throws -> String in
                    try runCapturing("/usr/bin/env", ["python3", script, String(apns.port), apns.certificatePath, keyPath,
                                                      RunningSandbox.keyID, RunningSandbox.teamID, RunningSandbox.topic] + tokens).output
                }
                // stdout and stderr come together: the results are the last line that is a JSON list.
                let line = output.split(separator: "\n").last { $0.hasPrefix("[") }.map(String.init) ?? output
                return try #require((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [[String: Any]], "\(output)")
            }
            // Two aioapns processes at once, each signing its own provider token (as two nodes).
            async let first = run(good + ["abc"])
            async let second = run([String(repeating: "ef", count: 32)])
            let (results, others) = try await (first, second)
            for result in results + others {
                #expect(result["id"] as? String == result["sentId"] as? String)
            }
            #expect(results.filter { $0["successful"] as? Bool == true }.count == 2, "\(results)")
            let refused = results.first { $0["token"] as? String == "abc" }
            #expect(refused?["status"] as? String == "400" && refused?["description"] as? String == "BadDeviceToken", "\(String(describing: refused))")
            #expect(others.first?["successful"] as? Bool == true, "\(others)")
            #expect(apns.sandbox.acceptedCount == 3)
            #expect(apns.sandbox.providerTokensSeen == 2)
        }
    }

    @Test("the sandbox refuses what Apple refuses")
    func sandboxChecks() async throws {
        try await RunningSandbox.with { apns in
            let other = RunningSandbox(sandbox: apns.sandbox, port: apns.port, key: P256.Signing.PrivateKey(), certificatePath: apns.certificatePath)
            let forged = APNsProvider(client: try other.client())
            let (outcome, _) = await forged.deliver(DeliveryJob(id: 1, notificationId: 1, target: tokenA, payload: Data(#"{"aps":{"content-available":1}}"#.utf8),
                                                                pushId: UUID().uuidString, attempts: 0))
            #expect(outcome == .failed(reason: "403 InvalidProviderToken", prune: false))
            let tokens = APNsTokenManager(credentials: apns.credentials)
            let good = APNsProvider(client: try apns.client(tokens: tokens))
            let big = Data(("{\"aps\":{\"content-available\":1},\"x\":\"" + String(repeating: "x", count: 4100) + "\"}").utf8)
            let (tooLarge, _) = await good.deliver(DeliveryJob(id: 2, notificationId: 1, target: tokenA, payload: big, pushId: UUID().uuidString, attempts: 0))
            #expect(tooLarge == .failed(reason: "413 PayloadTooLarge", prune: false))
            let (badToken, _) = await good.deliver(DeliveryJob(id: 3, notificationId: 1, target: "abc", payload: Data(#"{"aps":{"content-available":1}}"#.utf8),
                                                               pushId: UUID().uuidString, attempts: 0))
            #expect(badToken == .failed(reason: "400 BadDeviceToken", prune: false))
            // Another app's topic, with this team's key: refused as Apple does.
            let otherApp = APNsProvider(client: try APNsClient(credentials: apns.credentials, topic: "com.example.other",
                                                                environment: .custom("https://127.0.0.1:\(apns.port)"), extraRoots: [apns.certificatePath],
                                                                tokens: tokens))
            let (wrongTopic, _) = await otherApp.deliver(DeliveryJob(id: 4, notificationId: 1, target: tokenA, payload: Data(#"{"aps":{"content-available":1}}"#.utf8),
                                                                     pushId: UUID().uuidString, attempts: 0))
            #expect(wrongTopic == .failed(reason: "400 TopicDisallowed", prune: false))
            // A second provider token on the same connection minutes after the first: 429
            // TooManyProviderTokenUpdates. Apple scopes the rule to a connection: another client,
            // on its own connection with a token of its own, is served.
            let renewing = APNsTokenManager(credentials: apns.credentials)
            let sameConnection = APNsProvider(client: try apns.client(tokens: renewing))
            let silent = Data(#"{"aps":{"content-available":1}}"#.utf8)
            let (first, _) = await sameConnection.deliver(DeliveryJob(id: 5, notificationId: 1, target: "abc", payload: silent, pushId: UUID().uuidString, attempts: 0))
            #expect(first == .failed(reason: "400 BadDeviceToken", prune: false)) // past the provider token checks
            renewing.invalidate(try renewing.token())
            try await Task.sleep(for: .milliseconds(1100)) // a new iat
            let (tooSoon, _) = await sameConnection.deliver(DeliveryJob(id: 6, notificationId: 1, target: tokenA, payload: silent,
                                                                        pushId: UUID().uuidString, attempts: 0))
            #expect(tooSoon == .retry(reason: "429 TooManyProviderTokenUpdates", after: nil))
            let secondClient = APNsProvider(client: try apns.client())
            let (served, _) = await secondClient.deliver(DeliveryJob(id: 7, notificationId: 1, target: "abc", payload: silent, pushId: UUID().uuidString, attempts: 0))
            #expect(served == .failed(reason: "400 BadDeviceToken", prune: false), "a second client's own token was refused: \(served)")
            await otherApp.shutdown()
            await sameConnection.shutdown()
            await secondClient.shutdown()
            #expect(apns.sandbox.acceptedCount == 0)
            await forged.shutdown()
            await good.shutdown()
        }
    }
}

