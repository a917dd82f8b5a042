import Crypto
import Foundation
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import SQLEngine
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// docs/operations.md#traces: two `serve` nodes on one PostgreSQL database export OpenTelemetry
/// traces over OTLP/HTTP to a receiver that decodes them with OpenTelemetry's own protobuf
/// definitions (`scripts/otlp-receiver.py`, PyPI's opentelemetry-proto); one campaign is one trace.
@Suite("Traces across nodes (SPEC §29)", .enabled(if: Postgres.available && SeaweedFS.available, "PostgreSQL or SeaweedFS is not installed"))
struct TracesCLITests {
    static let deviceCount = 600

    @Test("a campaign POSTed with a traceparent is one trace: the request's span (a child of the caller's), its transactions, its queueing, every push from both nodes with its apns-id, and the webhook delivery, which carries traceparent; parents right")
    func oneCampaignOneTrace() async throws {
        guard (try? await python("import opentelemetry.proto.collector.trace.v1.trace_service_pb2"))?.status == 0 else {
            #expect(ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] != "1",
                    "the traces test needs opentelemetry-proto (pip); .ci/run installs it")
            return
        }
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try prepareNodeDirectory(dir)
        let shared = try await StoreEngine.shared.locations()
        let setup = try await DataStore.open(path: dir.appendingPathComponent("setup").path, database: shared.database, blobs: shared.blobs,
                                             environment: shared.processEnvironment)
        defer { setup.close() }
        let names = (0..<Self.deviceCount).map { String(format: "t%05d", $0) }
        try await seedUsersWithDevices(setup, names)
        let secret = "a webhook secret of 32 bytes...."
        let hooks = dir.appendingPathComponent("hooks")
        try FileManager.default.createDirectory(at: hooks, withIntermediateDirectories: true)
        let (receiver, hookPort) = try startWebhookReceiver(in: hooks, secret: secret)
        defer { receiver.terminate() }
        _ = try await setup.webhooks.add(url: "http://127.0.0.1:\(hookPort)/hook", events: [.campaignDone], secret: secret, allowPrivate: true)

        // The collector, the APNs stand-in (slow enough that both nodes take their share), two nodes.
        let spansFile = dir.appendingPathComponent("spans.jsonl")
        let otlpPort = freePort()
        let collector = Process()
        collector.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        collector.arguments = ["python3", Fixtures.packageRoot.appendingPathComponent("scripts/otlp-receiver.py").path, String(otlpPort), spansFile.path]
        collector.standardOutput = FileHandle.nullDevice
        collector.standardError = FileHandle.nullDevice
        try collector.run()
        defer { collector.terminate() }
        let (sandbox, apnsPort) = try await startListening({ ["apns-sandbox", "--port", String($0), "--team-id", "TEAM123456", "--key-id", "KEY1234567",
                                                              "--public-key", "AuthKey.p8", "--tls-cert", "cert.pem", "--tls-key", "cert.key",
                                                              "--delay", "200ms", "--token-update-interval", "0"] },
                                                           cwd: dir, log: dir.appendingPathComponent("sandbox.log"))
        defer { if sandbox.isRunning { kill(sandbox.processIdentifier, SIGKILL) } }
        func node(_ name: String) async throws -> (Process, Int) {
            var environment = shared.processEnvironment
            environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:\(otlpPort)"
            environment["OTEL_SERVICE_NAME"] = "richpush-\(name)"
            environment["OTEL_BSP_SCHEDULE_DELAY"] = "200"
            return try await startListening({ ["serve", "--port", String($0), "--data", dir.appendingPathComponent(name).path,
                                               "--allow-private-webhooks"] + sandboxAPNs(apnsPort) },
                                            cwd: dir, log: dir.appendingPathComponent("\(name).log"), environment: environment)
        }
        let (a, portA) = try await node("a")
        defer { if a.isRunning { kill(a.processIdentifier, SIGKILL) } }
        let (b, portB) = try await node("b")
        defer { if b.isRunning { kill(b.processIdentifier, SIGKILL) } }
        #expect(try await waitForPort(otlpPort))

        // The caller's own trace: the campaign's spans are its descendants.
        let traceID = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let callerSpan = (0..<8).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let root = Data("root:rootpw".utf8).base64EncodedString()
        let body = #"{"audience":{"all":true},"title":"Traced","message":"One trace"}"#
        let answer = try await onOwnThread {
            let fd = try connectTo(port: portA)
            defer { close(fd) }
            sendAll(fd, Array(("POST /api/admin/campaigns HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(root)\r\nContent-Type: application/json\r\n"
                               + "traceparent: 00-\(traceID)-\(callerSpan)-01\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)").utf8))
            return receiveAll(fd)
        }
        #expect(answer.hasPrefix("HTTP/1.1 202"), "\(answer.prefix(300))")
        let id = try #require(answer.range(of: #""id":\d+"#, options: .regularExpression).map { Int(answer[$0].dropFirst(5))! })
        #expect(try await eventually(within: 60) {
            try await http(portA, "GET", "/api/admin/campaigns/\(id)", auth: root).contains(#""status":"done""#)
        })
        // The campaign names its trace, for the console's link (serve --trace-url).
        #expect(try await http(portB, "GET", "/api/admin/campaigns/\(id)", auth: root).contains(#""traceId":"\#(traceID)""#))
        // The campaign.done webhook, with the trace's traceparent.
        #expect(try await eventually(within: 30) {
            ((try? String(contentsOf: hooks.appendingPathComponent("requests"), encoding: .utf8)) ?? "").contains("-\(traceID)-")
        })
        // The delivery's span ends once its outcome is recorded, after the receiver answered: exported within the next batch.
        #expect(try await eventually(within: 15) {
            ((try? String(contentsOf: spansFile, encoding: .utf8)) ?? "").contains(#""name": "webhook delivery""#)
        })
        // Stopped gracefully, each node exports what it still holds.
        for process in [a, b] { process.terminate() }
        await waitForExit(a)
        await waitForExit(b)

        let spans = try String(contentsOf: spansFile, encoding: .utf8).split(separator: "\n").compactMap {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(!spans.contains { $0["error"] != nil }, "the receiver could not decode an export")
        let trace = spans.filter { $0["traceId"] as? String == traceID }
        func named(_ name: String) -> [[String: Any]] { trace.filter { $0["name"] as? String == name } }
        let request = try #require(named("POST /api/admin/campaigns").first, "\(Set(trace.compactMap { $0["name"] as? String }))")
        #expect(request["parentSpanId"] as? String == callerSpan && request["service"] as? String == "richpush-a")
        let requestSpan = try #require(request["spanId"] as? String)
        let attributes = request["attributes"] as? [String: Any] ?? [:]
        #expect(attributes["http.route"] as? String == "/api/admin/campaigns" && attributes["http.response.status_code"] as? Int == 202)
        // Its transactions and its queueing are its children.
        #expect(named("db.transaction").contains { $0["parentSpanId"] as? String == requestSpan })
        #expect(named("campaign.queue").contains { $0["parentSpanId"] as? String == requestSpan })
        // Every push, from both nodes, each a child of the request, with its apns-id.
        let pushes = named("push apns")
        #expect(pushes.count == Self.deviceCount, "\(pushes.count) push spans")
        #expect(pushes.allSatisfy { $0["parentSpanId"] as? String == requestSpan })
        #expect(Set(pushes.compactMap { $0["service"] as? String }) == ["richpush-a", "richpush-b"])
        let pushAttributes = pushes.map { $0["attributes"] as? [String: Any] ?? [:] }
        #expect(pushAttributes.allSatisfy { $0["push.status"] as? String == "sent" && ($0["apns.id"] as? String)?.count == 36 })
        #expect(Set(pushAttributes.compactMap { $0["apns.id"] as? String }).count == Self.deviceCount)
        // The webhook delivery is a child of the request too.
        #expect(named("webhook delivery").contains { $0["parentSpanId"] as? String == requestSpan },
                "\(spans.filter { $0["name"] as? String == "webhook delivery" })")
        // Nothing of the trace is an orphan: every parent is the caller's span or a span of the trace.
        let ids = Set(trace.compactMap { $0["spanId"] as? String })
        #expect(trace.allSatisfy { span in (span["parentSpanId"] as? String).map { $0 == callerSpan || ids.contains($0) } ?? false })
    }
}

/// `root` (password `rootpw`, an admin) and `names` (password `pw`), each with one APNs device
/// registered as the API would register it (a token from the name's SHA-256, the tag
/// `username:<name>`), written straight into `store`: a campaign's audience without a thousand
/// API calls.
func seedUsersWithDevices(_ store: DataStore, _ names: [String]) async throws {
    _ = try await store.users(cost: 4).importUsers([.init(name: "root", secret: .password("rootpw"), admin: true)]
                                                   + names.map { .init(name: $0, secret: .password("pw"), admin: false) })
    try await store.database.write { db in
        for chunk in names.sqlBatches(of: 200) {
            try db.execute(sql: "INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt) VALUES "
                           + Array(repeating: "(?, ?, 'apns', ?, ?, 0, 0)", count: chunk.count).joined(separator: ", "),
                           arguments: SQLArguments(chunk.flatMap { name -> [any SQLValueConvertible] in
                               ["reg-\(name)", name, SHA256.hash(data: Data(name.utf8)).map { String(format: "%02x", $0) }.joined(),
                                "[\"username:\(name)\"]"]
                           }))
        }
    }
}
