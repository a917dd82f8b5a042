import ArgumentParser
import Foundation
import MediaStore
import RichPushCore

struct NotifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notify",
        abstract: "Create a rich notification for a user and queue its silent push (as POST /api/notifications).",
        discussion: "A running `richpush serve` on the same data directory delivers the queued pushes.")

    @OptionGroup var dataOptions: DataOptions
    @OptionGroup var urlOptions: PayloadURLOptions
    @Option(help: "The recipient.") var user: String
    @Option(help: "The message shown first (default: \"Check this image out!\").") var message: String?
    @Option(help: "The alert's title (alert mode).") var title: String?
    @Option(help: "silent (the tutorial's background push) or alert (with mutable-content and a payload URL).") var mode: PushMode = .silent
    @Option(help: "A file to upload, or a media id or name (default: --default-image).") var image: String?
    @Option(help: "Media name used without --image (env RICHPUSH_DEFAULT_IMAGE).")
    var defaultImage: String = Environment.string("RICHPUSH_DEFAULT_IMAGE") ?? "logo.png"

    func run() async throws {
        let data = try await dataOptions.open()
        let payload = try await ImageArgument.payload(image, media: data.media)
        do {
            guard try await data.users.credentials(of: user) != nil else {
                throw CoreError(.notFound, "no user '\(user)'")
            }
            let links = try await urlOptions.links(data)
            let created = try await data.notifications(links: links).create(
                for: user, draft: NotificationDraft(message: message, payload: payload, title: title, mode: mode), defaultImage: defaultImage,
                audit: AuditActor.cli())
            let n = created.notification
            var object: [String: any Sendable] = ["id": n.id, "message": n.message, "richType": n.richType, "payload": n.payload.hex,
                                                  "read": n.read, "mode": n.mode.rawValue]
            if let url = created.richUrl { object["richUrl"] = url }
            if let title = n.title { object["title"] = title }
            print(JSONOut.line(object))
            if created.deliveries == 0 { Terminal.error("note: \(user) has no registered device; nothing will be pushed") }
        } catch let error as CoreError {
            Terminal.error("error: \(error.message)")
            throw ExitCode(1)
        }
    }
}

struct DeliveriesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliveries",
        abstract: "Show every push target of a notification (or of the recent ones): pending, sent, or failed with the reason.")

    @OptionGroup var dataOptions: DataOptions
    @Option(help: "Only this notification.") var notification: Int64?
    @Option(help: "Every delivery of this campaign.") var campaign: Int64?
    @Flag(help: "One JSON object per delivery.") var json = false
    @Option(help: "text, json (as --json) or csv: a header, then notification,registrationId,target,state,attempts,pushId,updated,reason (RFC 4180 quoting).")
    var format: String?

    private var csv: Bool { format == "csv" }

    func validate() throws {
        if notification != nil && campaign != nil { throw ValidationError("give --notification or --campaign, not both") }
        if let format, !["text", "json", "csv"].contains(format) { throw ValidationError("--format is text, json or csv") }
    }

    /// A CSV field: quoted when it holds a comma, a quote or a line break (quotes doubled); a
    /// field a spreadsheet would run as a formula (= + - @ first) gets a leading apostrophe.
    static func csvField(_ text: String) -> String {
        var text = text
        if let first = text.first, "=+-@\t\r".contains(first) { text = "'" + text }
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    func run() async throws {
        let data = try await dataOptions.open()
        let store = data.deliveries
        if let campaign {
            // A page at a time: a campaign may have a hundred thousand deliveries.
            var after: Int64 = 0
            var header = true
            while true {
                let page = try await store.list(campaign: campaign, after: after)
                guard let last = page.last else { break }
                show(page, header: header)
                header = false
                after = last.id
            }
            if header { try nothingToShow("campaign \(campaign)", why: try await emptyCampaign(campaign, data)) }
            return
        }
        let deliveries = try await store.list(notification: notification)
        guard !deliveries.isEmpty else {
            if let notification {
                try nothingToShow("notification \(notification)", why: try await emptyNotification(notification, data))
            }
            try nothingToShow(nil, why: "nothing has been queued yet")
        }
        show(deliveries, header: true)
    }

    /// An empty answer, said (docs/configuration.md#commands): a CSV still gets its header on
    /// stdout; stderr says there was nothing and why; exit 1.
    private func nothingToShow(_ of: String?, why: String?) throws -> Never {
        if csv { print("notification,registrationId,target,state,attempts,pushId,updated,reason") }
        Terminal.error("no deliveries" + (of.map { " for \($0)" } ?? "") + (why.map { ": \($0)" } ?? ""))
        throw ExitCode(1)
    }

    /// Why notification `id` has no deliveries.
    private func emptyNotification(_ id: Int64, _ data: DataStore) async throws -> String {
        guard let notification = try await data.notifications().created(id: id)?.0 else { return "there is no notification \(id)" }
        if let campaign = notification.campaignId {
            return "\(notification.recipient) had no registered device of the app of campaign \(campaign) when it was queued"
        }
        return "\(notification.recipient) had no registered device of its app when it was created"
    }

    /// Why campaign `id` has no deliveries.
    private func emptyCampaign(_ id: Int64, _ data: DataStore) async throws -> String? {
        guard let progress = try await data.campaigns(links: nil, defaultImage: "logo.png").progress(id) else { return "there is no campaign \(id)" }
        switch progress.status {
        case .scheduled: return "it is scheduled; its pushes are queued when it comes due (richpush campaigns list)"
        case .cancelled where progress.campaign.recipients == 0: return "it was cancelled before anything was queued"
        default:
            let c = progress.campaign
            guard c.recipients > 0 && c.devices == 0 else { return nil }
            let app = c.app.map { " of app \($0)" } ?? ""
            return c.recipients == 1 ? "its recipient had no registered device\(app)" : "none of its \(c.recipients) recipients had a registered device\(app)"
        }
    }

    private func show(_ deliveries: [Delivery], header: Bool) {
        let formatter = ISO8601DateFormatter()
        if header && csv && !deliveries.isEmpty {
            print("notification,registrationId,target,state,attempts,pushId,updated,reason")
        } else if header && !json && !csv && !deliveries.isEmpty {
            print("notification  target                                                            state    attempts  reason")
        }
        for d in deliveries {
            if csv {
                print([String(d.notificationId), d.registrationId ?? "", d.target, d.state.rawValue, String(d.attempts), d.pushId,
                       formatter.string(from: d.updatedAt), d.reason ?? ""].map(Self.csvField).joined(separator: ","))
            } else if json || format == "json" {
                var object: [String: any Sendable] = [
                    "notification": d.notificationId, "target": d.target, "state": d.state.rawValue, "attempts": d.attempts,
                    "pushId": d.pushId, "updated": formatter.string(from: d.updatedAt),
                ]
                if let reason = d.reason { object["reason"] = reason }
                if let registration = d.registrationId { object["registrationId"] = registration }
                print(JSONOut.line(object))
            } else {
                print("\(String(d.notificationId).padding(toLength: 13, withPad: " ", startingAt: 0)) \(d.target.padding(toLength: 65, withPad: " ", startingAt: 0)) \(d.state.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(String(d.attempts).padding(toLength: 9, withPad: " ", startingAt: 0)) \(d.reason ?? "")")
            }
        }
    }
}
