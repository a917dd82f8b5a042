import APNsSandbox
import AsyncHTTPClient
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPEdge
import HTTPTypes
import HummingbirdTesting
import MediaStore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import PushDelivery
import Resilience
@testable import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import PushTestSupport
import RichPushTestSupport
import SQLEngine
import Testing

/// docs/operations.md#when-a-dependency-fails under fault: the bucket and the database each go down (connections reset, new
/// ones refused) or stall (connections open, nothing answered) under a running server, through
/// a `FaultProxy` in front of the suite's own SeaweedFS and PostgreSQL, with uploads and a
/// campaign in flight. A request that needs what is down gets a 503 naming it, the next one
/// without trying (the breaker refuses it); what does not need it (cached images, `/health`)
/// is served; nothing acknowledged is lost; and once the engine is back the server recovers by
/// itself. How long each takes is measured by `bench/faults.sh` (BENCHMARKS.md), not here: the
/// bounds below only tell an answer from a hang (which was a minute and more).
@Suite("Faults: the bucket and the database down, stalled and back", .enabled(if: Postgres.available && SeaweedFS.available))
struct FaultTests {
    static let modes: [FaultProxy.Mode] = [.down, .stall]
    /// Longer than any deadline here (6 s for the bucket, 16 s for a stalled database's probe with
    /// the suite's connect timeout) and the cool-downs: an answer, not a hang (which was forever
    /// for a stalled database, a minute and more for the bucket), on a loaded machine.
    static let hang = 40.0

    /// A proxy in front of the suite's SeaweedFS, and the configuration change that uses it.
    static func bucketProxy() async throws -> (FaultProxy, @Sendable (inout ServerConfiguration) -> Void) {
        let weed = try await SeaweedFS.running()
        let port = try #require(Int(weed.endpoint.split(separator: ":").last ?? ""))
        let proxy = try FaultProxy(targetPort: port)
        // A call's deadline near a server's own (4 s), not the suite's generous 30 s: what a stall is
        // answered by. (The proxy accepts connections unless it is down, so the connect timeout
        // plays no part; the suite's is kept, as healthy calls on a loaded machine need it.)
        return (proxy, { $0.blobs = $0.blobs?.replacingOccurrences(of: "127.0.0.1:\(port)", with: "127.0.0.1:\(proxy.port)")
                                               .replacingOccurrences(of: "&timeout=30", with: "&timeout=6") })
    }

    /// A proxy in front of the suite's PostgreSQL, and the configuration change that uses it.
    static func databaseProxy() async throws -> (FaultProxy, @Sendable (inout ServerConfiguration) -> Void) {
        let port = try await Postgres.running().port
        let proxy = try FaultProxy(targetPort: port)
        // The suite's connect timeout is kept (on a loaded machine a healthy connection can take
        // seconds): a stalled server is then noticed by the statements' watch after its probe's
        // 16 s, not a server's 3 s (bench/faults.sh measures those).
        return (proxy, { $0.database = $0.database?.replacingOccurrences(of: "127.0.0.1:\(port)/", with: "127.0.0.1:\(proxy.port)/") })
    }

    /// `work`'s result and how long it took, in seconds.
    static func timed<T>(_ work: () async throws -> T) async rethrows -> (T, Double) {
        let start = ContinuousClock.now
        let value = try await work()
        let elapsed = ContinuousClock.now - start
        return (value, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    static func detail(_ response: TestResponse) -> String {
        ((try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView))) as? [String: Any])?["detail"] as? String ?? ""
    }

    static func failing(_ s: TestServer) async throws -> [String] {
        let (_, body) = try await s.json(.get, "/ready", as: nil)
        return (body as? [String: Any])?["failing"] as? [String] ?? []
    }

    @Test("the bucket down or stalled: an upload is 503 naming the bucket within 5 s (the next at once), a cached image is served, /health is 200 and /ready names blobs; nothing is left behind, and uploads work again once it is back", arguments: modes)
    func bucket(mode: FaultProxy.Mode) async throws {
        let (proxy, useProxy) = try await Self.bucketProxy()
        defer { proxy.stop() }
        try await TestServer.run(engine: .shared, useProxy) { s in
            let cached = PNGBuilder.rgb(width: 8, height: 8, seed: 1)
            let created = try await s.request(.post, "/api/media", body: cached)
            #expect(created.status == .created)
            let id = try #require(created.headers[.location])
            #expect(try await s.request(.get, id).status == .ok) // now in the memory cache

            proxy.set(mode)
            let refused = PNGBuilder.rgb(width: 8, height: 8, seed: 2)
            let (first, firstTime) = try await Self.timed { try await s.request(.post, "/api/media", body: refused) }
            #expect(first.status == .serviceUnavailable)
            #expect(firstTime < Self.hang, "the first upload waited \(firstTime) s")
            #expect(Self.detail(first).hasPrefix("the media bucket is not answering"), "\(Self.detail(first))")
            #expect(Int(first.headers[.retryAfter] ?? "") ?? 0 >= 1)
            #expect(!Self.detail(first).contains("127.0.0.1"))
            // The breaker is open: later calls are refused without trying, until a probe finds the
            // bucket back (CircuitBreakerTests and S3ClientFaultTests show the refusal itself).
            let breaker = try #require(s.data.media.bucketBreaker)
            #expect(breaker.isOpen)
            let second = try await s.request(.post, "/api/media", body: refused)
            #expect(second.status == .serviceUnavailable)

            // The cached copy is served past its one-second re-check, which cannot reach the bucket.
            try await Task.sleep(for: .milliseconds(1_200))
            let (image, imageTime) = try await Self.timed { try await s.request(.get, id) }
            #expect(image.status == .ok && image.bytes == cached)
            #expect(imageTime < Self.hang, "a cached image took \(imageTime) s")
            #expect(try await s.request(.get, "/health", as: nil).status == .ok)
            #expect(try await Self.failing(s) == ["blobs"])
            // Operators see it too (the registry is the test process's: other tests' breakers share the series).
            let metrics = String(buffer: try await s.request(.get, "/metrics", as: nil).body)
            for name in ["richpush_dependency_up", "richpush_dependency_refused_total", "richpush_dependency_outages_total"] {
                #expect(metrics.contains("\(name){dependency=\"blobs\"}"), "\(name) is not in /metrics")
            }
            // Nothing of the refused upload: no row, no temp file.
            let hex = MediaID(hashing: refused).hex
            let rows = try await s.database.read { db in try SQLRow.fetchAll(db, sql: "SELECT sha256 FROM media WHERE sha256 = ?", arguments: [hex]).count }
            #expect(rows == 0)
            #expect(s.tmpFiles.isEmpty)

            proxy.set(.forward)
            // Back: the breaker lets a probe through within its cool-down, with no restart.
            let (recovered, recoveryTime) = try await Self.timed {
                try await eventually(within: 40) { try await s.request(.post, "/api/media", body: refused).status == .created }
            }
            #expect(recovered, "uploads did not work again after the bucket came back (\(recoveryTime) s)")
            #expect(!breaker.isOpen)
            #expect(try await Self.failing(s).isEmpty)
            #expect(try await s.request(.get, "/media/\(hex)").bytes == refused)
        }
    }

    @Test("uploads in flight when the bucket stalls: each is answered 201 or 503; every 201 is stored whole, every 503 left nothing")
    func uploadsInFlight() async throws {
        let (proxy, useProxy) = try await Self.bucketProxy()
        defer { proxy.stop() }
        try await TestServer.run(engine: .shared, useProxy) { s in
            let images = (10..<18).map { PNGBuilder.rgb(width: 64, height: 64, seed: UInt64($0)) }
            // Each upload on a connection of its own (the test client has one, and would queue them).
            let port = try #require(s.client.port)
            // Half alice's, half bob's: a user may have 4 uploads being checked at once.
            let basics = [try #require(TestServer.basic("alice")[.authorization]), try #require(TestServer.basic("bob")[.authorization])]
            let statuses = try await withThrowingTaskGroup(of: (Int, HTTPResponse.Status).self) { group in
                for (index, image) in images.enumerated() {
                    group.addTask {
                        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/api/media")
                        request.method = .POST
                        request.headers.add(name: "Authorization", value: basics[index % 2])
                        request.body = .bytes(ByteBuffer(bytes: image))
                        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(120))
                        _ = try await response.body.collect(upTo: 1 << 20)
                        return (index, HTTPResponse.Status(code: Int(response.status.code)))
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(30))
                    proxy.set(.stall)
                    return (-1, .ok)
                }
                var statuses: [Int: HTTPResponse.Status] = [:]
                for try await (index, status) in group where index >= 0 { statuses[index] = status }
                return statuses
            }
            #expect(statuses.values.allSatisfy { $0 == .created || $0 == .serviceUnavailable }, "\(statuses)")
            proxy.set(.forward)
            for (index, image) in images.enumerated() {
                let hex = MediaID(hashing: image).hex
                let rows = try await s.database.read { db in try SQLRow.fetchAll(db, sql: "SELECT sha256 FROM media WHERE sha256 = ?", arguments: [hex]).count }
                if statuses[index] == .created {
                    #expect(rows == 1)
                    let served = try await eventually(within: 40) { try await s.request(.get, "/media/\(hex)").bytes == image }
                    #expect(served, "acknowledged upload \(index) is not served whole")
                } else {
                    #expect(rows == 0, "upload \(index) was refused but has a row")
                }
            }
            #expect(s.tmpFiles.isEmpty)
        }
    }

    @Test("the database down or stalled: a request that reads it is 503 naming the database within 5 s (the next at once), a cached image is served, /health is 200 and /ready names database; all is back once it is", arguments: modes)
    func database(mode: FaultProxy.Mode) async throws {
        let (proxy, useProxy) = try await Self.databaseProxy()
        defer { proxy.stop() }
        try await TestServer.run(engine: .shared, useProxy) { s in
            let cached = PNGBuilder.rgb(width: 8, height: 8, seed: 3)
            let created = try await s.request(.post, "/api/media", body: cached)
            #expect(created.status == .created)
            let id = try #require(created.headers[.location])
            #expect(try await s.request(.get, id).status == .ok)
            #expect(try await s.request(.get, "/api/notifications").status == .ok) // alice's credentials are cached now

            proxy.set(mode)
            let (first, firstTime) = try await Self.timed { try await s.request(.get, "/api/notifications") }
            #expect(first.status == .serviceUnavailable)
            #expect(firstTime < Self.hang, "the first request waited \(firstTime) s")
            #expect(Self.detail(first).hasPrefix("the database is not answering"), "\(Self.detail(first))")
            #expect(Int(first.headers[.retryAfter] ?? "") ?? 0 >= 1)
            let breaker = try #require(s.database.breaker)
            #expect(breaker.isOpen)
            let second = try await s.request(.get, "/api/notifications")
            #expect(second.status == .serviceUnavailable)
            try await Task.sleep(for: .milliseconds(1_200))
            // On a new connection the request waits on the front for the image's check, which
            // cannot reach the database: served as well, and the connection never needs the router.
            let (port, alice, handOffs) = (try #require(s.client.port), TestServer.basic("alice")[.authorization]!, s.fastPath.handOffs)
            let (fronted, frontedTime) = try await Self.timed {
                try await rawExchange(port: port, "GET \(id) HTTP/1.1\r\nHost: x\r\nAuthorization: \(alice)\r\nConnection: close\r\n\r\n", untilClose: true)
            }
            #expect(fronted.hasPrefix("HTTP/1.1 200 OK"), "\(fronted.prefix(200))")
            #expect(frontedTime < Self.hang, "a cached image on a new connection took \(frontedTime) s")
            #expect(s.fastPath.handOffs == handOffs)
            let (image, imageTime) = try await Self.timed { try await s.request(.get, id) }
            #expect(image.status == .ok && image.bytes == cached)
            #expect(imageTime < Self.hang, "a cached image took \(imageTime) s")
            #expect(try await s.request(.get, "/health", as: nil).status == .ok)
            #expect(try await Self.failing(s) == ["database"])

            proxy.set(.forward)
            let (recovered, recoveryTime) = try await Self.timed {
                try await eventually(within: 40) { try await s.request(.get, "/api/notifications").status == .ok }
            }
            #expect(recovered, "requests did not work again after the database came back (\(recoveryTime) s)")
            #expect(!breaker.isOpen)
            #expect(try await Self.failing(s).isEmpty)
        }
    }

    @Test("a campaign in flight while the database goes down or stalls for 3 s: every device gets its push once the database is back, every resend with the same collapse id, and the campaign ends done", arguments: modes)
    func campaignThroughOutage(mode: FaultProxy.Mode) async throws {
        let (proxy, useProxy) = try await Self.databaseProxy()
        defer { proxy.stop() }
        try await RunningSandbox.with { apns in
            try await TestServer.run(engine: .shared, useProxy, provider: APNsProvider(client: try apns.client())) { s in
                var tokens: [String] = []
                for index in 0..<40 {
                    let token = String(format: "%064x", index + 1)
                    _ = try await s.registerDevice(token, as: index % 2 == 0 ? "alice" : "bob")
                    tokens.append(token)
                }
                let (response, body) = try await s.campaign(#"{"audience":{"all":true},"title":"Outage","message":"still here"}"#)
                #expect(response.status == .accepted)
                let id = try #require(body["id"] as? Int)
                proxy.set(mode)
                try await Task.sleep(for: .seconds(3))
                proxy.set(.forward)
                // A push whose send was cut off waits for its lease (60 s) to lapse before it goes again; a busy machine adds its share.
                let done = try await eventually(within: 150) { try await s.campaignStatus(id)["status"] as? String == "done" }
                let status = try await s.campaignStatus(id)
                let rows = try await s.database.read { db in
                    try SQLRow.fetchAll(db, sql: "SELECT state, attempts, reason, nextAttemptAt, leasedBy, leaseTag FROM deliveries ORDER BY id LIMIT 3")
                        .map { "\($0["state"] as String) \($0["attempts"] as Int) \(($0["reason"] as String?) ?? "-") next=\(($0["nextAttemptAt"] as Double) - Date().timeIntervalSince1970) lease=\(($0["leasedBy"] as Int?) ?? -1)" }
                }
                #expect(done, "the campaign did not finish: \(status) \(rows)")
                #expect(status["sent"] as? Int == 40 && status["failed"] as? Int == 0 && status["pending"] as? Int == 0, "\(status)")
                let accepted = apns.sandbox.accepted
                for token in tokens {
                    let pushes = accepted.filter { $0.token == token }
                    #expect(!pushes.isEmpty, "device \(token.suffix(4)) got nothing")
                    // A resend (the outage may make one) folds into the first on the phone.
                    #expect(Set(pushes.map { $0.headers["apns-collapse-id"] ?? "" }).count == 1)
                    #expect(pushes.allSatisfy { ($0.headers["apns-collapse-id"] ?? "").hasPrefix("rp-") })
                }
            }
        }
    }

    @Test("a campaign whose image must be warmed while the bucket stalls: the POST is answered and the first push sent without waiting for the bucket (SPEC §17, §21)")
    func warmUpStalled() async throws {
        let (proxy, useProxy) = try await Self.bucketProxy()
        defer { proxy.stop() }
        let hook = FirstPushHook {}
        try await TestServer.run(engine: .shared, useProxy, provider: hook) { s in
            let image = PNGBuilder.rgb(width: 8, height: 8, seed: 7)
            #expect(try await s.request(.post, "/api/media", body: image).status == .created)
            _ = try await s.registerDevice(tokenA)
            proxy.set(.stall)
            // The warm-up reads the image and makes its push variant: both wait on the stalled bucket
            // (6 s a call here). Nobody waits more than PayloadWarmer's patience (2 s) for it.
            let (response, seconds) = try await Self.timed {
                try await s.json(.post, "/api/admin/campaigns", as: "root",
                                 body: #"{"audience":{"all":true},"mode":"silent","payload":"\#(MediaID(hashing: image).hex)"}"#).0
            }
            #expect(response.status == .accepted)
            #expect(seconds < 5.5, "the POST waited \(seconds) s for the bucket")
            let (sent, pushSeconds) = try await Self.timed { try await eventually(within: 30) { hook.pushes.withLockedValue { $0 } >= 1 } }
            #expect(sent && pushSeconds < 5.5, "the first push waited \(pushSeconds) s")
            proxy.set(.forward)
        }
    }
}

/// docs/operations.md#when-a-dependency-fails's full disk, on a real one: the data directory on a 4 MiB tmpfs (the tests run as
/// root under `.ci/run`; elsewhere this is skipped, visibly).
@Suite("A full disk")
struct FullDiskTests {
    @Test("an upload to a full disk is 507 problem+json naming no path, leaves no temp file and no row, and uploads work again once there is room",
          .enabled(if: getuid() == 0))
    func fullDisk() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let small = dir.appendingPathComponent("small")
        try FileManager.default.createDirectory(at: small, withIntermediateDirectories: true)
        let mounted = try await onOwnThread { try runCapturing("/bin/mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", small.path]) }
        try #require(mounted.status == 0, "cannot mount a tmpfs as root: \(mounted.output)")
        defer { _ = try? runCapturing("/bin/umount", ["-l", small.path]) }
        try await TestServer.run({ $0.dataPath = small.appendingPathComponent("data").path }) { s in
            #expect(try await s.request(.post, "/api/media", body: PNGBuilder.rgb(width: 8, height: 8, seed: 20)).status == .created)
            // Fill the disk, then give back a little: the database can still be read, an upload cannot be written.
            let filler = small.appendingPathComponent("filler").path
            try await onOwnThread {
                let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                defer { close(fd) }
                let chunk = [UInt8](repeating: 0xAB, count: 16 * 1024)
                while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
                _ = ftruncate(fd, lseek(fd, 0, SEEK_END) - 64 * 1024)
                _ = fsync(fd)
            }
            let image = PNGBuilder.rgb(width: 256, height: 256, seed: 21)
            let full = try await s.request(.post, "/api/media", body: image)
            #expect(full.status.code == 507)
            #expect(full.headers[.contentType] == "application/problem+json")
            let detail = FaultTests.detail(full)
            #expect(detail.contains("storage is full"), "\(detail)")
            #expect(!detail.contains("/"), "a server path in: \(detail)")
            #expect(s.tmpFiles.isEmpty, "left behind: \(s.tmpFiles)")
            let hex = MediaID(hashing: image).hex
            let rows = try await s.database.read { db in try SQLRow.fetchAll(db, sql: "SELECT sha256 FROM media WHERE sha256 = ?", arguments: [hex]).count }
            #expect(rows == 0)
            try FileManager.default.removeItem(atPath: filler)
            #expect(try await s.request(.post, "/api/media", body: image).status == .created)
        }
    }
}
