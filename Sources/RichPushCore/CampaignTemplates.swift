import Foundation
import Mustache
import SQLEngine

/// A campaign's words as Mustache templates (docs/api.md#templates-and-localization-keys, SPEC §27):
/// `title`, `message`, `options.subtitle` and the buttons' titles, and the same in each locale's
/// `content`, rendered per recipient over
/// `{"user":{"name","locale","timezone"},"attributes":{…},"campaign":{"id"}}`, without HTML
/// escaping. A value that is not there renders empty.
///
/// A text is a template when it has `{{` (every Mustache tag begins so, a set-delimiter tag
/// too): a campaign none of whose words has one is queued as before, with no query and nothing
/// rendered. Escaping is turned off by the library's own switch, the `CONTENT_TYPE` pragma:
/// each text is parsed after `{{%CONTENT_TYPE:TEXT}}` and a newline (`preamble`), a standalone
/// tag, which renders nothing and leaves the text to begin at line 2 as a template would at line 1.
///
/// One is made per batch of recipients: each text is parsed once in it, when first rendered.
final class CampaignTemplates {
    /// The reason a push that no longer fits its platform once personalized is failed with.
    static let tooLargeReason = "too-large-after-personalization"

    /// What a template sees of one recipient.
    struct Recipient {
        var name: String
        var locale: String?
        var timezone: String?
        var attributes = UserAttributes()
    }

    /// The words one recipient gets: recipients with the same words (and locale) share a writer.
    struct Words: Hashable {
        var title: String?
        var message: String
        var subtitle: String?
        /// The buttons' titles, in the buttons' order.
        var actionTitles: [String]?
    }

    /// Put before every text: turns HTML escaping off, and renders nothing.
    static let preamble = "{{%CONTENT_TYPE:TEXT}}\n"

    let campaignId: Int64
    /// Each text met so far, parsed (nil: it does not parse, and is sent as written, which only a
    /// campaign made before templates were checked can have).
    private var parsed: [String: MustacheTemplate?] = [:]

    /// The templates of campaign `campaignId`'s words.
    init(campaignId: Int64) {
        self.campaignId = campaignId
    }

    /// Whether `text` is a template.
    static func isTemplate(_ text: String?) -> Bool {
        text?.contains("{{") ?? false
    }

    /// Whether any of `campaign`'s words, in any locale, is a template.
    static func isTemplated(_ campaign: Campaign) -> Bool {
        fields(title: campaign.title, message: campaign.message, options: campaign.options, locales: campaign.locales)
            .contains { isTemplate($0.text) }
    }

    /// Refuses (422) a campaign whose template does not parse, naming the field and where:
    /// `title: the template does not parse at line 1, column 4: unfinished section "first_name"`.
    static func check(_ content: NotificationDraft, locales: [String: LocalizedContent]) throws {
        for (field, text) in fields(title: content.title, message: content.message, options: content.options, locales: locales) where isTemplate(text) {
            do {
                _ = try parse(text)
            } catch let error as CoreError {
                throw CoreError(.unprocessable, "\(field): \(error.message)")
            }
        }
    }

    /// Every text that may be a template, with its field's name as the API spells it.
    private static func fields(title: String?, message: String?, options: PushOptions,
                               locales: [String: LocalizedContent]) -> [(field: String, text: String)] {
        var fields: [(String, String?)] = [("title", title), ("message", message), ("options.subtitle", options.subtitle)]
        for (index, action) in (options.actions ?? []).enumerated() { fields.append(("options.actions[\(index)].title", action.title)) }
        for (tag, content) in locales.sorted(by: { $0.key < $1.key }) {
            fields += [("content.\(tag).title", content.title), ("content.\(tag).message", content.message), ("content.\(tag).subtitle", content.subtitle)]
            for (id, title) in (content.actions ?? [:]).sorted(by: { $0.key < $1.key }) { fields.append(("content.\(tag).actions.\(id)", title)) }
        }
        return fields.compactMap { field, text in text.map { (field: field, text: $0) } }
    }

    /// The locale, time zone and attributes of each of `names` who is a user, in one query per
    /// 500 names.
    static func recipients(_ db: SQLConnection, _ names: [String]) throws -> [String: Recipient] {
        var found: [String: Recipient] = [:]
        for chunk in names.sqlBatches() {
            for row in try SQLRow.fetchAll(db, sql: "SELECT name, locale, timezone, attributes FROM users WHERE name IN (\(sqlPlaceholders(chunk.count)))",
                                           arguments: SQLArguments(Array(chunk))) {
                let name: String = row["name"]
                // Stored attributes were checked when set: an unreadable row renders as none rather than stopping the campaign.
                let attributes = (try? UserAttributes(stored: row["attributes"] as String?)) ?? UserAttributes()
                found[name] = Recipient(name: name, locale: row["locale"], timezone: row["timezone"], attributes: attributes)
            }
        }
        return found
    }

    /// `writer`'s words (one locale's) rendered for `recipient`.
    func words(of writer: NotificationWriter, for recipient: Recipient) -> Words {
        let scope = context(recipient)
        return Words(title: writer.title.map { render($0, scope) }, message: render(writer.message, scope),
                     subtitle: writer.options.subtitle.map { render($0, scope) }.flatMap { $0.isEmpty ? nil : $0 },
                     actionTitles: writer.options.actions?.map { render($0.title, scope) })
    }

    /// `writer` with `words` in place of its own; a push that no longer fits its platform is
    /// failed with `tooLargeReason` instead of refusing the batch.
    static func personalized(_ writer: NotificationWriter, _ words: Words) -> NotificationWriter {
        var options = writer.options
        options.subtitle = words.subtitle
        if let titles = words.actionTitles, let actions = options.actions {
            options.actions = zip(actions, titles).map { PushOptions.Action(id: $0.id, title: $1) }
        }
        var made = writer.reworded(title: words.title, message: words.message, options: options)
        made.oversize = .fail(reason: tooLargeReason)
        return made
    }

    /// What templates see: `user` (its `locale` and `timezone` only when set), `attributes` with
    /// their values as they are (a string, a number, a boolean: a section on `false` is skipped),
    /// and `campaign`.
    private func context(_ recipient: Recipient) -> [String: Any] {
        var user: [String: Any] = ["name": recipient.name]
        if let locale = recipient.locale { user["locale"] = locale }
        if let timezone = recipient.timezone { user["timezone"] = timezone }
        let attributes = recipient.attributes.values.mapValues { value -> Any in
            switch value {
            case .string(let text): return text
            case .integer(let number): return number
            case .number(let number): return number
            case .bool(let flag): return flag
            }
        }
        return ["user": user, "attributes": attributes, "campaign": ["id": campaignId]]
    }

    /// `text` rendered for `recipient` alone.
    func render(_ text: String, for recipient: Recipient) -> String {
        render(text, context(recipient))
    }

    /// `text` rendered over `context`; a text with no tag, or one that does not parse, as it is.
    private func render(_ text: String, _ context: [String: Any]) -> String {
        guard Self.isTemplate(text) else { return text }
        let template: MustacheTemplate?
        if let known = parsed[text] {
            template = known
        } else {
            template = try? Self.parse(text)
            parsed[text] = .some(template)
        }
        return template?.render(context) ?? text
    }

    /// `text` parsed, escaping nothing; a `CoreError` saying where and why it does not parse
    /// (lines and columns from 1, in characters, as the text is given).
    static func parse(_ text: String) throws -> MustacheTemplate {
        // Bounded before the parser sees it, which recurses per section and per bracket.
        if let why = tooComplex(text) { throw CoreError(.unprocessable, why) }
        do {
            return try MustacheTemplate(string: preamble + text)
        } catch let error as MustacheTemplate.ParserError {
            // The preamble is line 1 of what the parser read.
            var (line, column) = (max(1, error.context.lineNumber - 1), error.context.columnNumber)
            var why = Self.words(error.error)
            if let kind = error.error as? MustacheTemplate.Error, kind == .expectedSectionEnd || kind == .sectionCloseNameIncorrect,
               let problem = Self.sectionProblem(text) {
                (line, column, why) = (problem.line, problem.column, problem.words)
            }
            throw CoreError(.unprocessable, "the template does not parse at line \(line), column \(column): \(why)")
        } catch {
            throw CoreError(.unprocessable, "the template does not parse: \(error)")
        }
    }

    /// The parser's error in words.
    private static func words(_ error: any Error) -> String {
        // The parser's other error is running out of text (inside a tag).
        guard let error = error as? MustacheTemplate.Error else { return "a tag is not finished: the text ends inside it" }
        switch error {
        case .sectionCloseNameIncorrect: return "a section is closed with another name than it was opened with"
        case .expectedSectionEnd: return "a section is not closed"
        case .unfinishedName: return "a tag is not finished: a name is letters, digits, . _ - ? or *, then }}"
        case .invalidSetDelimiter: return "a set-delimiter tag (such as {{=<% %>=}}) is malformed"
        case .invalidConfigVariableSyntax, .unrecognisedConfigVariable: return "a pragma ({{%…}}) is malformed or unknown"
        default: return "template inheritance is malformed (\(error))"
        }
    }

    /// The first section the tags of `text` close wrongly or leave open, and where its tag begins:
    /// what the parser's `expectedSectionEnd` (said at the end of the text) and
    /// `sectionCloseNameIncorrect` do not name. Nil when the sections balance, or once a tag
    /// changes the delimiters (the parser's words are used then).
    static func sectionProblem(_ text: String) -> (line: Int, column: Int, words: String)? {
        var open: [(name: String, line: Int, column: Int)] = []
        var (line, column, index) = (1, 1, text.startIndex)
        func advance(to end: String.Index) {
            for character in text[index..<end] {
                if character == "\n" { (line, column) = (line + 1, 1) } else { column += 1 }
            }
            index = end
        }
        while let start = text.range(of: "{{", range: index..<text.endIndex) {
            advance(to: start.lowerBound)
            let at = (line, column)
            guard let close = text.range(of: "}}", range: start.upperBound..<text.endIndex) else { break }
            let inner = text[start.upperBound..<close.lowerBound]
            var end = close.upperBound
            let name = inner.dropFirst().trimmingCharacters(in: .whitespaces)
            switch inner.first {
            case "="?: return nil
            case "#"?, "^"?, "$"?, "<"?: open.append((name: name, line: at.0, column: at.1))
            case "/"?:
                guard let last = open.popLast() else { return (line: at.0, column: at.1, words: "{{/\(name)}} closes no section") }
                if last.name != name {
                    return (line: at.0, column: at.1, words: "{{/\(name)}} closes section \"\(last.name)\", opened at line \(last.line), column \(last.column)")
                }
            case "{"?:
                if end < text.endIndex, text[end] == "}" { end = text.index(after: end) }
            default: break
            }
            advance(to: end)
        }
        return open.last.map { (line: $0.line, column: $0.column, words: "unfinished section \"\($0.name)\"") }
    }
}

extension CampaignTemplates {
    /// Inserts `groups` (recipients by content locale, in the order given) with each one's words
    /// rendered from `writer(locale)`'s: recipients with the same words and locale share one
    /// writer, and every notification of the batch goes in the same few statements, as an
    /// unpersonalized batch's do.
    static func insert(_ db: SQLConnection, _ groups: [(key: String, value: [(name: String, targets: [PushTarget])])],
                       people: [String: Recipient], campaignId: Int64, pace: Pace?,
                       writer: (String?) throws -> NotificationWriter) throws -> [CreatedNotification] {
        struct Key: Hashable {
            var locale: String
            var words: Words
        }
        let templates = CampaignTemplates(campaignId: campaignId)
        var writers: [Key: NotificationWriter] = [:]
        var entries: [NotificationWriter.Entry] = []
        for (locale, recipients) in groups {
            let base = try writer(locale.isEmpty ? nil : locale)
            for recipient in recipients {
                let words = templates.words(of: base, for: people[recipient.name] ?? Recipient(name: recipient.name))
                let key = Key(locale: locale, words: words)
                let personal = writers[key] ?? personalized(base, words)
                writers[key] = personal
                entries.append((writer: personal, name: recipient.name, targets: recipient.targets))
            }
        }
        return try NotificationWriter.insert(db, entries, pace: pace)
    }
}

/// A campaign's words rendered for one user, as the console previews them (`CampaignStore.preview`).
public struct CampaignPreview: Sendable, Equatable {
    public var title: String?
    public var message: String?
    /// Nil when none is given or it renders empty (a push leaves an empty subtitle out).
    public var subtitle: String?
}

extension CampaignStore {
    /// `content`'s title, message and `options.subtitle` rendered for user `name` as a campaign
    /// renders them for that recipient (`campaign.id` is 0: the campaign is not made yet). 422
    /// naming the field and where for a template that does not parse (as `create` refuses it),
    /// 404 when there is no such user.
    public func preview(_ content: NotificationDraft, for name: String) async throws -> CampaignPreview {
        try CampaignTemplates.check(content, locales: [:])
        let (title, message, subtitle) = (content.title, content.message, content.options.subtitle)
        return try await database.read { db in
            guard let recipient = try CampaignTemplates.recipients(db, [name])[name] else {
                throw CoreError(.notFound, "no user \(name.prefix(80))")
            }
            let templates = CampaignTemplates(campaignId: 0)
            return CampaignPreview(title: title.map { templates.render($0, for: recipient) },
                                   message: message.map { templates.render($0, for: recipient) },
                                   subtitle: subtitle.map { templates.render($0, for: recipient) }.flatMap { $0.isEmpty ? nil : $0 })
        }
    }
}
