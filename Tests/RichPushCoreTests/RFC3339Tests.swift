import Foundation
@testable import RichPushCore
import RichPushTestSupport
import Testing

@Suite("Core: RFC 3339 date-times, read strictly (sendAt, audit since, Live Activities' dates)")
struct RFC3339Tests {
    @Test("what RFC 3339 allows is read to the instant: Z or an offset, t and z in either case, any fraction, leap days, the calendar's ends")
    func reads() throws {
        let cases: [(String, Double)] = [
            ("2026-11-29T10:00:00Z", 1_795_946_400),
            ("2026-11-29t10:00:00z", 1_795_946_400),
            ("2026-11-29T11:30:00+01:30", 1_795_946_400),
            ("2026-11-29T00:00:00-10:00", 1_795_946_400),
            ("2026-11-29T04:30:00-05:30", 1_795_946_400),
            ("2026-04-30T00:00:00Z", 1_777_507_200),
            ("2026-11-29T10:00:00-00:00", 1_795_946_400),
            ("2026-11-29T10:00:00.25Z", 1_795_946_400.25),
            ("2026-11-29T10:00:00.000000001Z", 1_795_946_400.000000001),
            ("1970-01-01T00:00:00Z", 0),
            ("1969-12-31T23:59:59Z", -1),
            ("2024-02-29T12:00:00Z", 1_709_208_000),
            ("2000-02-29T00:00:00Z", 951_782_400),
            ("2026-12-31T23:59:59+23:59", 1_798_675_259),
            ("0001-01-01T00:00:00Z", -62_135_596_800),
            ("9999-12-31T23:59:59Z", 253_402_300_799),
        ]
        // As long as is read (64 bytes: 43 digits of fraction), where ICU's parser died from 35.
        let longest = "2026-11-29T10:00:00.5" + String(repeating: "0", count: 42) + "Z"
        #expect(longest.utf8.count == RFC3339.maxLength)
        for (text, epoch) in cases + [(longest, 1_795_946_400.5)] {
            let date = try #require(RFC3339.date(text), "\(text)")
            #expect(abs(date.timeIntervalSince1970 - epoch) < 1e-6, "\(text): \(date.timeIntervalSince1970) vs \(epoch)")
            #expect(CampaignSchedule.rfc3339(text) == date)
        }
    }

    @Test("what Foundation's ISO8601DateFormatter took and RFC 3339 does not is refused: offsets without a colon or minutes, text after the zone, 24:00, 30 February, other scripts' digits, a leap second")
    func refuses() {
        for text in [
            "2026-11-29T10:00:00+0000", "2026-11-29T10:00:00+05", "2026-11-29T10:00:00Zjunk", "2026-11-29T10:00:00 Z",
            "2026-11-29T24:00:00Z", "2026-02-30T10:00:00Z", "2026-02-29T10:00:00Z", "1900-02-29T10:00:00Z",
            "2026-11-29T10:00:00+24:00", "2026-11-29T10:00:00+01:60", "٢٠٢٦-11-29T10:00:00Z", "2026-11-29T10:00:60Z",
            "2026-11-29T10:00Z", "2026-11-29 10:00:00Z", "2026-11-29T10:00:00", "2026-11-29T10:00:00.Z", "2026-11-29T10:00:00,5Z",
            "+2026-11-29T10:00:00Z", "20261129T100000Z", "0000-01-01T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-10T00:00:00Z",
            "2026-11-00T00:00:00Z", " 2026-11-29T10:00:00Z", "2026-11-29T10:00:00Z\n", "2026-11-29T10:00:00\u{0}Z", "",
            "2026-11-29T10:00:00." + String(repeating: "0", count: 60) + "Z",
            "2026-11-29T10:00:00.5" + String(repeating: "0", count: 43) + "Z", // 65 bytes
            "2026-04-31T00:00:00Z", "2026-06-31T00:00:00Z", "2100-02-29T00:00:00Z", "2026-11-29T10:00:00-5:30",
        ] {
            #expect(RFC3339.date(text) == nil, "\(text.debugDescription)")
        }
    }

    @Test("the same verdict as jsonschema's format: date-time (rfc3339-validator, which schemathesis checks with) on 3,000 texts near RFC 3339's, and the same instant as Python's datetime (scripts/rfc3339-reference.py)")
    func matchesJSONSchema() async throws {
        guard rfc3339ReferenceAvailable() else {
            #expect(ProcessInfo.processInfo.environment["RICHPUSH_REQUIRE_ENGINES"] != "1",
                    "the RFC 3339 reference needs rfc3339-validator (python3 -m pip install openapi-spec-validator)")
            return
        }
        let texts = Self.corpus(3000)
        let reference = try await onOwnThread { try rfc3339Reference(texts) }
        var valid = 0
        for (text, expected) in zip(texts, reference) {
            let ours = RFC3339.date(text)
            // Python's `$` also matches before a final newline, so the validator passes "…Z\n"; nothing follows a zone.
            if text.hasSuffix("\n") {
                #expect(ours == nil, "\(text.debugDescription)")
                continue
            }
            #expect((ours != nil) == expected.valid, "\(text.debugDescription): ours \(ours.map { "\($0.timeIntervalSince1970)" } ?? "refused"), jsonschema \(expected.valid)")
            guard let ours, let epoch = expected.epoch else { continue }
            valid += 1
            // To the microsecond, or a few units in the last place where those are coarser (9999 is 5e-5 s apart): a Date counts
            // from 2001, so one near 1970 is 1.2e-7 s apart.
            #expect(abs(ours.timeIntervalSince1970 - epoch) <= max(1e-6, 4 * epoch.ulp), "\(text): \(ours.timeIntervalSince1970) vs \(epoch)")
        }
        // The corpus is not all one kind: both verdicts, many times.
        #expect(valid > 900 && valid < 2100, "\(valid) valid of \(texts.count)")
    }

    /// `count` texts: RFC 3339 date-times, some with a field out of range, a separator or zone
    /// of another form, and some with a character changed, added or taken away.
    static func corpus(_ count: Int) -> [String] {
        var random = SeededGenerator(state: 20_261_129)
        func pick<T>(_ choices: [T]) -> T { choices[Int(random.next() % UInt64(choices.count))] }
        func two(_ range: ClosedRange<Int>) -> String { String(format: "%02d", Int.random(in: range, using: &random)) }
        var texts: [String] = []
        while texts.count < count {
            // Half are built from fields in range (a day past the month's end aside), half from any.
            let plain = random.next() % 2 == 0
            func field(_ good: [String], _ bad: [String]) -> String { plain || random.next() % 3 != 0 ? pick(good) : pick(bad) }
            let year = field(["0001", "1900", "1969", "1970", "2000", "2024", "2026", "2100", "9999", String(format: "%04d", Int.random(in: 1...9999, using: &random))],
                             ["0000", "226", "+2026", "٢٠٢٦"])
            let month = field([two(1...12)], ["00", "13", "2"])
            let day = field([two(1...28), two(1...28), "29", "30", "31"], ["00", "32", "1"])
            let time = "\(field([two(0...23)], ["24", "7"])):\(field([two(0...59)], ["60"])):\(field([two(0...59)], ["60", "5"]))"
            let fraction = field(["", "", "." + String((0..<Int.random(in: 1...12, using: &random)).map { _ in pick(Array("0123456789")) })], [".", ",5"])
            let zone = field(["Z", "z", "+00:00", "-00:00", "+\(two(0...23)):\(two(0...59))", "-\(two(0...23)):\(two(0...59))"],
                             ["+0000", "+05", "+24:00", "+01:60", "", " Z", "Zjunk"])
            let separator = field(["T", "t"], [" ", ""])
            var text = "\(year)-\(month)-\(day)\(separator)\(time)\(fraction)\(zone)"
            if !plain, random.next() % 3 == 0 {
                var characters = Array(text)
                let at = Int(random.next() % UInt64(characters.count))
                let stranger = pick(Array("0123456789TZtz+-:. \n٢x\u{0}é"))
                switch random.next() % 3 {
                case 0: characters[at] = stranger
                case 1: characters.insert(stranger, at: at)
                default: characters.remove(at: at)
                }
                text = String(characters)
            }
            texts.append(text)
        }
        return texts
    }
}
