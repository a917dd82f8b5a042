import Foundation

/// The two ways RichPush keeps its data, as a test parameter: the conformance tests run once
/// per engine from one suite.
///
/// `shared` is there only when PostgreSQL and SeaweedFS can run (always under `.ci/run`, which
/// sets `RICHPUSH_REQUIRE_ENGINES=1`); elsewhere those cases are left out and said so once.
public enum StoreEngine: String, Sendable, CustomStringConvertible {
    /// SQLite and files in the data directory: the default.
    case embedded
    /// PostgreSQL and an S3 bucket, as a cluster of nodes uses them.
    case shared

    public var description: String { self == .embedded ? "SQLite + files" : "PostgreSQL + S3" }

    /// The engines to test with here.
    public static let all: [StoreEngine] = {
        if Postgres.available && SeaweedFS.available { return [.embedded, .shared] }
        FileHandle.standardError.write(Data("note: PostgreSQL or SeaweedFS is not installed; the conformance tests run on the embedded store only\n".utf8))
        return [.embedded]
    }()

    /// Where a fresh store of this engine lives: the `--database` and `--blobs` values (nil for
    /// the defaults) and the environment that carries the bucket's credentials.
    public struct Locations: Sendable {
        public var database: String?
        public var blobs: String?
        public var environment: [String: String]

        /// `environment` with the store named too (`RICHPUSH_DATABASE`, `RICHPUSH_BLOBS`), for a
        /// `richpush` process.
        public var processEnvironment: [String: String] {
            var environment = self.environment
            environment["RICHPUSH_DATABASE"] = database
            environment["RICHPUSH_BLOBS"] = blobs
            return environment
        }
    }

    /// A new, empty store: its own database, and its own prefix in the test bucket.
    public func locations() async throws -> Locations {
        let environment = ProcessInfo.processInfo.environment
        switch self {
        case .embedded:
            return Locations(database: nil, blobs: nil, environment: environment)
        case .shared:
            async let database = Postgres.database()
            let weed = try await SeaweedFS.running()
            let prefix = "store-\(UInt64.random(in: 0 ... .max))"
            var env = environment
            env["AWS_ACCESS_KEY_ID"] = weed.accessKey
            env["AWS_SECRET_ACCESS_KEY"] = weed.secretKey
            // Two connections per store, and generous timeouts: the suite runs dozens of stores at
            // once on two cores, where a connection can take longer than a server on its own gets.
            return Locations(database: try await database + "&pool=2",
                             blobs: "s3://\(weed.bucket)/\(prefix)?endpoint=\(weed.endpoint)&connect_timeout=15&timeout=30", environment: env)
        }
    }
}
