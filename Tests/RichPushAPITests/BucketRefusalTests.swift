import HTTPTypes
import MediaStore
@testable import RichPushAPI
import Testing

/// An upload the bucket answered but did not store is never the client's fault (docs/operations.md#when-a-dependency-fails).
@Suite("Uploads the bucket answered without storing")
struct BucketRefusalTests {
    @Test("a 5xx still there after the retries is a 503 naming the bucket with Retry-After; a refusal (403, no bucket) is a 500 that sends the details to the log")
    func answers() {
        for status in [500, 503] {
            let failing = MediaController.bucketRefusal(.service(status: status, code: "InternalError", message: "We encountered an internal error"), requestID: "r1")
            #expect(failing.status == .serviceUnavailable && failing.headers[.retryAfter] == "5")
            #expect(failing.detail.hasPrefix("the media bucket is failing") && failing.detail.contains("nothing was stored"))
        }
        let refused = MediaController.bucketRefusal(.service(status: 403, code: "SignatureDoesNotMatch", message: "check your key"), requestID: "r2")
        #expect(refused.status == .internalServerError && refused.detail.contains("request id r2"))
        #expect(!refused.detail.contains("SignatureDoesNotMatch") && !refused.detail.contains("check your key"))
        #expect(MediaController.bucketRefusal(.malformed("<xml"), requestID: "r3").status == .internalServerError)
    }
}
