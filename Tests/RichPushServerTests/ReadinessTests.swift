import Foundation
import HTTPTypes
import HummingbirdTesting
@testable import RichPushAPI
import RichPushServer
import RichPushTestSupport
import Testing

/// `GET /ready` (docs/operations.md#when-a-dependency-fails): what a load balancer asks before sending traffic.
@Suite("Readiness")
struct ReadinessTests {
    @Test("/ready is 200 while the database and the blobs answer, 503 naming the blobs while they cannot be listed, and ready again once they are back, with no restart; /health stays 200", arguments: StoreEngine.all)
    func blobsGoneAndBack(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            // Each check has 2 s: on a machine this loaded, a shared engine can take longer for a
            // while, and a load balancer asks again, as this does.
            #expect(try await eventually(within: 30) {
                let (ready, body) = try await s.json(.get, "/ready", as: nil)
                return ready.status == .ok && (body as? [String: Any])?["status"] as? String == "ready"
            })
            guard engine == .embedded else { return } // the shared bucket is not this test's to stop
            let blobs = URL(fileURLWithPath: s.configuration.dataPath).appendingPathComponent("blobs/sha256")
            let aside = blobs.deletingLastPathComponent().appendingPathComponent("sha256.aside")
            try FileManager.default.moveItem(at: blobs, to: aside)
            try Data("not a directory".utf8).write(to: blobs)
            let (unready, failing) = try await s.json(.get, "/ready", as: nil)
            #expect(unready.status == .serviceUnavailable)
            #expect(unready.headers[.retryAfter] == "5")
            #expect((failing as? [String: Any])?["status"] as? String == "unready")
            #expect((failing as? [String: Any])?["failing"] as? [String] == ["blobs"])
            #expect(try await s.request(.get, "/health", as: nil).status == .ok)
            try FileManager.default.removeItem(at: blobs)
            try FileManager.default.moveItem(at: aside, to: blobs)
            #expect(try await s.request(.get, "/ready", as: nil).status == .ok)
        }
    }
}
