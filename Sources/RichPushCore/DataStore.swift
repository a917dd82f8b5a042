import Foundation
import SQLEngine
import MediaStore

/// A kind of change another process made, announced on a shared database.
public enum DataChange: String, Sendable, CaseIterable {
    /// A user was removed or changed password, a session revoked, or the payload key rotated:
    /// cached credentials and keys must be checked again.
    case users = "richpush_users"
    /// Pushes were queued.
    case outbox = "richpush_outbox"
}

/// Everything RichPush keeps, opened once from the flags: the media store and one store per
/// table, over one database. The embedded engine is SQLite and files in a data directory.
///
/// Nothing outside the data layer sees a database handle, SQL or a file path: the server, the
/// delivery module and the CLI work with these stores only.
public final class DataStore: Sendable {
    /// Images: blobs and their index.
    public let media: MediaStore
    /// Accounts and passwords.
    public let users: UserStore
    /// Bearer sessions.
    public let sessions: SessionStore
    /// Device registrations.
    public let registrations: RegistrationStore
    /// Who follows which topic (docs/api.md#attributes-devices-versions-and-topics).
    public let topics: TopicStore
    /// Saved segments, and the users a filter selects (docs/api.md#segments).
    public let segments: SegmentStore
    /// API keys for servers that call RichPush (docs/api.md#apps-and-api-keys).
    public let apiKeys: APIKeyStore
    /// `Idempotency-Key`s seen (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries).
    public let idempotency: IdempotencyStore
    /// Webhooks and their event queue (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks).
    public let webhooks: WebhookStore
    /// The outbox as readers see it (`deliveries`).
    public let deliveries: DeliveryStore
    /// The outbox as the dispatcher works it: claims, leases, outcomes.
    public let outbox: OutboxStore
    /// Small named values shared by the processes on one store.
    public let settings: SettingsStore
    /// Live Activities, their tokens and pushes (docs/api.md#live-activities).
    public let liveActivities: LiveActivityStore
    /// Who changed what, when (docs/operations.md#audit-log).
    public let audit: AuditStore
    let database: SQLDatabase
    let directory: DataDirectory

    /// Opens (creating when needed) the data directory at `path` with the whole schema migrated.
    /// `database` (`--database sqlite:PATH`) puts the SQLite file elsewhere; `blobs` (`--blobs`) puts the blob bytes in an S3 bucket instead of `path/blobs`
    /// (`s3://BUCKET[/PREFIX]?endpoint=…`, credentials from `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY`); nil or `file:<path>/blobs` keeps them as files.
    /// `passwordCost` is the bcrypt cost of the passwords it hashes (`--bcrypt-cost`).
    public static func open(path: String, database: String? = nil, blobs: String? = nil, limits: MediaLimits = .default,
                            passwordCost: UInt8 = UserStore.defaultCost,
                            environment: [String: String] = ProcessInfo.processInfo.environment) throws -> DataStore {
        var databasePath: String?
        var postgres: String?
        switch try database.map(DatabaseLocation.init) {
        case .sqlite(let file): databasePath = file
        case .postgres(let url): postgres = url
        case nil: break
        }
        let directory = DataDirectory(path: path, databasePath: databasePath)
        var bucket: S3Client?
        if let blobs, case .s3(let location) = try BlobsLocation(blobs, dataPath: path) {
            bucket = S3Client(location: location, credentials: try S3Credentials.fromEnvironment(environment))
        }
        return DataStore(directory: directory, database: try CoreDatabase.open(directory, postgres: postgres), limits: limits, bucket: bucket,
                         passwordCost: passwordCost)
    }

    /// `open` on a thread of its own: connecting to PostgreSQL and migrating block, and must not
    /// hold up a thread of the concurrency pool (a server or a test suite has only a few).
    public static func open(path: String, database: String? = nil, blobs: String? = nil, limits: MediaLimits = .default,
                            passwordCost: UInt8 = UserStore.defaultCost,
                            environment: [String: String] = ProcessInfo.processInfo.environment) async throws -> DataStore {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result {
                    try open(path: path, database: database, blobs: blobs, limits: limits, passwordCost: passwordCost,
                             environment: environment) as DataStore
                })
            }.start()
        }
    }

    init(directory: DataDirectory, database: SQLDatabase, limits: MediaLimits, bucket: S3Client? = nil,
         passwordCost: UInt8 = UserStore.defaultCost) {
        self.directory = directory
        self.database = database
        self.media = MediaStore(directory: directory, database: database, limits: limits, bucket: bucket)
        self.users = UserStore(database: database, cost: passwordCost)
        self.sessions = SessionStore(database: database)
        self.registrations = RegistrationStore(database: database)
        self.topics = TopicStore(database: database)
        self.segments = SegmentStore(database: database)
        self.apiKeys = APIKeyStore(database: database)
        self.idempotency = IdempotencyStore(database: database)
        self.webhooks = WebhookStore(database: database)
        self.deliveries = DeliveryStore(database: database)
        self.outbox = OutboxStore(database: database)
        self.settings = SettingsStore(database: database)
        self.liveActivities = LiveActivityStore(database: database)
        self.audit = AuditStore(database: database)
    }

    /// Users, with password hashes of `cost` (tests and benchmarks use a low one).
    public func users(cost: UInt8) -> UserStore {
        UserStore(database: database, cost: cost)
    }

    /// Notifications, signing payload URLs with `links` when given.
    public func notifications(links: PayloadLinks? = nil) -> NotificationStore {
        NotificationStore(database: database, links: links)
    }

    /// Campaigns, signing payload URLs with `links`, sending `defaultImage` when a campaign names none.
    public func campaigns(links: PayloadLinks?, defaultImage: String) -> CampaignStore {
        CampaignStore(database: database, links: links, defaultImage: defaultImage)
    }

    /// The key payload URLs are signed with: `RICHPUSH_PAYLOAD_KEY` when set, else the store's
    /// own (a file in the data directory, or a setting in PostgreSQL shared by every node).
    public func payloadKey(environment: [String: String] = ProcessInfo.processInfo.environment) async throws -> PayloadKey {
        if database.dialect == .postgres, try SecretEnvironment.value("RICHPUSH_PAYLOAD_KEY", in: environment) == nil {
            return try await PayloadKey(settings: settings)
        }
        return try PayloadKey.configured(directory: directory, environment: environment)
    }

    /// Replaces the store's payload key: every payload URL signed before stops working.
    /// Returns where it is kept.
    @discardableResult
    public func rotatePayloadKey() async throws -> String {
        if database.dialect == .postgres {
            try await PayloadKey.rotate(settings: settings)
            return "the database's settings"
        }
        try PayloadKey.rotate(directory: directory)
        return PayloadKey.path(directory)
    }

    /// What other processes change, as they commit, on a shared database (PostgreSQL's
    /// LISTEN/NOTIFY); nil on the embedded store, where the server polls.
    public func changes() -> AsyncStream<DataChange>? {
        guard let names = database.listen(DataChange.allCases.map(\.rawValue)) else { return nil }
        return AsyncStream { continuation in
            let task = Task {
                for await name in names {
                    if let change = DataChange(rawValue: name) { continuation.yield(change) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Closes database connections.
    public func close() {
        database.shutdown()
    }
}
