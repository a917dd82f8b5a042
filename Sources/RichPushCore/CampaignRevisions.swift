import Foundation
import MediaStore
import SQLEngine

extension CampaignStore {
    /// Changes campaign `id`'s content (docs/api.md#change-or-take-back-what-was-sent), checked
    /// as a new campaign's is (400/422 naming the field): recipients queued later get the new
    /// content, every inbox entry shows it, its pushes not yet sent carry it, and each device
    /// that got it gets a replacement. In one transaction. 404 for no such campaign, 409 for one
    /// taken back. `audit` records who did (`campaign.change`, with the fields changed).
    public func change(_ id: Int64, _ change: ContentChange, now: Date = Date(), audit: AuditActor? = nil) async throws -> (CampaignProgress, ChangeOutcome) {
        guard !change.isEmpty else {
            throw CoreError(.invalid, "give at least one of title, message, payload, content or options to change")
        }
        let links = self.links, defaultImage = self.defaultImage, countedUpTo = pendingCountedUpTo
        return try await database.write { db in
            var campaign = try Self.locked(db, id)
            if let retracted = campaign.retractedAt {
                throw CoreError(.conflict, "campaign \(id) was taken back at \(retracted.formatted(.iso8601)); a retracted campaign cannot be changed")
            }
            // docs/api.md#ab-tests-and-conversions: one content for all would undo the variants.
            if try Experiments.progress(db, id) != nil {
                throw CoreError(.conflict, "campaign \(id) is an A/B test: its variants' content cannot be changed (take it back, or cancel it and send another)")
            }
            let draft = change.applied(to: NotificationDraft(message: campaign.message, richType: campaign.richType, payload: campaign.payload.hex,
                                                             title: campaign.title, mode: campaign.mode, options: campaign.options))
            let locales = try Self.checkedLocales(draft, change.locales ?? campaign.locales, defaultLocale: campaign.defaultLocale)
            let base = try NotificationWriter(db, draft: draft, defaultImage: defaultImage, links: links, campaignId: id, now: now)
            try base.checkFitsEveryPlatform(db)
            var writers: [String: NotificationWriter] = ["": base]
            for (tag, content) in locales {
                let writer = try NotificationWriter(db, draft: Self.localized(draft, content), defaultImage: defaultImage, links: links,
                                                    campaignId: id, now: now)
                try writer.checkFitsEveryPlatform(db)
                writers[tag] = writer
            }
            let contentJSON = locales.isEmpty ? nil : String(decoding: try Self.sortedEncoder.encode(locales), as: UTF8.self)
            try db.execute(sql: """
                UPDATE campaigns SET message = ?, title = ?, payload = ?, options = ?, content = ?, localeNames = ?, changedAt = ? WHERE id = ?
                """, arguments: [base.message, base.title, base.media.id.hex, base.options.stored, contentJSON,
                                 locales.isEmpty ? nil : locales.keys.sorted().joined(separator: ","), now.timeIntervalSince1970, id])
            let repointed = base.media.id != campaign.payload
            let before = campaign.payload
            if repointed { try MediaIndex.addReference(db, id: base.media.id, owner: "campaign:\(id)", now: now) }
            (campaign.message, campaign.title, campaign.payload, campaign.options) = (base.message, base.title, base.media.id, base.options)
            (campaign.locales, campaign.localeNames, campaign.changedAt) = (locales, locales.keys.sorted(), now)
            var outcome = ChangeOutcome()
            let browsers = try Int.fetchOne(db, sql: "SELECT 1 FROM registrations WHERE platform = 'web' LIMIT 1") != nil
            let templates = CampaignTemplates.isTemplated(campaign) ? CampaignTemplates(campaignId: id) : nil
            var after: Int64 = 0
            while true {
                let batch = try SQLRow.fetchAll(db, sql: """
                    SELECT id, recipient FROM notifications WHERE campaignId = ? AND retractedAt IS NULL AND id > ? ORDER BY id LIMIT 500
                    """, arguments: [id, after])
                guard let last = batch.last else { break }
                after = last["id"]
                // Each recipient's locale now (and, for templates, what they see), as a batch being
                // queued reads them; words that are the same for everyone need neither.
                let people = templates == nil && locales.isEmpty ? [:]
                    : try CampaignTemplates.recipients(db, Array(Set(batch.map { $0["recipient"] as String })).sorted())
                for row in batch {
                    let (notification, name): (Int64, String) = (row["id"], row["recipient"])
                    let locale = Self.contentLocale(for: people[name]?.locale, locales: locales, defaultLocale: campaign.defaultLocale)
                    var writer = writers[locale ?? ""] ?? base
                    if let templates {
                        writer = CampaignTemplates.personalized(writer, templates.words(of: writer, for: people[name] ?? .init(name: name)))
                    }
                    do {
                        try writer.rewrite(db, id: notification, web: browsers)
                    } catch let error as CoreError where templates != nil {
                        throw CoreError(error.kind, "for \(name): \(error.message)")
                    }
                    if repointed { outcome.repointed.append(notification) }
                }
                outcome.notifications += batch.count
                try Revisions.replace(db, batch.map { $0["id"] as Int64 }, alertAgain: change.alertAgain, into: &outcome)
            }
            // The old image stays referenced while a notification taken back still names it
            // (those are not rewritten): unreferenced, collecting it would be refused.
            if repointed, try Int.fetchOne(db, sql: "SELECT 1 FROM notifications WHERE campaignId = ? AND payload = ? LIMIT 1",
                                           arguments: [id, before.hex]) == nil {
                try MediaIndex.removeReference(db, id: before, owner: "campaign:\(id)")
            }
            // Every node's index forgets the old image of each (it reads the new one when next asked).
            try NotificationStore.recordRemovals(db, outcome.repointed)
            try Audit.record(db, audit, "campaign.change", target: "campaign:\(id)", detail: change.auditDetail)
            return (try Self.progress(db, campaign: campaign, countedUpTo: countedUpTo), outcome)
        }
    }

    /// Takes campaign `id` back (docs/api.md#change-or-take-back-what-was-sent): nothing more
    /// is queued, pushes not yet sent are dropped, every inbox entry goes and its payload URLs
    /// answer 410, and each device that got it is sent a retraction (`Revisions.retract`),
    /// browsers showing `text` (default "This message was withdrawn") instead. In one
    /// transaction. 404 for no such campaign, 409 for one already taken back. `audit` records who
    /// did (`campaign.retract`).
    public func retract(_ id: Int64, text: String? = nil, now: Date = Date(), audit: AuditActor? = nil) async throws -> (CampaignProgress, RetractOutcome) {
        let text = try Revisions.retractedText(text)
        let countedUpTo = pendingCountedUpTo
        return try await database.write { db in
            var campaign = try Self.locked(db, id)
            if let retracted = campaign.retractedAt {
                throw CoreError(.conflict, "campaign \(id) was already taken back at \(retracted.formatted(.iso8601))")
            }
            let time = now.timeIntervalSince1970
            try db.execute(sql: """
                UPDATE campaigns SET retractedAt = ?, cancelledAt = coalesce(cancelledAt, ?), queued = 1, leaseUntil = NULL WHERE id = ?
                """, arguments: [time, time, id])
            campaign.retractedAt = now
            campaign.cancelledAt = campaign.cancelledAt ?? now
            campaign.queued = true
            var outcome = RetractOutcome()
            var after: Int64 = 0
            while true {
                let batch = try Int64.fetchAll(db, sql: """
                    SELECT id FROM notifications WHERE campaignId = ? AND retractedAt IS NULL AND id > ? ORDER BY id LIMIT 500
                    """, arguments: [id, after])
                guard let last = batch.last else { break }
                after = last
                try Revisions.retract(db, batch, text: text, into: &outcome)
            }
            try Audit.record(db, audit, "campaign.retract", target: "campaign:\(id)", detail: ["inboxes": .integer(Int64(outcome.inboxes))])
            return (try Self.progress(db, campaign: campaign, countedUpTo: countedUpTo), outcome)
        }
    }

    /// Campaign `id`, its row locked on PostgreSQL (SQLite has one writer); 404 when there is none.
    static func locked(_ db: SQLConnection, _ id: Int64) throws -> Campaign {
        let lock = db.dialect == .postgres ? "FOR UPDATE" : ""
        guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM campaigns WHERE id = ? \(lock)", arguments: [id]) else {
            throw CoreError(.notFound, "no campaign \(id)")
        }
        return try Self.campaign(row)
    }
}
