import Foundation
import HTTPTypes
import MediaStore
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import Testing

/// Issue #49: `serve` outside the repository root found no `media/logo.png`, so the tutorial's
/// empty POST answered 422. The default image is built into the binary (`Samples/`).
@Suite("The sample image built into the binary")
struct SampleImageTests {
    let logo = try! Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))

    @Test("a server whose media directory is an empty folder still answers the tutorial's empty POST with 201, with logo.png")
    func emptyMediaDirectory() async throws {
        let empty = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: empty) }
        try await TestServer.run({ $0.mediaDirectory = empty.path }) { s in
            let (response, object) = try await s.json(.post, "/api/notifications")
            #expect(response.status == .created, "\(response.detail)")
            let n = try #require(object as? [String: Any])
            #expect(n["payload"] as? String == MediaID(hashing: logo).hex)
            // The image itself, as the recipient fetches it.
            let id = try #require(n["id"] as? Int)
            let payload = try await s.request(.get, "/api/notifications/\(id)")
            #expect(payload.status == .ok && payload.headers[.contentType] == "image/png")
            #expect(payload.bytes == logo)
        }
    }

    @Test("the built-in sample is media/logo.png byte for byte; no other name has one")
    func sameBytes() {
        #expect(SampleImages.bytes(named: "logo.png") == logo)
        #expect(SampleImages.bytes(named: "banner.png") == nil)
    }
}
