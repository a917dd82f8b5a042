import Foundation
import MediaStore
import SQLEngine

/// Who a notification is for and who sent it: what decides who may change it or take it back.
public struct NotificationOwnership: Sendable, Equatable {
    public var recipient: String
    /// The user or key that made it; nil for a campaign's (its creator decides) and for one
    /// made before senders were kept (an admin's alone).
    public var sender: String?
    public var campaign: Int64?
    /// When it was taken back.
    public var retractedAt: Date?
}

extension NotificationStore {
    /// Notification `id`'s recipient, sender, campaign and retraction; nil when there is none.
    public func ownership(_ id: Int64) async throws -> NotificationOwnership? {
        try await database.read { db in
            try SQLRow.fetchOne(db, sql: "SELECT recipient, sender, campaignId, retractedAt FROM notifications WHERE id = ?", arguments: [id]).map {
                NotificationOwnership(recipient: $0["recipient"], sender: $0["sender"], campaign: $0["campaignId"],
                                      retractedAt: ($0["retractedAt"] as Double?).map(Date.init(timeIntervalSince1970:)))
            }
        }
    }

    /// The image notification `id` shows now (its payload URL names the one it was made with,
    /// which a change may have replaced); nil when there is no such notification, or it was
    /// taken back.
    public func servedPayload(_ id: Int64) async throws -> MediaID? {
        try await database.read { db in
            try String.fetchOne(db, sql: "SELECT payload FROM notifications WHERE id = ? AND retractedAt IS NULL", arguments: [id]).flatMap { MediaID($0) }
        }
    }

    /// Changes notification `id` (docs/api.md#change-or-take-back-what-was-sent), checked as a
    /// new one is (422 naming what is wrong): its inbox entry and payload URL show the new
    /// content, its pushes not yet sent carry it, and each device that got it gets a replacement.
    /// 404 for none, 409 for one taken back; a notification has no content per locale (400).
    /// `audit` records who did (`notification.change`, with the fields changed).
    public func change(_ id: Int64, _ change: ContentChange, defaultImage: String, now: Date = Date(), audit: AuditActor? = nil)
        async throws -> (notification: RichNotification, richUrl: String?, outcome: ChangeOutcome) {
        guard !change.isEmpty else { throw CoreError(.invalid, "give at least one of title, message, payload or options to change") }
        guard change.locales == nil else {
            throw CoreError(.invalid, "content (words per locale) is a campaign's; a notification has one title and message")
        }
        let links = self.links
        return try await database.write { db in
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT * FROM notifications WHERE id = ?", arguments: [id]),
                  let before = Self.notification(row) else { throw CoreError(.notFound, "no notification \(id)") }
            if let retracted = row["retractedAt"] as Double? {
                throw CoreError(.conflict, "notification \(id) was taken back at \(Date(timeIntervalSince1970: retracted).formatted(.iso8601)); it cannot be changed")
            }
            let draft = change.applied(to: NotificationDraft(message: before.message, richType: before.richType, payload: before.payload.hex,
                                                             title: before.title, mode: before.mode, options: PushOptions(stored: row["options"])))
            let writer = try NotificationWriter(db, draft: draft, defaultImage: defaultImage, links: links, campaignId: before.campaignId, now: now)
            let web = try Int.fetchOne(db, sql: "SELECT 1 FROM deliveries WHERE notificationId = ? AND platform = 'web' LIMIT 1", arguments: [id]) != nil
                || OutboxRuns.pushes(db, notifications: [id]).contains { $0["platform"] as String == "web" }
            let richUrl = try writer.rewrite(db, id: id, web: web)
            var outcome = ChangeOutcome()
            outcome.notifications = 1
            if writer.media.id != before.payload {
                try MediaIndex.removeReference(db, id: before.payload, owner: "notification:\(id)")
                try MediaIndex.addReference(db, id: writer.media.id, owner: "notification:\(id)", now: now)
                outcome.repointed = [id]
                try Self.recordRemovals(db, [id])
            }
            try Revisions.replace(db, [id], alertAgain: change.alertAgain, into: &outcome)
            try Audit.record(db, audit, "notification.change", target: "notification:\(id)", detail: change.auditDetail)
            var after = before
            (after.message, after.title, after.payload) = (writer.message, writer.title, writer.media.id)
            return (after, richUrl, outcome)
        }
    }

    /// Takes notification `id` back (docs/api.md#change-or-take-back-what-was-sent): its pushes
    /// not yet sent are dropped, it leaves the inbox, its payload URL answers 410, and each
    /// device that got it is sent a retraction, a browser showing `text` instead. 404 for none,
    /// 409 for one already taken back. `audit` records who did (`notification.retract`).
    public func retract(_ id: Int64, text: String? = nil, audit: AuditActor? = nil) async throws -> RetractOutcome {
        let text = try Revisions.retractedText(text)
        return try await database.write { db in
            guard let row = try SQLRow.fetchOne(db, sql: "SELECT retractedAt FROM notifications WHERE id = ?", arguments: [id]) else {
                throw CoreError(.notFound, "no notification \(id)")
            }
            if let retracted = row["retractedAt"] as Double? {
                throw CoreError(.conflict, "notification \(id) was already taken back at \(Date(timeIntervalSince1970: retracted).formatted(.iso8601))")
            }
            var outcome = RetractOutcome()
            try Revisions.retract(db, [id], text: text, into: &outcome)
            try Audit.record(db, audit, "notification.retract", target: "notification:\(id)")
            return outcome
        }
    }
}
