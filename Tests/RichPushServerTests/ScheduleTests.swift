import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import PushDelivery
@testable import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import Testing

@Suite("Schedules, cancel, locales, Idempotency-Key and strict bodies at the routes (SPEC §19)")
struct ScheduleTests {
    @Test("PUT /api/me sets a zone and a locale (400 for an unknown zone, a malformed tag or a field it does not have); a local-time campaign in several languages reaches each user at their 09:00, in their language; DELETE cancels the rest")
    func localTimeThroughTheAPI() async throws {
        let clock = NIOLockedValueBox(Date())
        let provider = AnsweringProvider()
        try await TestServer.run({ configuration in
            configuration.scheduleClock = { clock.withLockedValue { $0 } }
            configuration.scheduleInterval = .milliseconds(50)
        }, provider: provider) { s in
            let tokenAlice = String(repeating: "a", count: 64), tokenBob = String(repeating: "b", count: 64)
            _ = try await s.registerDevice(tokenAlice, as: "alice")
            _ = try await s.registerDevice(tokenBob, as: "bob")
            let (set, me) = try await s.json(.put, "/api/me", as: "alice", body: #"{"timezone":"Asia/Tokyo","locale":"fr_ca"}"#)
            #expect(set.status == .ok)
            #expect((me as? [String: Any])?["timezone"] as? String == "Asia/Tokyo" && (me as? [String: Any])?["locale"] as? String == "fr-CA")
            let bob = try await s.json(.get, "/api/me", as: "bob").1 as? [String: Any] ?? [:]
            #expect(bob["name"] as? String == "bob" && bob["admin"] as? Bool == false && bob["timezone"] as? String == "UTC" && bob["locale"] == nil && bob["topics"] as? [String] == [], "\(bob)")
            #expect(try await s.json(.put, "/api/me", as: "bob", body: #"{"timezone":"Mars/Olympus"}"#).0.status == .badRequest)
            #expect(try await s.json(.put, "/api/me", as: "bob", body: #"{"locale":"not a tag"}"#).0.status == .badRequest)
            let typo = try await s.json(.put, "/api/me", as: "bob", body: #"{"timezon":"Europe/Paris"}"#)
            #expect(typo.0.status == .badRequest && String(buffer: typo.0.body).contains("unknown field \\\"timezon\\\""))

            let body = #"{"audience":{"all":true},"localTime":"09:00","mode":"silent","content":{"en":{"title":"Sale","message":"Half price"},"fr":{"title":"Soldes","message":"Moitié prix"}}}"#
            let (made, campaign) = try await s.campaign(body)
            #expect(made.status == .accepted, "\(campaign)")
            #expect(campaign["status"] as? String == "scheduled" && campaign["localTime"] as? String == "09:00")
            #expect(campaign["locales"] as? [String] == ["en", "fr"] && campaign["defaultLocale"] as? String == "en")
            let id = try #require(campaign["id"] as? Int)
            let created = try #require(ISO8601DateFormatter().date(from: campaign["created"] as? String ?? ""))
            let schedule = CampaignSchedule.localTime(try LocalTime("09:00"), date: nil)
            let dueAlice = schedule.due(in: TimeZone(identifier: "Asia/Tokyo")!, createdAt: created)
            let dueBob = schedule.due(in: TimeZone(identifier: "UTC")!, createdAt: created)
            let (first, second) = dueAlice < dueBob ? ("alice", "bob") : ("bob", "alice")
            @Sendable func inbox(_ user: String) async throws -> [[String: Any]] {
                try await s.json(.get, "/api/notifications", as: user).1 as? [[String: Any]] ?? []
            }
            @Sendable func empty(_ user: String) async throws -> Bool { try await inbox(user).isEmpty }
            // Before anyone's 09:00: nothing; at the first zone's, that user alone, in their language.
            clock.withLockedValue { $0 = min(dueAlice, dueBob).addingTimeInterval(-1) }
            try await Task.sleep(for: .milliseconds(300))
            let (quietAlice, quietBob) = (try await empty("alice"), try await empty("bob"))
            #expect(quietAlice && quietBob)
            clock.withLockedValue { $0 = min(dueAlice, dueBob) }
            #expect(try await eventually { try await !empty(first) })
            #expect(try await empty(second))
            #expect(try await eventually { provider.sent.withLockedValue { $0.count } == 1 })
            let message = try await inbox(first).first?["message"] as? String
            #expect(message == (first == "alice" ? "Moitié prix" : "Half price"))
            #expect(try await s.campaignStatus(id)["status"] as? String == "sending")
            #expect(try await eventually { try await s.campaignStatus(id)["sent"] as? Int == 1 })

            // Cancelled before the second zone's 09:00: they never get it, the first keeps theirs.
            let (cancelled, after) = try await s.json(.delete, "/api/admin/campaigns/\(id)", as: "root")
            #expect(cancelled.status == .ok)
            #expect((after as? [String: Any])?["status"] as? String == "cancelled" && (after as? [String: Any])?["sent"] as? Int == 1)
            clock.withLockedValue { $0 = max(dueAlice, dueBob).addingTimeInterval(3600) }
            try await Task.sleep(for: .milliseconds(300))
            let untouched = try await empty(second)
            let kept = try await inbox(first).count
            #expect(untouched && kept == 1)
            #expect(try await s.json(.delete, "/api/admin/campaigns/\(id)", as: "alice").0.status == .forbidden)
            #expect(try await s.json(.delete, "/api/admin/campaigns/999", as: "root").0.status == .notFound)
        }
    }

    @Test("strict bodies: a field the server does not know is 400 naming it, and nothing is made; sendAt in the past, unreadable or beside localTime is 422")
    func strictBodies() async throws {
        try await TestServer.run { s in
            let (typo, _) = try await s.campaign(#"{"audience":{"all":true},"sendAtt":"2030-01-01T09:00:00Z"}"#)
            #expect(typo.status == .badRequest && String(buffer: typo.body).contains("unknown field \\\"sendAtt\\\""), "\(String(buffer: typo.body))")
            let (nested, _) = try await s.campaign(#"{"audience":{"all":true},"content":{"en":{"message":"Hi","body":"x"}}}"#)
            #expect(nested.status == .badRequest && String(buffer: nested.body).contains("content.en.body"), "\(String(buffer: nested.body))")
            #expect(try await s.json(.post, "/api/notifications", as: "alice", body: #"{"titel":"x"}"#).0.status == .badRequest)
            #expect((try await s.json(.get, "/api/admin/campaigns", as: "root").1 as? [Any])?.count == 0)
            #expect((try await s.json(.get, "/api/notifications", as: "alice").1 as? [Any])?.count == 0)
            #expect(try await s.campaign(#"{"audience":{"all":true},"sendAt":"2020-01-01T09:00:00Z"}"#).0.status == .unprocessableContent)
            #expect(try await s.campaign(#"{"audience":{"all":true},"sendAt":"2030-01-01T09:00:00Z","localTime":"09:00"}"#).0.status == .unprocessableContent)
            #expect(try await s.campaign(#"{"audience":{"all":true},"sendAt":"tomorrow"}"#).0.status == .unprocessableContent)
            // Not RFC 3339, though Foundation's ISO8601DateFormatter read them; sixty digits of fraction
            // killed the server (SIGFPE in ICU's date parser) before sendAt was read strictly (RFC3339Tests).
            let later = ISO8601DateFormatter().string(from: Date().addingTimeInterval(86_400)).dropLast() // without its Z
            for sendAt in ["\(later)+0100", "\(later)Zjunk", "\(later).\(String(repeating: "0", count: 60))Z"] {
                let (refused, _) = try await s.campaign(#"{"audience":{"all":true},"sendAt":"\#(sendAt)"}"#)
                #expect(refused.status == .unprocessableContent && String(buffer: refused.body).contains("RFC 3339"), "\(sendAt): \(String(buffer: refused.body))")
            }
            #expect(try await s.request(.get, "/health").status == .ok)
            let (precise, _) = try await s.campaign(#"{"audience":{"all":true},"sendAt":"\#(later).\#(String(repeating: "0", count: 40))Z"}"#)
            #expect(precise.status == .accepted, "\(String(buffer: precise.body))")
            // Key case is still free at the top level, as the tutorial's bodies need.
            let at = Date().addingTimeInterval(30 * 86_400)
            let local = ISO8601DateFormatter.string(from: at, timeZone: TimeZone(secondsFromGMT: 3600)!, formatOptions: [.withInternetDateTime])
            let (scheduled, made) = try await s.campaign(#"{"Audience":{"all":true},"SendAt":"\#(local)"}"#)
            #expect(scheduled.status == .accepted && made["sendAt"] as? String == ISO8601DateFormatter().string(from: at), "\(local) \(made)")
            #expect(made["status"] as? String == "scheduled")
            #expect(try await s.campaign(#"{"audience":{"all":true},"sendAt":"2030-01-01T09:00:00Z"}"#).0.status == .unprocessableContent) // over a year
        }
    }

    @Test("Idempotency-Key: a repeat answers the first's notification or campaign (Idempotent-Replayed) and makes nothing; another body is 422")
    func idempotency() async throws {
        try await TestServer.run { s in
            func post(_ path: String, as user: String, key: String, _ body: String) async throws -> (TestResponse, [String: Any]) {
                let response = try await s.request(.post, path, as: user, headers: [.contentType: "application/json", HTTPField.Name("Idempotency-Key")!: key],
                                                   body: Array(body.utf8))
                return (response, (try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]) ?? [:])
            }
            let (first, made) = try await post("/api/notifications", as: "alice", key: "order-17", #"{"message":"Shipped"}"#)
            let (again, replay) = try await post("/api/notifications", as: "alice", key: "order-17", #"{"message":"Shipped"}"#)
            #expect(first.status == .created && again.status == .created && made["id"] as? Int == replay["id"] as? Int)
            #expect(again.headers[HTTPField.Name("Idempotent-Replayed")!] == "true" && first.headers[HTTPField.Name("Idempotent-Replayed")!] == nil)
            #expect((try await s.json(.get, "/api/notifications", as: "alice").1 as? [Any])?.count == 1)
            #expect(try await post("/api/notifications", as: "alice", key: "order-17", #"{"message":"Other"}"#).0.status == .unprocessableContent)
            // Another caller's key of the same name is theirs.
            #expect(try await post("/api/notifications", as: "bob", key: "order-17", #"{"message":"Shipped"}"#).0.status == .created)

            let (c1, campaign) = try await post("/api/admin/campaigns", as: "root", key: "spring", #"{"audience":{"all":true}}"#)
            let (c2, same) = try await post("/api/admin/campaigns", as: "root", key: "spring", #"{"audience":{"all":true}}"#)
            #expect(c1.status == .accepted && c2.status == .accepted && campaign["id"] as? Int == same["id"] as? Int)
            #expect(c2.headers[.location] == "/api/admin/campaigns/\(campaign["id"] as? Int ?? 0)")
            #expect((try await s.json(.get, "/api/admin/campaigns", as: "root").1 as? [Any])?.count == 1)
            #expect(try await post("/api/admin/campaigns", as: "root", key: String(repeating: "k", count: 256), #"{"audience":{"all":true}}"#).0.status == .badRequest)
        }
    }
}
