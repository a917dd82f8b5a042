import Foundation
import MediaStore
import SQLEngine

extension CampaignStore {
    /// What `create` and the queueing after it would do with `draft`, found without doing it
    /// (docs/api.md#dry-runs). The campaign is checked and recorded exactly as `create` does
    /// it (the same 400, 409 and 422), in a transaction that is rolled back once its reach is
    /// counted and its samples made: no row stays, nothing is queued or sent, no payload URL is
    /// signed. (On PostgreSQL the campaigns' id sequence moves on, as after any insert rolled
    /// back: a sequence's value is not a row.) A scheduled campaign is counted as its audience
    /// stands now, and a warning says so.
    public func dryRun(_ draft: CampaignDraft, by admin: String, addressing: DeliveryAddressing, now: Date = Date()) async throws -> DryRun {
        let links = self.links, defaultImage = self.defaultImage
        do {
            _ = try await record(draft, by: admin, idempotency: nil, now: now) { db, campaign in
                try Self.dryRun(db, campaign, addressing: addressing, links: links, defaultImage: defaultImage, now: now)
            }
        } catch let rollback as DryRunRollback {
            return rollback.result
        }
        preconditionFailure("a dry run's transaction ends by rolling back")
    }

    /// The reach and samples of `campaign`, just recorded in `db`'s transaction: counted by the
    /// database (`DryRunReach`), and each sampled recipient's push made by the writers queueing
    /// uses, in their locale, their templates rendered, an A/B test's variants in turn.
    static func dryRun(_ db: SQLConnection, _ campaign: Campaign, addressing: DeliveryAddressing, links: PayloadLinks?,
                       defaultImage: String, now: Date) throws -> DryRun {
        let reach = try DryRunReach(db, audience: campaign.audience, app: campaign.app, addressing: addressing)
        var run = DryRun()
        run.users = reach.users
        run.devices = reach.devices
        run.byApp = reach.byApp
        let experiment = try Experiments.state(db, campaign.id)?.experiment
        let everyone = Array(Set(reach.sampleNames.values.joined())).sorted()
        let people = try CampaignTemplates.recipients(db, everyone)
        let owned = try devices(db, of: everyone, audience: campaign.audience, app: campaign.app, sparse: true)
        let templates = CampaignTemplates(campaignId: campaign.id)
        let id = try DryRun.nextNotificationID(db)
        // A tag expression picks devices: those go by device, a hub's too (as queueing sends them).
        let byDevice = if case .tags = campaign.audience { true } else { false }
        for (platform, names) in reach.sampleNames.sorted(by: { $0.key < $1.key }) {
            for (index, name) in names.enumerated() {
                let targets = addressing.targets(recipient: name, devices: owned[name] ?? [], app: campaign.app, byDevice: byDevice)
                guard let target = targets.first(where: { DryRun.platform(of: $0) == platform }) else { continue }
                var content = campaign
                var variant: String?
                if let experiment {
                    let arm = experiment.variants[index % experiment.variants.count]
                    arm.apply(to: &content)
                    variant = arm.name
                }
                let writer = try sampleWriter(db, content, for: people[name] ?? CampaignTemplates.Recipient(name: name), templates: templates,
                                              links: links, defaultImage: defaultImage, now: now)
                let (job, failure) = writer.sample(id: id, recipient: name, target: target)
                run.samples.append(DryRun.Sample(user: name, platform: platform, app: target.app, variant: variant, job: job, failure: failure))
            }
        }
        try run.setUnreadBadges(db)
        run.warnings = warnings(campaign, reach: reach, experiment: experiment)
        return run
    }

    /// The writer of `campaign`'s words for `person`, as `queueRecipients` makes it: their
    /// locale's words, rendered for them when any is a template.
    private static func sampleWriter(_ db: SQLConnection, _ campaign: Campaign, for person: CampaignTemplates.Recipient, templates: CampaignTemplates,
                                     links: PayloadLinks?, defaultImage: String, now: Date) throws -> NotificationWriter {
        let draft = NotificationDraft(message: campaign.message, richType: campaign.richType, payload: campaign.payload.hex,
                                      title: campaign.title, mode: campaign.mode, options: campaign.options)
        let locale = contentLocale(for: person.locale, locales: campaign.locales, defaultLocale: campaign.defaultLocale)
        let content = locale.flatMap { campaign.locales[$0] }
        let writer = try NotificationWriter(db, draft: content.map { localized(draft, $0) } ?? draft, defaultImage: defaultImage, links: links,
                                            campaignId: campaign.id, now: now)
        guard CampaignTemplates.isTemplated(campaign) else { return writer }
        return CampaignTemplates.personalized(writer, templates.words(of: writer, for: person))
    }

    /// What the reach and the samples do not say by themselves.
    private static func warnings(_ campaign: Campaign, reach: DryRunReach, experiment: Experiment?) -> [String] {
        var warnings: [String] = []
        if reach.users > reach.reached {
            let of = campaign.app.map { " of app \($0)" } ?? ""
            warnings.append("\(reach.users - reach.reached) of the \(reach.users) recipients have no device\(of): they would get the notification in their inbox only")
        }
        switch campaign.schedule {
        case .at(let date)?:
            warnings.append("scheduled for \(date.formatted(.iso8601)): this is what it would send now; its audience is read again when it goes out")
        case .localTime(let time, let date)?:
            warnings.append("sent at \(time) in each recipient's time zone\(date.map { " on \($0)" } ?? ""): this is what it would send now; "
                            + "its audience is read again as each zone's time comes")
        case nil:
            break
        }
        if let experiment {
            func percent(_ share: Double) -> String { "\(Int((share * 100).rounded()))%" }
            let rest = experiment.hasRest
                ? ", and the rest (\(percent(1 - experiment.testShare - experiment.holdout))) gets the winner after \(experiment.afterText)" : ""
            warnings.append("an A/B test: \(percent(experiment.testShare)) of the audience is sent the variants first, each user the one a hash of "
                            + "the campaign's id and their name picks (the samples show them in turn), \(percent(experiment.holdout)) is held out\(rest); "
                            + "the reach counts the whole audience")
        }
        if let rate = campaign.ratePerMinute {
            let pushes = reach.byApp.values.flatMap(\.values).reduce(0, +)
            let minutes = (pushes + rate - 1) / rate
            warnings.append("paced at \(rate) pushes a minute: its \(pushes) pushes would go out over about \(minutes) minute\(minutes == 1 ? "" : "s")")
        }
        return warnings
    }
}

/// A campaign's reach as the database counts it (docs/api.md#dry-runs): its recipients, and its
/// pushes by app and platform, in four aggregate queries (per 500 names of a list of users),
/// never user by user here. A tag expression's devices are matched here, as queueing matches
/// them, in one pass over the devices.
struct DryRunReach {
    /// Recipients: every user the audience selects (for a tag expression, those with a matching device).
    var users = 0
    /// Recipients with a device it reaches.
    var reached = 0
    var devices = 0
    /// Pushes per app and platform: one per device, or one per recipient and hub app (`hub`).
    var byApp: [String: [String: Int]] = [:]
    /// Per platform, up to `DryRun.samplesPerPlatform` recipients with a push on it, in name order.
    var sampleNames: [String: [String]] = [:]

    init(_ db: SQLConnection, audience: Audience, app: String?, addressing: DeliveryAddressing) throws {
        var appSQL = "", appArguments: [SQLValue] = []
        if let app {
            appSQL = "AND reg.app = ?"
            appArguments = [SQLValue.text(app)]
        }
        let selections: [(sql: String, arguments: [SQLValue])]
        switch audience {
        case .tags(let expression):
            try countTags(db, expression, appSQL: appSQL, appArguments: appArguments)
            return
        case .all:
            selections = [(sql: "1 = 1", arguments: [])]
        case .users(let names):
            selections = names.sqlBatches().map { chunk in
                (sql: "u.name IN (\(sqlPlaceholders(chunk.count)))", arguments: chunk.map { SQLValue.text($0) })
            }
        case .segment, .filter:
            let selected = try SegmentStore.condition(db, audience.segmentFilter!, path: audience.filterPath, now: db.now)
            selections = [(sql: selected.sql, arguments: selected.arguments)]
        }
        // Through a hub, one push per recipient and hub app (to the tag username:<name>), whatever their devices there.
        let hubs = addressing.tagApps.sorted()
        let hubList = "(\(sqlPlaceholders(max(1, hubs.count))))"
        let hubArguments = hubs.map { SQLValue.text($0) }
        func from(_ selection: (sql: String, arguments: [SQLValue])) -> String {
            "FROM registrations reg JOIN users u ON u.name = reg.username WHERE reg.handle IS NOT NULL \(appSQL) AND (\(selection.sql))"
        }
        for selection in selections {
            let arguments = appArguments + selection.arguments
            users += try Int.fetchOne(db, sql: "SELECT count(*) FROM users u WHERE \(selection.sql)", arguments: SQLArguments(values: selection.arguments)) ?? 0
            reached += try Int.fetchOne(db, sql: "SELECT count(DISTINCT reg.username) \(from(selection))", arguments: SQLArguments(values: arguments)) ?? 0
            for row in try db.fetchAll(sql: """
                SELECT reg.app AS app, coalesce(reg.platform, 'apns') AS platform, count(*) AS n \(from(selection))
                GROUP BY reg.app, coalesce(reg.platform, 'apns')
                """, arguments: SQLArguments(values: arguments)) {
                let (owner, platform, n): (String, String, Int) = (row["app"], row["platform"], row["n"])
                devices += n
                if !addressing.tagApps.contains(owner) { byApp[owner, default: [:]][platform, default: 0] += n }
            }
            guard !hubs.isEmpty else { continue }
            for row in try db.fetchAll(sql: "SELECT reg.app AS app, count(DISTINCT reg.username) AS n \(from(selection)) AND reg.app IN \(hubList) GROUP BY reg.app",
                                       arguments: SQLArguments(values: arguments + hubArguments)) {
                let (owner, n): (String, Int) = (row["app"], row["n"])
                byApp[owner, default: [:]]["hub", default: 0] += n
            }
        }
        // The first few recipients with a push on each platform, in name order.
        for platform in Set(byApp.values.flatMap(\.keys)).sorted() {
            var names: [String] = []
            for selection in selections where names.count < DryRun.samplesPerPlatform {
                let which: String, whichArguments: [SQLValue]
                if platform == "hub" {
                    which = "AND reg.app IN \(hubList)"
                    whichArguments = hubArguments
                } else {
                    which = "AND coalesce(reg.platform, 'apns') = ?" + (hubs.isEmpty ? "" : " AND reg.app NOT IN \(hubList)")
                    whichArguments = [SQLValue.text(platform)] + hubArguments
                }
                let limit = SQLValue.integer(Int64(DryRun.samplesPerPlatform - names.count))
                names += try String.fetchAll(db, sql: "SELECT DISTINCT reg.username \(from(selection)) \(which) ORDER BY reg.username LIMIT ?",
                                             arguments: SQLArguments(values: appArguments + selection.arguments + whichArguments + [limit]))
            }
            sampleNames[platform] = names
        }
    }

    /// A tag expression's reach: its devices, matched here as queueing matches them (each goes
    /// by device, a hub app's too), and their owners.
    private mutating func countTags(_ db: SQLConnection, _ expression: TagExpression, appSQL: String, appArguments: [SQLValue]) throws {
        var last: String?
        try db.forEach(sql: """
            SELECT reg.username, reg.app, reg.platform, reg.tags FROM registrations reg JOIN users u ON u.name = reg.username
            WHERE reg.handle IS NOT NULL \(appSQL) ORDER BY reg.username
            """, arguments: SQLArguments(values: appArguments)) { row in
            guard expression.matches(RegistrationStore.decodeTags(row["tags"])) else { return }
            let name: String = row["username"]
            let platform = (row["platform"] as String?) ?? "apns"
            devices += 1
            byApp[row["app"] as String, default: [:]][platform, default: 0] += 1
            if name != last {
                users += 1
                last = name
            }
            if (sampleNames[platform]?.count ?? 0) < DryRun.samplesPerPlatform, sampleNames[platform]?.last != name {
                sampleNames[platform, default: []].append(name)
            }
        }
        reached = users
    }
}
