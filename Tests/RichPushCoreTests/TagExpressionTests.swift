import Foundation
@testable import RichPushCore
import Testing

@Suite("Core: Notification Hubs tag expressions")
struct TagExpressionTests {
    /// The message `text` is refused with (checking it is a 400), or nil if it parses.
    func refusal(_ text: String) -> String? {
        do {
            _ = try TagExpression(text)
            return nil
        } catch let error as CoreError {
            #expect(error.kind == .invalid)
            return error.message
        } catch {
            Issue.record("not a CoreError: \(error)")
            return nil
        }
    }

    /// `count` distinct tags joined by `op`.
    func joined(_ count: Int, by op: String) -> String {
        (1...count).map { "t\($0)" }.joined(separator: " \(op) ")
    }

    @Test("&& binds tighter than ||, and both are left to right")
    func precedence() throws {
        let expression = try TagExpression("a || b && c")
        #expect(expression.matches(["a"]))
        #expect(!expression.matches(["b"]))
        #expect(expression.matches(["b", "c"]))
        #expect(!expression.matches([] as [String]))
        #expect(expression.description == "a || b && c")

        let grouped = try TagExpression("(a || b) && c")
        #expect(!grouped.matches(["a"]))
        #expect(grouped.matches(["a", "c"]))
        #expect(grouped.description == "(a || b) && c")

        let chain = try TagExpression("a && b || c && d")
        #expect(chain.matches(["c", "d"]))
        #expect(!chain.matches(["a", "d"]))
    }

    @Test("! binds tightest; parentheses regroup")
    func negationAndParentheses() throws {
        let not = try TagExpression("!a")
        #expect(not.matches([] as [String]))
        #expect(!not.matches(["a"]))

        let notThenAnd = try TagExpression("!a && b")
        #expect(notThenAnd.matches(["b"]))
        #expect(!notThenAnd.matches(["a", "b"]))

        let notOfGroup = try TagExpression("!(a && b)")
        #expect(notOfGroup.matches(["a"]))
        #expect(!notOfGroup.matches(["a", "b"]))

        let notOfOr = try TagExpression("!(a || b) && c")
        #expect(notOfOr.matches(["c"]))
        #expect(!notOfOr.matches(["b", "c"]))

        let doubled = try TagExpression("!!a")
        #expect(doubled.matches(["a"]))
        #expect(!doubled.matches(["b"]))

        let nested = try TagExpression("((a || (b && !c)))")
        #expect(nested.matches(["b"]))
        #expect(!nested.matches(["b", "c"]))
    }

    @Test("whitespace between tokens is ignored, inside or out")
    func whitespace() throws {
        let tight = try TagExpression("a&&!b||(c)")
        let loose = try TagExpression("  a \t&&\n ! b ||  ( c )  ")
        #expect(tight == loose)
        #expect(loose.text == "  a \t&&\n ! b ||  ( c )  ")
        #expect(loose.description == "a && !b || c")
        #expect(loose.matches(["a"]))
        #expect(!loose.matches(["a", "b"]))
        #expect(loose.matches(["c"]))
    }

    @Test("tags lists distinct tags in order of first appearance; the array form ignores duplicates")
    func tagsAndArrays() throws {
        let expression = try TagExpression("b || a && !b || username:alice")
        #expect(expression.tags == ["b", "a", "username:alice"])
        #expect(expression.matches(["username:alice", "username:alice"]))
        #expect(expression.matches(["username:alice"] as Set<String>))
        #expect(expression.matches(["a"]))
        #expect(!expression.matches(["x"]))
    }

    @Test("the description is canonical and parses back to an equal expression")
    func canonicalForm() throws {
        let cases: [(String, String)] = [
            ("((a))", "a"),
            ("a&&(!b)", "a && !b"),
            ("(a || b) || (c)", "a || b || c"),
            ("a && (b && c)", "a && b && c"),
            ("a || (b && c)", "a || b && c"),
            ("a&&(b||c)", "a && (b || c)"),
            ("!(a&&b)", "!(a && b)"),
            ("!(!a)", "!!a"),
            ("!((a || b)) && c", "!(a || b) && c"),
        ]
        for (text, canonical) in cases {
            let expression = try TagExpression(text)
            #expect(expression.description == canonical, "\(text)")
            #expect(try TagExpression(expression.description) == expression, "\(text)")
        }
        #expect(try TagExpression("a || b") != TagExpression("b || a"))
        // The canonical form never nests deeper than the text did, so it always parses back.
        let deep = String(repeating: "!(", count: 16) + "a && b" + String(repeating: ")", count: 16)
        let expression = try TagExpression(deep)
        #expect(try TagExpression(expression.description) == expression)
    }

    @Test("tags may use letters, digits and _ @ # . : -, up to 120 characters")
    func tagCharacters() throws {
        let tags = ["username:alice", "lang:en-US", "user_1", "alice@example.com", "#news", "v1.2", "A-Z_0.9:@#"]
        let expression = try TagExpression(tags.joined(separator: " || "))
        #expect(expression.tags == tags)
        for tag in tags {
            #expect(expression.matches([tag]))
        }
        let longest = String(repeating: "x", count: 120)
        #expect(try TagExpression(longest).matches([longest]))

        let message = try #require(refusal("a || " + String(repeating: "y", count: 121)))
        #expect(message.hasPrefix("tag expression: tag 'yyyyyyyyyyyyyyyy…'"))
        #expect(message.contains("at position 5"))
        #expect(message.contains("longer than 120 characters"))
    }

    @Test("at most 20 tags joined only by ||, at most 6 once && or ! appears; repeats count")
    func limits() throws {
        let twenty = try TagExpression(joined(20, by: "||"))
        #expect(twenty.tags.count == 20)
        #expect(twenty.matches(["t20"]))
        #expect(try TagExpression("(" + joined(10, by: "||") + ") || (" + joined(10, by: "||") + ")").tags.count == 10)
        #expect(refusal(joined(21, by: "||")) == "tag expression: 21 tags, at most 20 with only ||")
        #expect(refusal(Array(repeating: "a", count: 21).joined(separator: " || "))
            == "tag expression: 21 tags, at most 20 with only ||")

        let six = try TagExpression(joined(6, by: "&&"))
        #expect(six.matches((1...6).map { "t\($0)" }))
        #expect(!six.matches((1...5).map { "t\($0)" }))
        #expect(refusal(joined(7, by: "&&")) == "tag expression: 7 tags, at most 6 when using && or !")
        #expect(refusal(Array(repeating: "a", count: 7).joined(separator: " && "))
            == "tag expression: 7 tags, at most 6 when using && or !")

        // One && or ! anywhere brings the whole expression under the lower limit.
        _ = try TagExpression("!" + joined(6, by: "||"))
        #expect(refusal("!" + joined(7, by: "||")) == "tag expression: 7 tags, at most 6 when using && or !")
        #expect(refusal(joined(6, by: "||") + " || x && y") == "tag expression: 8 tags, at most 6 when using && or !")
    }

    @Test("empty, stray and unclosed parentheses are refused with their position")
    func structureErrors() {
        #expect(refusal("") == "tag expression: empty")
        #expect(refusal(" \t\n ") == "tag expression: empty")
        #expect(refusal("(a && b))") == "tag expression: unexpected ')' at position 8")
        #expect(refusal(")") == "tag expression: unexpected ')' at position 0")
        #expect(refusal("(a && b") == "tag expression: unclosed '(' opened at position 0")
        #expect(refusal("a && (b || (c)") == "tag expression: unclosed '(' opened at position 5")
        #expect(refusal("(") == "tag expression: unclosed '(' opened at position 0")
        #expect(refusal("a && ()") == "tag expression: empty parentheses at position 5")
        #expect(refusal("(a b)") == "tag expression: expected '&&', '||' or ')' before 'b' at position 3")
        #expect(refusal("a b") == "tag expression: expected '&&' or '||' before 'b' at position 2")
        #expect(refusal("a !b") == "tag expression: expected '&&' or '||' before '!' at position 2")
        #expect(refusal("a (b)") == "tag expression: expected '&&' or '||' before '(' at position 2")
    }

    @Test("missing operands, lone & and |, and foreign characters name the fault and position")
    func operatorAndCharacterErrors() {
        #expect(refusal("sports && ") == "tag expression: expected a tag after '&&' at position 7")
        #expect(refusal("a || ") == "tag expression: expected a tag after '||' at position 2")
        #expect(refusal("a && !") == "tag expression: expected a tag after '!' at position 5")
        #expect(refusal("a || && b") == "tag expression: expected a tag after '||' at position 2, found '&&' at position 5")
        #expect(refusal("a && )") == "tag expression: expected a tag after '&&' at position 2, found ')' at position 5")
        #expect(refusal("(|| a)") == "tag expression: expected a tag after '(' at position 0, found '||' at position 1")
        #expect(refusal("&& a") == "tag expression: expected a tag before '&&' at position 0")
        #expect(refusal("a & b") == "tag expression: single '&' at position 2; use '&&'")
        #expect(refusal("a | b") == "tag expression: single '|' at position 2; use '||'")
        #expect(refusal("a &&& b") == "tag expression: single '&' at position 4; use '&&'")
        #expect(refusal("a|") == "tag expression: single '|' at position 1; use '||'")
        #expect(refusal("ab%c") == "tag expression: invalid character '%' at position 2")
        #expect(refusal("a && $InstallationId:{x}") == "tag expression: invalid character '$' at position 5")
        #expect(refusal("a || café") == "tag expression: invalid character 'é' (U+00E9) at position 8")
        #expect(refusal("a\u{0}") == "tag expression: invalid character U+0000 at position 1")
        #expect(throws: CoreError.self) { try TagExpression("tag with spaces? no") }
    }

    @Test("nesting beyond 32 and text beyond 2,048 bytes are refused, not a crash")
    func hostileInput() throws {
        let deepest = String(repeating: "(", count: 32) + "a" + String(repeating: ")", count: 32)
        #expect(try TagExpression(deepest).matches(["a"]))
        #expect(try TagExpression(String(repeating: "!", count: 32) + "a").matches(["a"]))
        #expect(try TagExpression(String(repeating: "!(", count: 16) + "a" + String(repeating: ")", count: 16)).matches(["a"]))

        let tooDeep = String(repeating: "(", count: 33) + "a" + String(repeating: ")", count: 33)
        #expect(refusal(tooDeep) == "tag expression: parentheses and '!' nested deeper than 32 at position 32")
        #expect(refusal(String(repeating: "!", count: 33) + "a")
            == "tag expression: parentheses and '!' nested deeper than 32 at position 32")
        #expect(refusal(String(repeating: "(!", count: 17) + "a" + String(repeating: ")", count: 17))
            == "tag expression: parentheses and '!' nested deeper than 32 at position 32")

        // Bombs under the byte limit reach the parser and stop at the depth limit.
        let parens = String(repeating: "(", count: 1000) + "a" + String(repeating: ")", count: 1000)
        #expect(refusal(parens)?.contains("nested deeper than 32") == true)
        #expect(refusal(String(repeating: "!", count: 2000) + "a")?.contains("nested deeper than 32") == true)
        #expect(refusal(String(repeating: "(", count: 2000))?.contains("nested deeper than 32") == true)

        // Bigger bombs stop at the byte limit before any parsing.
        let bomb = String(repeating: "(", count: 10000) + "a" + String(repeating: ")", count: 10000)
        #expect(refusal(bomb) == "tag expression: 20001 bytes, at most 2048")
        #expect(refusal(String(repeating: "!", count: 10000) + "a") == "tag expression: 10001 bytes, at most 2048")
        #expect(refusal(String(repeating: "a", count: 3000)) == "tag expression: 3000 bytes, at most 2048")

        // 20 tags of 100 characters joined by || is 2,038 bytes; padded to exactly 2,048 it passes.
        let long = (1...20).map { String(repeating: "x", count: 97) + String(format: "%03d", $0) }
        let atLimit = long.joined(separator: "||") + String(repeating: " ", count: 10)
        #expect(atLimit.utf8.count == 2048)
        #expect(try TagExpression(atLimit).tags.count == 20)
        #expect(refusal(atLimit + " ") == "tag expression: 2049 bytes, at most 2048")
    }
}
