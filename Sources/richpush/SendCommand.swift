import ArgumentParser
import Foundation
import MediaStore
import RichPushCore

#if canImport(Glibc)
import Glibc
#endif

/// `--public-url` and `--payload-url-ttl`: how payload URLs (`richUrl`) are made (docs/api.md#alert-pushes-and-payload-urls).
struct PayloadURLOptions: ParsableArguments {
    @Option(name: .customLong("public-url"),
            help: "Base URL devices reach the server at, for payload URLs (env RICHPUSH_PUBLIC_URL; default: what `serve` last announced, else http://<host>:<port>).")
    var publicUrlValue: String = Environment.string("RICHPUSH_PUBLIC_URL") ?? ""
    var publicUrl: String? { publicUrlValue.isEmpty ? nil : publicUrlValue }
    @Option(help: "How long a payload URL works, e.g. 12h, 7d (env RICHPUSH_PAYLOAD_URL_TTL).", transform: Duration.parse)
    var payloadUrlTtl: TimeInterval = Environment.duration("RICHPUSH_PAYLOAD_URL_TTL", default: 7 * 86_400)

    func validate() throws {
        if let publicUrl {
            guard let url = URL(string: publicUrl), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil,
                  url.query == nil, url.fragment == nil else {
                throw ValidationError("--public-url must be an http:// or https:// URL without query, e.g. https://push.example.com")
            }
        }
        guard payloadUrlTtl >= 60 else { throw ValidationError("--payload-url-ttl must be at least 60s") }
    }

    /// The signer the CLI uses: the data directory's key, and the URL `serve` announced unless one is given.
    func links(_ data: DataStore) async throws -> PayloadLinks {
        let base: String
        if let publicUrl {
            base = publicUrl
        } else {
            base = try await data.settings.value(SettingsStore.publicURL) ?? "http://127.0.0.1:8080"
        }
        return PayloadLinks(key: try await data.payloadKey(), baseURL: base, lifetime: payloadUrlTtl)
    }
}

struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a rich notification to many users (a campaign) and print its id.",
        discussion: """
            Every recipient gets the notification in their inbox and each of their devices one push. \
            A running `richpush serve` on the same data directory delivers the pushes; \
            --wait follows the campaign until nothing is pending.
            """)

    @OptionGroup var dataOptions: DataOptions
    @OptionGroup var urlOptions: PayloadURLOptions
    @Flag(help: "Every user.") var all = false
    @Option(name: .customLong("user"), help: "A recipient (repeat for more).") var users: [String] = []
    @Option(help: "A Notification Hubs tag expression over device tags, e.g. 'sports && lang:en'.") var tags: String?
    @Option(help: "The message (default: \"Check this image out!\").") var message: String?
    @Option(help: "The alert's title.") var title: String?
    @Option(help: "A file to upload, or a media id or name (default: --default-image).") var image: String?
    @Option(help: "alert (shown with the image by a Notification Service Extension) or silent (the tutorial's background push).")
    var mode: PushMode = .alert
    @Option(help: "The sender recorded with the campaign.") var by = "cli"
    @Option(help: "Only the devices of this app (docs/api.md#apps-and-api-keys; default: every app the audience has devices in).") var app: String?
    @Option(help: "Send at this time, RFC 3339, e.g. 2026-12-01T09:00:00Z (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries).") var at: String?
    @Option(help: "Send at this time of day, HH:MM, in each recipient's own time zone.") var localTime: String?
    @Option(help: "With --local-time: on this date, YYYY-MM-DD (default: the next such time).") var localDate: String?
    @Option(help: ArgumentHelp("Per-locale content: a JSON file {\"en\":{\"title\",\"message\"},\"fr\":{…}}.", valueName: "file"))
    var localeFile: String?
    @Option(help: "The locale of recipients whose own has no content (default en).") var defaultLocale = "en"
    @Flag(inversion: .prefixedNo, help: "Apply the apps' frequency caps and quiet hours (docs/api.md#frequency-caps-and-quiet-hours); --no-limits sends past them.")
    var limits = true
    @Flag(help: "Follow the campaign until it is done (progress on a terminal).") var wait = false
    @Option(help: "Media name used without --image (env RICHPUSH_DEFAULT_IMAGE).")
    var defaultImage: String = Environment.string("RICHPUSH_DEFAULT_IMAGE") ?? "logo.png"

    func validate() throws {
        let chosen = (all ? 1 : 0) + (users.isEmpty ? 0 : 1) + (tags == nil ? 0 : 1)
        guard chosen == 1 else { throw ValidationError("choose the audience: one of --all, --user NAME…, --tags EXPR") }
        if let app {
            do { try AppName.validate(app) } catch let error as CoreError { throw ValidationError(error.message) }
        }
        if at != nil && localTime != nil { throw ValidationError("choose --at or --local-time, not both") }
        if localDate != nil && localTime == nil { throw ValidationError("--local-date goes with --local-time") }
        try PathArgument.check(localeFile, "--locale-file")
        do {
            _ = try schedule()
        } catch let error as CoreError {
            throw ValidationError(error.message)
        }
    }

    func run() async throws {
        let data = try await dataOptions.open()
        let audience: Audience
        do {
            audience = all ? .all : try tags.map { .tags(try TagExpression($0)) } ?? .listing(users)
        } catch let error as CoreError {
            throw ValidationError(error.message)
        }
        let payload = try await ImageArgument.payload(image, media: data.media)
        let links = try await urlOptions.links(data)
        let campaigns = data.campaigns(links: links, defaultImage: defaultImage)
        let content = NotificationDraft(message: message, payload: payload, title: title, mode: mode)
        let campaign: Campaign
        do {
            var locales: [String: LocalizedContent] = [:]
            if let localeFile {
                guard let data = FileManager.default.contents(atPath: localeFile),
                      let parsed = try? JSONDecoder().decode([String: LocalizedContent].self, from: data) else {
                    throw CoreError(.invalid, "--locale-file \(localeFile): not a JSON object of locale → {\"title\",\"message\"}")
                }
                locales = parsed
            }
            let draft = CampaignDraft(audience: audience, content: content, app: app, schedule: try schedule(),
                                      locales: locales, defaultLocale: defaultLocale, limits: limits)
            // Every batch queued here: the CLI has no background queuer to hand the rest to.
            let launcher = CampaignLauncher(campaigns: campaigns, addressing: .perDevice)
            let outcome = try await launcher.launch(draft, by: by, audit: AuditActor.cli()) { created in
                // Said as soon as it is recorded, before a large audience is queued.
                Terminal.out(String(created.id))
                if let schedule = created.schedule {
                    let when = switch schedule {
                    case .at(let date): ISO8601DateFormatter().string(from: date)
                    case .localTime(let time, let date): "\(time) in each recipient's time zone" + (date.map { " on \($0)" } ?? "")
                    }
                    Terminal.error("campaign \(created.id): scheduled for \(when); a running serve sends it")
                }
            }
            guard case .launched(let launch) = outcome else { preconditionFailure("a launch without an idempotency key is never a replay") }
            campaign = launch.campaign
            if let queued = launch.queued {
                Terminal.error("campaign \(campaign.id): \(counted(queued.recipients, "recipient")), \(counted(queued.devices, "device")) queued")
            }
        } catch let error as CoreError {
            Terminal.error("error: \(error.message)")
            throw ExitCode(1)
        }
        if wait { try await follow(campaign.id, campaigns) }
    }

    /// `--at` or `--local-time` (with `--local-date`).
    private func schedule() throws -> CampaignSchedule? {
        if let at {
            guard let date = CampaignSchedule.rfc3339(at) else {
                throw CoreError(.invalid, "--at must be an RFC 3339 time such as 2026-12-01T09:00:00Z, got '\(at.prefix(40))'")
            }
            return .at(date)
        }
        if let localTime { return .localTime(try LocalTime(localTime), date: try localDate.map(LocalDate.init)) }
        return nil
    }

    /// Polls the campaign's counts until it is done, redrawing one line on a terminal.
    private func follow(_ id: Int64, _ campaigns: CampaignStore) async throws {
        let terminal = Terminal.stderrIsTerminal
        while true {
            guard let p = try await campaigns.progress(id) else { return }
            let line = "campaign \(id): \(p.status.rawValue), \(p.sent) sent, \(p.failed) failed, \(p.pending) pending, \(p.fetched) fetched of \(counted(p.campaign.recipients, "recipient"))"
            if p.status == .done || p.status == .cancelled {
                if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                Terminal.error(line)
                return
            }
            if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8)) }
            try await Task.sleep(for: .milliseconds(250))
        }
    }
}

extension PushMode: ExpressibleByArgument {}

/// `--image` of `send` and `notify`: an image file's path (stored, and its id sent), else the id
/// or name of a stored image. A value that is neither is said to be both (exit 2): a missing
/// file is not reported as an unknown media name, nor the other way round.
enum ImageArgument {
    static func payload(_ image: String?, media: MediaStore) async throws -> String? {
        guard let image else { return nil }
        if FileManager.default.fileExists(atPath: image) {
            if let problem = PathArgument.problem(image) {
                Terminal.error("error: --image: cannot read \(image): \(problem)")
                throw ExitCode(2)
            }
            do {
                return try await media.ingest(file: image).item.id.hex
            } catch let rejection as MediaRejection {
                Terminal.error("error: \(image): \(rejection.kind.rawValue): \(rejection.reason)")
                throw ExitCode(1)
            }
        }
        if try await media.resolve(image) != nil { return image }
        Terminal.error("error: --image \(image): the file does not exist\(PathArgument.whereLooked(image)), and no stored image has that id or name (--image takes an image file's path, or the id or name of an image in richpush media list)")
        throw ExitCode(2)
    }
}

struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Manage the key that signs payload URLs.",
        subcommands: [Rotate.self])

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace the payload-URL key: every payload URL signed before stops working (404), in running servers too within a second.")
        @OptionGroup var dataOptions: DataOptions

        func run() async throws {
            if Environment.string("RICHPUSH_PAYLOAD_KEY") != nil {
                Terminal.error("warning: RICHPUSH_PAYLOAD_KEY is set; servers started with it keep using it, not the rotated file")
            }
            let data = try await dataOptions.open()
            defer { data.close() }
            let place = try await data.rotatePayloadKey()
            // docs/operations.md#audit-log: a file (or a setting) of its own, so in a transaction of its own.
            try await data.audit.record(AuditEntry(AuditActor.cli(), "payloadkey.rotate"))
            print("rotated the payload key in \(place)")
        }
    }
}
