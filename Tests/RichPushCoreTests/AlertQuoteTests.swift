import Foundation
@testable import RichPushCore
import Testing

/// Alert pushes quote their strings by hand: the bytes must be exactly `JSONEncoder`'s, the
/// encoder they replaced (devices, hubs and this project's own tests compare payloads byte for byte).
@Suite("JSON strings in alert pushes")
struct AlertQuoteTests {
    static func encoder(_ text: String) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return String(decoding: try! encoder.encode(text), as: UTF8.self)
    }

    @Test("every ASCII character alone and between others, Latin-1, the line separators, emoji, combining marks and random mixes quote as JSONEncoder quotes them")
    func quoteMatchesEncoder() throws {
        var samples = (0..<0x80).map { String(UnicodeScalar(UInt8($0))) }
        samples += (0..<0x80).map { "a\(UnicodeScalar(UInt8($0)))b" }
        samples += ["", "plain", "20% off / today", "é", "\u{80}\u{9F}\u{A0}\u{FF}", "\u{2028}\u{2029}", "👍🏽 🇫🇷", "e\u{301}",
                    "\u{7F}", "\u{FEFF}", "\u{10FFFF}", "\"\\\"\\", "</script>"]
        let pool: [Character] = ["a", "\"", "\\", "\n", "\t", "\u{1}", "\u{1F}", "é", "👍", "/", " ", "\u{7F}", "\u{2028}"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            samples.append(String((0..<Int.random(in: 1...20, using: &generator)).map { _ in pool.randomElement(using: &generator)! }))
        }
        for text in samples {
            #expect(AlertPush.quote(text) == Self.encoder(text), "\(Array(text.unicodeScalars.map(\.value)))")
        }
    }

    @Test("an alert push with awkward strings is JSON whose values read back")
    func encodedReadsBack() throws {
        let title = "Tab\there \"now\"", message = "Line\nbreak \\ é 👍 \u{1}"
        let push = AlertPush(id: 42, title: title, message: message, richType: "img", richUrl: "https://push.example.com/p/x")
        let object = try #require(try JSONSerialization.jsonObject(with: push.encoded()) as? [String: Any])
        let aps = try #require(object["aps"] as? [String: Any])
        let alert = try #require(aps["alert"] as? [String: Any])
        #expect(alert["title"] as? String == title && alert["body"] as? String == message)
        #expect(object["richMessage"] as? String == message && object["richId"] as? String == "42")
        #expect(object["richUrl"] as? String == "https://push.example.com/p/x")
    }
}
