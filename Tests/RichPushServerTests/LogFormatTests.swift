import Foundation
import Logging
import NIOConcurrencyHelpers
@testable import RichPushAPI
@testable import RichPushServer
import Testing

@Suite("Log lines: logfmt text and JSON (SPEC §14)")
struct LogFormatTests {
    /// A logger writing into an array, and the array.
    func logger(_ format: LogFormat) -> (Logger, NIOLockedValueBox<[String]>) {
        let lines = NIOLockedValueBox<[String]>([])
        let logger = Logger(label: "test.logger") { label in
            RichPushLogHandler(label: label, level: .info, format: format) { line in lines.withLockedValue { $0.append(line) } }
        }
        return (logger, lines)
    }

    static let awkward = "a \"quoted\" value\\with = and\nnew line, tab\t, é and \u{1}"

    /// Parses one logfmt line into its pairs (quoted values unescaped as JSON strings).
    func logfmt(_ line: String) throws -> [String: String] {
        var pairs: [String: String] = [:]
        var rest = Substring(line.trimmingCharacters(in: .newlines))
        while !rest.isEmpty {
            let key = rest.prefix { $0 != "=" }
            rest = rest.dropFirst(key.count + 1)
            if rest.first == "\"" {
                var end = rest.index(after: rest.startIndex)
                while rest[end] != "\"" { end = rest.index(after: rest[end] == "\\" ? rest.index(after: end) : end) }
                let literal = String(rest[...end])
                pairs[String(key)] = try JSONDecoder().decode(String.self, from: Data(literal.utf8))
                rest = rest[rest.index(after: end)...]
            } else {
                let value = rest.prefix { $0 != " " }
                pairs[String(key)] = String(value)
                rest = rest.dropFirst(value.count)
            }
            rest = rest.drop { $0 == " " }
        }
        return pairs
    }

    @Test("text is logfmt: time, level, logger, msg, then metadata by key; awkward values quoted and escaped so they read back")
    func text() throws {
        let (logger, lines) = logger(.text)
        logger.info("hello there", metadata: ["zeta": "1", "alpha": .string(Self.awkward), "list": ["x", "y"], "empty": ""])
        logger.debug("below the level")
        let written = lines.withLockedValue { $0 }
        #expect(written.count == 1)
        let line = try #require(written.first)
        #expect(line.hasSuffix("\n") && line.dropLast().contains("\n") == false)
        #expect(line.hasPrefix("time="))
        let pairs = try logfmt(line)
        #expect(pairs["level"] == "info" && pairs["logger"] == "test.logger" && pairs["msg"] == "hello there")
        #expect(pairs["alpha"] == Self.awkward)
        #expect(pairs["zeta"] == "1" && pairs["empty"] == "" && pairs["list"] == #"["x","y"]"#)
        let keys = line.split(separator: " ").compactMap { $0.split(separator: "=").first.map(String.init) }.filter { ["alpha", "empty", "list", "zeta"].contains($0) }
        #expect(keys == ["alpha", "empty", "list", "zeta"])
    }

    @Test("json is one object per line with the same fields; nested metadata stays nested")
    func json() throws {
        let (logger, lines) = logger(.json)
        logger.warning("odd \"message\"", metadata: ["alpha": .string(Self.awkward), "nested": ["k": ["v", "w"]]])
        let line = try #require(lines.withLockedValue { $0 }.first)
        #expect(line.hasSuffix("}\n") && line.dropLast().contains("\n") == false)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["level"] as? String == "warning" && object["logger"] as? String == "test.logger")
        #expect(object["msg"] as? String == "odd \"message\"")
        #expect(object["alpha"] as? String == Self.awkward)
        #expect((object["nested"] as? [String: [String]]) == ["k": ["v", "w"]])
        #expect(ISO8601DateFormatter().date(from: object["time"] as? String ?? "") != nil)
    }
}
