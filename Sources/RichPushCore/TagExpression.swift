import Foundation

/// A parsed Notification Hubs tag expression, such as `sports && !lang:fr || username:alice`,
/// checked against Notification Hubs' limits and evaluated over a registration's tags.
///
/// The grammar is Notification Hubs': tags of 1 to 120 ASCII letters, digits and `_ @ # . : -`;
/// `!` (not), `&&` (and), `||` (or) and parentheses. Whitespace between tokens is ignored. `!` binds
/// tightest, then `&&`, then `||`; `&&` and `||` are left-associative.
///
/// Limits are Notification Hubs' own: at most 20 tags when the expression uses only `||`, at most 6
/// once it uses `&&` or `!`. Both count tag *occurrences*, so `a || a` is two tags. Hostile input
/// is bounded too: the text is at most 2,048 UTF-8 bytes and parentheses and `!` nest at most 32
/// deep, checked before the parser recurses, so neither parsing nor matching can exhaust the stack.
///
/// Every refusal is a ``CoreError`` of kind `.invalid` (400) whose message starts with
/// `tag expression:` and names the fault and its 0-based character position in ``text``.
public struct TagExpression: Sendable, Equatable, CustomStringConvertible {
    /// Most tag occurrences in an expression that uses only `||`.
    static let maxOrOnlyTags = 20
    /// Most tag occurrences in an expression that uses `&&` or `!`.
    static let maxTags = 6
    /// Longest tag, in characters.
    static let maxTagLength = 120
    /// Longest expression text, in UTF-8 bytes.
    static let maxBytes = 2048
    /// Deepest nesting of parentheses and `!`, counted together.
    static let maxDepth = 32

    /// The text the expression was parsed from, exactly as given.
    public let text: String
    /// The syntax tree; chains of one operator are flat and parentheses leave no node.
    let root: Node
    private let distinctTags: [String]

    /// Parses `text` and checks it against the limits.
    ///
    /// Throws ``CoreError`` `.invalid` naming the fault and its position, e.g.
    /// `tag expression: unexpected ')' at position 7`.
    public init(_ text: String) throws {
        let bytes = text.utf8.count
        guard bytes <= Self.maxBytes else {
            throw tagExpressionFault("\(bytes) bytes, at most \(Self.maxBytes)")
        }
        let tokens = try Self.tokenize(text)
        guard !tokens.isEmpty else { throw tagExpressionFault("empty") }
        var parser = Parser(tokens: tokens)
        let root = try parser.parse()

        let occurrences = parser.occurrences
        let usesAndOrNot = tokens.contains { $0.kind == .and || $0.kind == .not }
        if usesAndOrNot, occurrences > Self.maxTags {
            throw tagExpressionFault("\(occurrences) tags, at most \(Self.maxTags) when using && or !")
        }
        if occurrences > Self.maxOrOnlyTags {
            throw tagExpressionFault("\(occurrences) tags, at most \(Self.maxOrOnlyTags) with only ||")
        }
        self.text = text
        self.root = root
        self.distinctTags = parser.distinct
    }

    /// The distinct tags the expression refers to, in order of first appearance.
    public var tags: [String] { distinctTags }

    /// Whether a registration carrying `tags` is addressed by this expression.
    public func matches(_ tags: Set<String>) -> Bool {
        root.evaluate(tags)
    }

    /// Whether a registration carrying `tags` is addressed by this expression; duplicates are harmless.
    public func matches(_ tags: [String]) -> Bool {
        matches(Set(tags))
    }

    /// The canonical form: tags joined by ` && ` and ` || `, `!` written against its operand, and
    /// parentheses only where precedence needs them, e.g. `a || b && !c` and `(a || b) && !(c && d)`.
    ///
    /// Redundant parentheses and the grouping of a chain of one operator are dropped
    /// (`((a)) || (b || c)` is `a || b || c`); order and `!!` are kept. It parses back to an equal
    /// expression, never nesting deeper than ``text`` did.
    public var description: String { root.rendered }

    /// Whether two expressions have the same canonical form (``description``): whitespace,
    /// redundant parentheses and the grouping of a chain of one operator aside.
    public static func == (lhs: TagExpression, rhs: TagExpression) -> Bool {
        lhs.root == rhs.root
    }
}

/// A refusal of a tag expression, as `CoreError(.invalid, "tag expression: …")`.
private func tagExpressionFault(_ message: String) -> CoreError {
    CoreError(.invalid, "tag expression: " + message)
}

// MARK: - Syntax tree

extension TagExpression {
    /// A node of the syntax tree. Its depth is bounded by the parser's nesting limit.
    indirect enum Node: Sendable, Equatable {
        case tag(String)
        case not(Node)
        /// Two or more operands, none of them itself an `and`.
        case and([Node])
        /// Two or more operands, none of them itself an `or`.
        case or([Node])

        func evaluate(_ tags: Set<String>) -> Bool {
            switch self {
            case .tag(let name): tags.contains(name)
            case .not(let operand): !operand.evaluate(tags)
            case .and(let operands): operands.allSatisfy { $0.evaluate(tags) }
            case .or(let operands): operands.contains { $0.evaluate(tags) }
            }
        }

        /// The canonical text, parenthesised only where precedence needs it.
        var rendered: String {
            switch self {
            case .tag(let name):
                return name
            case .not(let operand):
                if case .tag = operand { return "!" + operand.rendered }
                if case .not = operand { return "!" + operand.rendered }
                return "!(" + operand.rendered + ")"
            case .and(let operands):
                return operands.map(\.renderedInAnd).joined(separator: " && ")
            case .or(let operands):
                return operands.map(\.rendered).joined(separator: " || ")
            }
        }

        /// The canonical text of an operand of `&&`: an `||` needs parentheses there.
        private var renderedInAnd: String {
            if case .or = self { return "(" + rendered + ")" }
            return rendered
        }
    }
}

// MARK: - Tokens

extension TagExpression {
    /// A lexical token and the 0-based character offset it starts at.
    struct Token: Equatable {
        enum Kind: Equatable {
            case tag(String)
            case and
            case or
            case not
            case open
            case close

            /// How a message quotes it.
            var spelling: String {
                switch self {
                case .tag(let name): "'\(name)'"
                case .and: "'&&'"
                case .or: "'||'"
                case .not: "'!'"
                case .open: "'('"
                case .close: "')'"
                }
            }
        }

        let kind: Kind
        let position: Int
    }

    /// Splits `text` into tokens, refusing characters outside the grammar and over-long tags.
    static func tokenize(_ text: String) throws -> [Token] {
        let characters = Array(text)
        var tokens: [Token] = []
        var index = 0
        while index < characters.count {
            let character = characters[index]
            if character.isWhitespace {
                index += 1
                continue
            }
            switch character {
            case "(":
                tokens.append(Token(kind: .open, position: index))
                index += 1
            case ")":
                tokens.append(Token(kind: .close, position: index))
                index += 1
            case "!":
                tokens.append(Token(kind: .not, position: index))
                index += 1
            case "&", "|":
                guard index + 1 < characters.count, characters[index + 1] == character else {
                    throw tagExpressionFault("single '\(character)' at position \(index); use '\(character)\(character)'")
                }
                tokens.append(Token(kind: character == "&" ? .and : .or, position: index))
                index += 2
            default:
                guard isTagCharacter(character) else {
                    throw tagExpressionFault("invalid character \(quoted(character)) at position \(index)")
                }
                let start = index
                while index < characters.count, isTagCharacter(characters[index]) {
                    index += 1
                }
                guard index - start <= maxTagLength else {
                    let prefix = String(characters[start..<(start + 16)])
                    throw tagExpressionFault(
                        "tag '\(prefix)…' at position \(start) is longer than \(maxTagLength) characters")
                }
                tokens.append(Token(kind: .tag(String(characters[start..<index])), position: start))
            }
        }
        return tokens
    }

    /// The character set registrations accept for tags: ASCII letters and digits and `_ @ # . : -`.
    static func isTagCharacter(_ character: Character) -> Bool {
        character.isASCII && (character.isLetter || character.isNumber) || "_@#.:-".contains(character)
    }

    /// A character for a message: quoted if printable, with its code points if not ASCII.
    static func quoted(_ character: Character) -> String {
        if let ascii = character.asciiValue, (0x21...0x7E).contains(ascii) {
            return "'\(character)'"
        }
        let codes = character.unicodeScalars.map { scalar -> String in
            let hex = String(scalar.value, radix: 16, uppercase: true)
            return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        }.joined(separator: " ")
        return character.isASCII ? codes : "'\(character)' (\(codes))"
    }
}

// MARK: - Parser

extension TagExpression {
    /// A recursive-descent parser that checks the nesting depth before every recursion.
    ///
    ///     or    := and ('||' and)*
    ///     and   := unary ('&&' unary)*
    ///     unary := '!' unary | '(' or ')' | tag
    struct Parser {
        let tokens: [Token]
        var index = 0
        /// Parentheses and `!` currently open.
        var depth = 0
        /// Tag occurrences, repeats included.
        var occurrences = 0
        /// Distinct tags in order of first appearance.
        var distinct: [String] = []
        private var seen: Set<String> = []

        init(tokens: [Token]) {
            self.tokens = tokens
        }

        var next: Token? { index < tokens.count ? tokens[index] : nil }

        /// Parses the whole token list as one expression.
        mutating func parse() throws -> Node {
            let node = try parseOr(after: nil)
            if let extra = next {
                if extra.kind == .close {
                    throw tagExpressionFault("unexpected ')' at position \(extra.position)")
                }
                throw tagExpressionFault("expected '&&' or '||' before \(extra.kind.spelling) at position \(extra.position)")
            }
            return node
        }

        /// Parses an `||` chain; `context` is the token before it (nil at the start of the text).
        mutating func parseOr(after context: Token?) throws -> Node {
            var operands: [Node] = []
            var operand = try parseAnd(after: context)
            while true {
                if case .or(let inner) = operand { operands += inner } else { operands.append(operand) }
                guard let op = next, op.kind == .or else { break }
                index += 1
                operand = try parseAnd(after: op)
            }
            return operands.count == 1 ? operands[0] : .or(operands)
        }

        /// Parses an `&&` chain; `context` is the token before it (nil at the start of the text).
        mutating func parseAnd(after context: Token?) throws -> Node {
            var operands: [Node] = []
            var operand = try parseUnary(after: context)
            while true {
                if case .and(let inner) = operand { operands += inner } else { operands.append(operand) }
                guard let op = next, op.kind == .and else { break }
                index += 1
                operand = try parseUnary(after: op)
            }
            return operands.count == 1 ? operands[0] : .and(operands)
        }

        /// Parses a tag, a negation or a parenthesised expression.
        mutating func parseUnary(after context: Token?) throws -> Node {
            guard let token = next else { throw missingOperand(after: context, found: nil) }
            switch token.kind {
            case .tag(let name):
                index += 1
                occurrences += 1
                if seen.insert(name).inserted { distinct.append(name) }
                return .tag(name)
            case .not:
                try descend(at: token)
                index += 1
                let operand = try parseUnary(after: token)
                depth -= 1
                return .not(operand)
            case .open:
                try descend(at: token)
                index += 1
                let inner = try parseOr(after: token)
                guard let close = next else {
                    throw tagExpressionFault("unclosed '(' opened at position \(token.position)")
                }
                guard close.kind == .close else {
                    throw tagExpressionFault(
                        "expected '&&', '||' or ')' before \(close.kind.spelling) at position \(close.position)")
                }
                index += 1
                depth -= 1
                return inner
            case .and, .or, .close:
                throw missingOperand(after: context, found: token)
            }
        }

        /// Enters one more level of `(` or `!`, refusing to go deeper than the limit.
        mutating func descend(at token: Token) throws {
            guard depth < TagExpression.maxDepth else {
                throw tagExpressionFault(
                    "parentheses and '!' nested deeper than \(TagExpression.maxDepth) at position \(token.position)")
            }
            depth += 1
        }

        /// The refusal for a missing tag after `context`, where `token` (or the end) was found instead.
        func missingOperand(after context: Token?, found token: Token?) -> CoreError {
            guard let context else {
                guard let token else { return tagExpressionFault("empty") }
                if token.kind == .close {
                    return tagExpressionFault("unexpected ')' at position \(token.position)")
                }
                return tagExpressionFault("expected a tag before \(token.kind.spelling) at position \(token.position)")
            }
            if context.kind == .open {
                guard let token else {
                    return tagExpressionFault("unclosed '(' opened at position \(context.position)")
                }
                if token.kind == .close {
                    return tagExpressionFault("empty parentheses at position \(context.position)")
                }
            }
            let expected = "expected a tag after \(context.kind.spelling) at position \(context.position)"
            guard let token else { return tagExpressionFault(expected) }
            return tagExpressionFault("\(expected), found \(token.kind.spelling) at position \(token.position)")
        }
    }
}
