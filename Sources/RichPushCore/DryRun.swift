import Foundation
import SQLEngine

/// What a send would do, worked out without doing it (docs/api.md#dry-runs): whom it would
/// reach, by app and platform, and the push a few recipients would get on each platform, as the
/// outbox would hand it to a push service. Nothing is stored, queued or sent, and no payload URL
/// is signed.
public struct DryRun: Sendable {
    /// One recipient's push on one platform.
    public struct Sample: Sendable {
        /// The recipient.
        public var user: String
        /// `apns`, `fcm`, `web`, or `hub` (a Notification Hubs app's tag).
        public var platform: String
        /// The app whose credentials would send it.
        public var app: String
        /// The A/B test's variant whose content it carries (docs/api.md#ab-tests-and-conversions); nil without a test.
        public var variant: String?
        /// The push as the outbox would hand it to a provider: its payload, content, options and life.
        public var job: DeliveryJob
        /// Why it would be failed as it is queued instead of sent (a personalized push over its
        /// platform's size); nil when it would go.
        public var failure: String?
    }

    /// Recipients: the users who would get it in their inbox (for a tag expression or a Live
    /// Activity, those with a device it reaches).
    public var users = 0
    /// The devices its pushes go to.
    public var devices = 0
    /// Pushes per app, then per platform (`apns`, `fcm`, `web`, `hub`).
    public var byApp: [String: [String: Int]] = [:]
    /// At most `samplesPerPlatform` per platform, recipients in name order.
    public var samples: [Sample] = []
    /// What the reach and the samples do not say by themselves: recipients without a device, a
    /// schedule, an A/B test's shares, a pace.
    public var warnings: [String] = []

    /// An empty answer.
    public init() {}

    /// The most recipients whose push is shown per platform.
    public static let samplesPerPlatform = 3

    /// The token of the payload URL a sample carries: as long as a signed one, so that a push is
    /// measured at its real size, and accepted by no server (404). A dry run signs nothing: a URL
    /// signed for a notification id not given yet would become valid once that id is.
    public static let placeholderToken = "dry-run-" + String(repeating: "0", count: PayloadLinks.tokenLength - 8)

    /// The id a Live Activity's sample names (`la_` and 20 characters, as a real one's): no activity is made.
    public static let placeholderActivity = "la_dryrun00000000000000"

    /// The broadcast channel a broadcast start's sample names (24 characters, as APNs' channel
    /// ids): a dry run makes no channel, which would be a call to APNs.
    public static let placeholderChannel = "DRYRUN+NO+CHANNEL+MADE=="

    /// The payload URL a sample carries: `<public url>/p/dry-run-000…`.
    static func placeholderURL(_ links: PayloadLinks) -> String {
        "\(links.baseURL)/p/\(placeholderToken)"
    }

    /// The platform a push to `target` counts under, as stats name it.
    static func platform(of target: PushTarget) -> String {
        target.platform ?? (target.registration == nil ? "hub" : "apns")
    }

    /// Counts `pushes` more of `app` on `platform`.
    mutating func count(app: String, platform: String, _ pushes: Int = 1) {
        byApp[app, default: [:]][platform, default: 0] += pushes
    }

    /// Whether `platform` has its share of samples.
    func sampled(_ platform: String) -> Bool {
        samples.filter { $0.platform == platform }.count >= Self.samplesPerPlatform
    }

    /// The id a notification made now would likely be given (the next after the largest): a
    /// sample's `richId`, so that its push has the size a real one would. The real id is given
    /// as it is stored.
    static func nextNotificationID(_ db: SQLConnection) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT coalesce(max(id), 0) + 1 FROM notifications") ?? 1
    }

    /// Sets the badge of each sample whose options ask for `"badge":"unread"` as the outbox
    /// does at send time (`OutboxStore.setUnreadBadges`): its recipient's unread notifications,
    /// the one it would make included.
    mutating func setUnreadBadges(_ db: SQLConnection) throws {
        let recipients = Set(samples.filter { $0.job.options.badge == .unread }.map(\.user))
        guard !recipients.isEmpty else { return }
        var unread: [String: Int] = [:]
        for chunk in Array(recipients).sorted().sqlBatches() {
            for row in try db.fetchAll(sql: """
                SELECT recipient, count(*) AS n FROM notifications
                WHERE read = 0 AND createdAt <= ? AND retractedAt IS NULL AND recipient IN (\(sqlPlaceholders(chunk.count))) GROUP BY recipient
                """, arguments: SQLArguments([NotificationStore.visibleNow() as any SQLValueConvertible] + chunk.map { $0 as any SQLValueConvertible })) {
                unread[row["recipient"]] = row["n"]
            }
        }
        for index in samples.indices where samples[index].job.options.badge == .unread {
            let count = min((unread[samples[index].user] ?? 0) + 1, PushOptions.maxBadge)
            samples[index].job.payload = AlertPush.settingBadge(samples[index].job.payload, to: count)
            samples[index].job.content?.badge = count
        }
    }
}

/// Ends a dry run's transaction (`CampaignStore.dryRun`): thrown with the answer, it rolls back
/// everything the run's checks wrote.
struct DryRunRollback: Error {
    let result: DryRun
}

extension NotificationStore {
    /// What `create` would do for `recipient`, found without doing it (docs/api.md#dry-runs): the
    /// same checks (422 for an unknown payload or a push too large), read-only; the devices it
    /// would reach by app and platform, and up to `DryRun.samplesPerPlatform` of their pushes per
    /// platform. Nothing is stored, queued or sent.
    public func dryRun(for recipient: String, draft: NotificationDraft, defaultImage: String, addressing: DeliveryAddressing = .perDevice,
                       app: String? = nil, now: Date = Date()) async throws -> DryRun {
        let links = self.links
        return try await database.read { db in
            let writer = try NotificationWriter(db, draft: draft, defaultImage: defaultImage, links: links, now: now)
            let devices = try RegistrationStore.registrations(db, username: recipient).compactMap { r in
                r.handle.map { PushTarget(registration: r.id, target: $0, platform: r.platform, app: r.app) }
            }.filter { app == nil || $0.app == app }
            let targets = addressing.targets(recipient: recipient, devices: devices, app: app, alwaysTag: true)
            let id = try DryRun.nextNotificationID(db)
            try writer.checkFits(id: id, targets: targets)
            var run = DryRun()
            run.users = 1
            run.devices = devices.count
            for target in targets {
                let platform = DryRun.platform(of: target)
                run.count(app: target.app, platform: platform)
                guard !run.sampled(platform) else { continue }
                let (job, failure) = writer.sample(id: id, recipient: recipient, target: target)
                run.samples.append(DryRun.Sample(user: recipient, platform: platform, app: target.app, variant: nil, job: job, failure: failure))
            }
            if targets.isEmpty {
                run.warnings.append("\(recipient) has no device\(app.map { " of app \($0)" } ?? ""): the notification would reach their inbox only")
            }
            try run.setUnreadBadges(db)
            return run
        }
    }
}
