import Foundation
import SQLEngine
import MediaStore
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Core: frequency caps and quiet hours (SPEC §28)")
struct GuardrailCoreTests {
    /// Python's zoneinfo's answer for each window and instant (`scripts/quiet-hours-reference.py`): when it ends, nil outside.
    static func reference(zone: String, windows: [(String, String)], instants: [Double]) throws -> [[Double?]] {
        let asked = try JSONSerialization.data(withJSONObject: [
            "zone": zone, "windows": windows.map { ["from": $0.0, "to": $0.1] }, "instants": instants,
        ] as [String: Any])
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("quiet-\(UUID().uuidString).json")
        try asked.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let script = Fixtures.packageRoot.appendingPathComponent("scripts/quiet-hours-reference.py").path
        let (status, output) = try runCapturing("/usr/bin/env", ["python3", script, file.path])
        try #require(status == 0, "\(output)")
        let answers = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[Any]])
        return answers.map { $0.map { $0 as? Double } }
    }

    static func epoch(_ text: String) -> Double { try! Date(text, strategy: .iso8601).timeIntervalSince1970 }

    @Test("a window's end in wall-clock time across both daylight-saving changes of America/New_York, a skipped and a repeated to included, as zoneinfo reads it (a repeated to: the first after the instant)")
    func windowsAgainstZoneinfo() throws {
        let zone = "America/New_York"
        let windows = [("22:00", "08:00"), ("01:00", "01:30"), ("00:30", "02:30"), ("23:00", "01:15"), ("09:00", "17:00")]
        // Every 7 minutes (not a divisor of an hour: readings fall on and around every minute)
        // through the nights clocks go back (2026-11-01) and forward (2026-03-08), and on the edges.
        var instants: [Double] = []
        for (start, end) in [("2026-10-31T12:00:00Z", "2026-11-02T18:00:00Z"), ("2026-03-07T12:00:00Z", "2026-03-09T18:00:00Z")] {
            instants += Array(stride(from: Self.epoch(start), to: Self.epoch(end), by: 420))
        }
        instants += [Self.epoch("2026-11-01T13:00:00Z"), Self.epoch("2026-11-01T12:59:59Z"), Self.epoch("2026-11-01T02:00:00Z"),
                     Self.epoch("2026-11-01T05:30:00Z"), Self.epoch("2026-11-01T06:30:00Z"), Self.epoch("2026-03-08T07:00:00Z")]
        let expected = try Self.reference(zone: zone, windows: windows, instants: instants)
        let timeZone = try #require(TimeZone(identifier: zone))
        var inside = 0
        for (w, window) in windows.enumerated() {
            let quiet = try QuietHours(from: LocalTime(window.0), to: LocalTime(window.1))
            for (i, instant) in instants.enumerated() {
                let ours = quiet.end(containing: Date(timeIntervalSince1970: instant), in: timeZone)?.timeIntervalSince1970
                #expect(ours == expected[w][i], "\(window) at \(Date(timeIntervalSince1970: instant)): ours \(ours.map { Date(timeIntervalSince1970: $0).description } ?? "nil"), zoneinfo \(expected[w][i].map { Date(timeIntervalSince1970: $0).description } ?? "nil")")
                if ours != nil { inside += 1 }
            }
        }
        #expect(inside > 500)
        // The night clocks go back, 22:00–08:00 lasts 11 hours; the night they go forward, 9.
        let overnight = try QuietHours("22:00-08:00")
        #expect(overnight.end(containing: Date(timeIntervalSince1970: Self.epoch("2026-11-01T02:00:00Z")), in: timeZone)?.timeIntervalSince1970
                == Self.epoch("2026-11-01T13:00:00Z"))
        #expect(overnight.end(containing: Date(timeIntervalSince1970: Self.epoch("2026-03-08T03:00:00Z")), in: timeZone)?.timeIntervalSince1970
                == Self.epoch("2026-03-08T12:00:00Z"))
        // 01:10 the second time (EST, after the clocks went back): the window ends at the 01:30 still to come, never one past.
        let repeated = try QuietHours("01:00-01:30")
        #expect(repeated.end(containing: Date(timeIntervalSince1970: Self.epoch("2026-11-01T06:10:00Z")), in: timeZone)?.timeIntervalSince1970
                == Self.epoch("2026-11-01T06:30:00Z"))
        #expect(repeated.end(containing: Date(timeIntervalSince1970: Self.epoch("2026-11-01T05:10:00Z")), in: timeZone)?.timeIntervalSince1970
                == Self.epoch("2026-11-01T05:30:00Z"))
    }

    @Test("caps, periods and windows as written; bad ones refused naming the field")
    func parsing() throws {
        let cap = try FrequencyCap("3/24h")
        #expect(cap.max == 3 && cap.per == 86_400 && cap.description == "3/1d")
        #expect(try FrequencyCap("10/90m").per == 5_400)
        for bad in ["0/24h", "3", "3/24", "3/0h", "1001/1d", "3/31d", "x/1d", "3/-1h"] {
            #expect(throws: CoreError.self, "\(bad)") { try FrequencyCap(bad) }
        }
        let quiet = try QuietHours("21:30-07:00/drop")
        let reread = try QuietHours(quiet.stored)
        #expect(quiet.mode == .drop && quiet.stored == "21:30-07:00/drop" && reread == quiet)
        for bad in ["22:00-22:00", "22:00", "25:00-08:00", "22:00-08:00/never"] {
            #expect(throws: CoreError.self, "\(bad)") { try QuietHours(bad) }
        }
        #expect(throws: CoreError.self) { try QuietHours(json: ["from": "22:00", "to": "08:00", "mood": "x"], field: "quietHours") }
    }

    /// A campaign to `names`, its pushes claimed (without guardrails) and returned.
    static func claimedCampaign(_ f: CoreFixture, _ store: CampaignStore, limits: Bool = true, options: PushOptions = PushOptions()) async throws -> [DeliveryJob] {
        let campaign = try await store.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "m", title: "t", mode: .alert, options: options),
                                                            limits: limits), by: "admin")
        _ = try await store.queue(campaign.id, addressing: .perDevice)
        let jobs = try await OutboxStore(database: f.database).claim(limit: 10_000, lease: 3_600, holder: OutboxHolder(pid: 1))
        return jobs.filter { $0.campaignId == campaign.id }
    }

    @Test("quiet hours across the night clocks go back: exactly the pushes whose instant is in a user's window are delayed, to its end spread by user, as zoneinfo says; the rest go")
    func delaysAcrossDaylightSaving() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(150)
        try await f.registerDevices(names)
        try await f.database.write { db in try db.execute(sql: "UPDATE users SET timezone = 'America/New_York'") }
        let guardrails = Guardrails(apps: [AppName.default: AppLimits(quietHours: try QuietHours("22:00-08:00"))])
        var jobs = try await Self.claimedCampaign(f, f.campaigns())
        jobs.sort { $0.recipient! < $1.recipient! }
        try #require(jobs.count == 150)
        // One push every 20 minutes from 2026-10-31 20:00 to 2026-11-02 01:40 UTC, each screened at its instant.
        let instants = jobs.indices.map { Self.epoch("2026-10-31T20:00:00Z") + Double($0) * 1_200 }
        let expected = try Self.reference(zone: "America/New_York", windows: [("22:00", "08:00")], instants: instants)[0]
        var sent: [Int] = []
        for (index, var job) in jobs.enumerated() {
            job.expiresAt = nil  // lives past every simulated instant
            let screened = job, instant = instants[index]
            let result = try await f.database.write { db in try guardrails.screen(db, [screened], now: instant) }
            let (passed, heldBack) = (result.jobs, result.heldBack)
            if passed.count == 1 { sent.append(index) } else { #expect(heldBack.map(\.outcome) == [.delayed]) }
        }
        let inWindow = expected.indices.filter { expected[$0] != nil }
        #expect(Set(sent) == Set(expected.indices).subtracting(inWindow))
        #expect(inWindow.count > 40 && sent.count > 40, "\(inWindow.count) in the window, \(sent.count) sent")
        let due = try await f.database.read { db in
            Dictionary(uniqueKeysWithValues: try SQLRow.fetchAll(db, sql: "SELECT id, nextAttemptAt, reason FROM deliveries").map { ($0["id"] as Int64, ($0["nextAttemptAt"] as Double, $0["reason"] as String?)) })
        }
        for index in inWindow {
            let job = jobs[index]
            let spread = Double(Guardrails.stableHash(job.recipient!) % UInt64(Guardrails.spread))
            #expect(due[job.id]?.0 == expected[index]! + spread, "\(job.recipient!)")
            #expect(due[job.id]?.1 == Guardrails.quietReason)
        }
        // Spread over the first minutes, not at one second.
        #expect(Set(inWindow.map { due[jobs[$0].id]!.0 }).count > inWindow.count / 2)
        let stats = try #require(try await f.campaigns().stats(jobs[0].campaignId!))
        #expect(stats.totals.delayed == inWindow.count)
    }

    @Test("a campaign counted again once its window has passed (a retry, a second device) is counted at its new time: the next campaign within the window is capped")
    func recountedAfterWindow() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        try await f.registerDevices(try await f.importUsers(1))
        let guardrails = Guardrails(apps: [AppName.default: AppLimits(frequencyCap: try FrequencyCap("1/1h"))])
        let store = f.campaigns()
        let now = Date().timeIntervalSince1970
        let first = try await Self.claimedCampaign(f, store)
        #expect(try await f.database.write { db in try guardrails.screen(db, first, now: now) }.jobs.count == 1)
        // An hour and a second later the first campaign's push once more: it goes, counted anew.
        #expect(try await f.database.write { db in try guardrails.screen(db, first, now: now + 3601) }.jobs.count == 1)
        let window = try await f.database.read { db in try String.fetchOne(db, sql: "SELECT sends FROM frequency_windows") }
        #expect(window == "\(first[0].campaignId!):\(Int64(now + 3601))")
        let second = try await Self.claimedCampaign(f, store)
        let result = try await f.database.write { db in try guardrails.screen(db, second, now: now + 3602) }
        #expect(result.jobs.isEmpty && result.heldBack.map(\.outcome) == [.capped])
    }

    @Test("a cap of 3 a day: a user's fourth campaign is capped, a second device of a counted campaign is not counted again; a campaign with limits false, a time-sensitive push and a user's own quiet hours (drop) behave as SPEC says")
    func capsAndBypass() async throws {
        let f = try await CoreFixture()
        defer { f.cleanup() }
        let names = try await f.importUsers(2)
        try await f.registerDevices(names + names)  // two devices each
        let guardrails = Guardrails(apps: [AppName.default: AppLimits(frequencyCap: try FrequencyCap("3/24h"))])
        let store = f.campaigns()
        let now = Date().timeIntervalSince1970
        var passed = 0, capped = 0, fourth: Int64 = 0
        for round in 0..<5 {
            let jobs = try await Self.claimedCampaign(f, store)
            if round == 3 { fourth = jobs[0].campaignId! }
            #expect(jobs.count == 4)
            let result = try await f.database.write { db in try guardrails.screen(db, jobs, now: now + Double(round)) }
            let (sent, held) = (result.jobs, result.heldBack)
            passed += sent.count
            capped += held.count
            #expect(held.allSatisfy { $0.outcome == .capped })
        }
        // Three campaigns reach both devices of both users; the fourth and fifth are capped.
        #expect(passed == 12 && capped == 8)
        let capCampaign = fourth
        let reasons = try await f.database.read { db in
            try String.fetchAll(db, sql: "SELECT reason FROM deliveries WHERE campaignId = ?", arguments: [capCampaign])
        }
        #expect(reasons.count == 4 && reasons.allSatisfy { $0.hasPrefix("capped: over app default's frequency cap of 3/1d") }, "\(reasons)")
        let fourthStats = try #require(try await store.stats(fourth))
        #expect(fourthStats.totals.capped == 4 && fourthStats.totals.failed == 0 && fourthStats.totals.sent == 0)
        // A campaign whose pushes were all held back is done: a claim finishes it after its commit
        // (the server test); the screen alone is a process stopped in between, which the sweep mends.
        #expect(try await store.progress(fourth)?.status == .done)
        let doneAt = { try await f.database.read { db in try Double.fetchOne(db, sql: "SELECT doneAt FROM campaigns WHERE id = ?", arguments: [capCampaign]) } }
        #expect(try await doneAt() == nil)
        #expect(try await store.finishStragglers().contains(fourth))
        #expect(try await doneAt() != nil)
        #expect(try await store.finishStragglers().isEmpty)
        // A day later the window has moved on.
        let later = try await Self.claimedCampaign(f, store)
        #expect(try await f.database.write { db in try guardrails.screen(db, later, now: now + 86_410) }.jobs.count == 4)
        // limits false and time-sensitive pushes pass whatever the cap says.
        let unlimited = try await Self.claimedCampaign(f, store, limits: false)
        #expect(try await f.database.write { db in try guardrails.screen(db, unlimited, now: now + 86_411) }.jobs.count == 4)
        let urgent = try await Self.claimedCampaign(f, store, options: PushOptions(interruptionLevel: .timeSensitive))
        #expect(try await f.database.write { db in try guardrails.screen(db, urgent, now: now + 86_412) }.jobs.count == 4)
        // A user's own quiet hours, with drop, in a window that covers now in UTC: their pushes fail, the other user's go (their second of the day).
        let hour = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: Date(timeIntervalSince1970: now + 86_413)).hour!
        let own = try QuietHours(from: LocalTime(String(format: "%02d:00", hour)), to: LocalTime(String(format: "%02d:00", (hour + 2) % 24)), mode: .drop)
        _ = try await f.users.setPreferences(names[0], timezone: nil, locale: nil, quietHours: .some(own))
        let quiet = try await Self.claimedCampaign(f, store)
        let result = try await f.database.write { db in try guardrails.screen(db, quiet, now: now + 86_413) }
        let (sent, held) = (result.jobs, result.heldBack)
        #expect(sent.count == 2 && sent.allSatisfy { $0.recipient == names[1] })
        #expect(held.count == 2 && held.allSatisfy { $0.outcome == .dropped })
        let dropped = try await f.database.read { db in
            try String.fetchAll(db, sql: "SELECT reason FROM deliveries WHERE campaignId = ? AND state = 'failed'", arguments: [quiet[0].campaignId!])
        }
        #expect(dropped.count == 2 && dropped.allSatisfy { $0.hasPrefix("quiet hours: dropped") }, "\(dropped)")
        let stats = try #require(try await store.stats(quiet[0].campaignId!))
        #expect(stats.totals.failed == 2 && stats.totals.capped == 0 && stats.failures["quiet hours"] == 2)
    }
}
