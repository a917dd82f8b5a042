import ArgumentParser
import Foundation
import MediaStore
import RichPushCore

#if canImport(Glibc)
import Glibc
#endif

/// `richpush benchmark-schedule` (hidden; bench/schedule.sh runs it): a local-time campaign to
/// N users spread over time zones, on a scratch data directory it makes, with the scheduler's
/// clock moved through the day instead of waiting for it. Prints how long scheduling took (the
/// POST's work, then every zone's queueing) and the process's resident memory as it went.
struct ScheduleBenchmarkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "benchmark-schedule", abstract: "Benchmark: queue a local-time campaign to N users zone by zone.", shouldDisplay: false)

    @Option(help: "Recipients (each with one device).") var users = 100_000
    @Option(help: "A scratch directory (emptied first).") var work: String
    @Option(help: "PostgreSQL URL for the index instead of SQLite (a database of its own).") var database: String?

    /// Zones on both sides of the date line, with and without DST.
    static let zones = ["Pacific/Kiritimati", "Pacific/Auckland", "Australia/Sydney", "Asia/Tokyo", "Asia/Shanghai", "Asia/Kolkata", "Asia/Dubai",
                        "Europe/Moscow", "Europe/Athens", "Europe/Paris", "Europe/London", "UTC", "Atlantic/Azores", "America/Sao_Paulo",
                        "America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles", "Pacific/Honolulu", "Pacific/Pago_Pago"]

    /// Resident set size now and at its peak (VmRSS, VmHWM), in MiB.
    static func memory() -> (rss: Double, peak: Double) {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Double {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
            return (Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) / 1024
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    func run() async throws {
        try? FileManager.default.removeItem(atPath: work)
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let data = try await DataStore.open(path: work, database: database)
        defer { data.close() }
        let logo = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("media/logo.png").path
        _ = try await data.media.ingest(file: logo, name: "logo.png")
        // Users: a cheap cost-4 hash given as is (no bcrypt per user), a zone each, a device each.
        let hash = "$2b$04$" + String(repeating: "a", count: 53)
        let names = (0..<users).map { String(format: "u%07d", $0) }
        for chunk in stride(from: 0, to: names.count, by: 5_000).map({ names[$0..<min($0 + 5_000, names.count)] }) {
            _ = try await data.users(cost: 4).importUsers(chunk.enumerated().map { offset, name in
                .init(name: name, secret: .bcrypt(hash), admin: false, timezone: Self.zones[(Int(name.dropFirst()) ?? offset) % Self.zones.count])
            })
        }
        for chunk in stride(from: 0, to: names.count, by: 5_000).map({ names[$0..<min($0 + 5_000, names.count)] }) {
            try await data.registrations.importDevices(chunk.map { (user: $0, platform: "apns", handle: String(format: "%064x", Int($0.dropFirst()) ?? 0)) })
        }
        let before = Self.memory()
        let campaigns = data.campaigns(links: nil, defaultImage: "logo.png")
        let created = Date()
        let date = ISO8601DateFormatter.string(from: created.addingTimeInterval(2 * 86_400), timeZone: TimeZone(identifier: "UTC")!,
                                               formatOptions: [.withFullDate])
        let schedule = CampaignSchedule.localTime(try LocalTime("09:00"), date: try LocalDate(date))
        let start = ContinuousClock.now
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "Good morning"), schedule: schedule),
                                                  by: "bench", now: created)
        let posted = ContinuousClock.now - start
        // The day, zone by zone: each run queues the zones whose 09:00 has come.
        var dues = Self.zones.map { schedule.due(in: TimeZone(identifier: $0)!, createdAt: created) }.sorted()
        dues.append(schedule.last(createdAt: created))
        var queueing = Swift.Duration.zero
        var peakDuring = 0.0
        for due in dues {
            let tick = ContinuousClock.now
            try await campaigns.runDue(now: due, addressing: .perDevice)
            queueing += ContinuousClock.now - tick
            peakDuring = max(peakDuring, Self.memory().rss)
        }
        let after = Self.memory()
        guard let progress = try await campaigns.progress(campaign.id) else { throw ExitCode(1) }
        let seconds = { (d: Swift.Duration) in Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
        print(String(format: "schedule: %d recipients in %d zones (%@): create %.3f s, queueing %.2f s (%.0f recipients/s); recipients %d, devices %d, pending %d; RSS before %.0f MiB, during at most %.0f MiB, after %.0f MiB (peak of the process %.0f MiB)",
                     users, Self.zones.count, database == nil ? "SQLite" : "PostgreSQL", seconds(posted), seconds(queueing),
                     Double(progress.campaign.recipients) / max(seconds(queueing), 0.001), progress.campaign.recipients, progress.campaign.devices,
                     progress.pending, before.rss, peakDuring, after.rss, after.peak))
        guard progress.campaign.queued, progress.campaign.recipients == users else {
            Terminal.error("error: the campaign reached \(progress.campaign.recipients) of \(users) recipients")
            throw ExitCode(1)
        }
    }
}
