import ArgumentParser
import Foundation
import RichPushCore

/// `richpush campaigns list|cancel` (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries).
struct CampaignsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "campaigns",
        abstract: "List campaigns (scheduled, sending, done, cancelled) and cancel them.",
        subcommands: [List.self, Cancel.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The newest campaigns: id, status, schedule, counts.")
        @OptionGroup var dataOptions: DataOptions
        @Option(help: "At most this many.") var limit = 50
        @Flag(help: "A JSON array of {\"id\",\"status\",\"schedule\",\"recipients\",\"pending\",\"sent\",\"failed\",\"fetched\",\"audience\",\"created\"}.")
        var json = false

        func run() async throws {
            let data = try await dataOptions.open()
            let campaigns = data.campaigns(links: nil, defaultImage: "logo.png")
            let formatter = ISO8601DateFormatter()
            var objects: [[String: Any]] = []
            var rows: [[String]] = []
            for p in try await campaigns.list(limit: max(1, min(limit, 500))) {
                let c = p.campaign
                let schedule: String = switch c.schedule {
                case .at(let date)?: formatter.string(from: date)
                case .localTime(let time, let date)?: "\(time) local" + (date.map { " on \($0)" } ?? "")
                case nil: "now"
                }
                if json {
                    objects.append(["id": c.id, "status": p.status.rawValue, "schedule": schedule, "recipients": c.recipients,
                                    "pending": p.pending, "sent": p.sent, "failed": p.failed, "fetched": p.fetched,
                                    "audience": c.audience.summary, "created": formatter.string(from: c.createdAt)])
                } else {
                    rows.append([String(c.id), p.status.rawValue, schedule,
                                 "\(p.sent) sent, \(p.failed) failed, \(p.pending) pending of \(counted(c.recipients, "recipient"))", c.audience.summary])
                }
            }
            if json {
                print(JSONOut.array(objects))
            } else {
                ListTable.print(["ID", "STATUS", "SCHEDULE", "PROGRESS", "AUDIENCE"], rows, empty: "no campaigns yet: richpush send creates one")
            }
        }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cancel what has not been sent: nothing more is queued, pending pushes are dropped, sent ones stay sent.")
        @OptionGroup var dataOptions: DataOptions
        @Argument(help: "The campaign id.") var id: Int64

        func run() async throws {
            let data = try await dataOptions.open()
            do {
                let progress = try await data.campaigns(links: nil, defaultImage: "logo.png").cancel(id, audit: AuditActor.cli())
                print("campaign \(id) cancelled: \(progress.sent) sent, \(progress.failed) failed before it was")
            } catch let error as CoreError {
                Terminal.error("error: \(error.message)")
                throw ExitCode(1)
            }
        }
    }
}
