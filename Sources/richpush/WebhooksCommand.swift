import ArgumentParser
import Foundation
import PushDelivery
import RichPushCore

/// `richpush webhooks add|list|rm` (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks).
struct WebhooksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "Send delivery events (\(eventNames)) to your own systems, signed.",
        subcommands: [Add.self, List.self, Remove.self])

    /// Every event type, as `--events` takes them.
    static let eventNames = DeliveryEventType.allCases.map(\.rawValue).joined(separator: ", ")

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a webhook; prints its id (and, without --secret-file, the secret it signs with, once).",
            discussion: """
                Each event is POSTed as JSON {"id","type","at","campaign","notification","user","platform","reason"} (several at once as \
                {"events":[…]}) with X-RichPush-Signature: t=<unix>,v1=<hex HMAC-SHA-256 of "t.body">. Delivered at least once, \
                retried with backoff for 24 h. Only https:// to a host name whose every address is public (looked up now, and \
                again at each delivery); no redirect is followed. --allow-private-webhooks (on this command and on serve) allows http:// \
                and loopback or private addresses, for a receiver on this machine or a private network.
                """)
        @OptionGroup var dataOptions: DataOptions
        @Option(help: "Comma-separated: \(WebhooksCommand.eventNames) (default: all).") var events: String?
        @Option(help: ArgumentHelp("A file holding the signing secret (at least 16 bytes).", valueName: "file")) var secretFile: String?
        @Flag(inversion: .prefixedNo, help: "Accept a receiver at a loopback, private or other non-public address, or over http; serve delivers to it only with the same flag (env RICHPUSH_ALLOW_PRIVATE_WEBHOOKS).")
        var allowPrivateWebhooks: Bool = Environment.bool("RICHPUSH_ALLOW_PRIVATE_WEBHOOKS") ?? false
        @Argument(help: "The receiver's URL.") var url: String

        func validate() throws {
            try PathArgument.check(secretFile, "--secret-file", hint: "without --secret-file, a secret is generated and shown once")
        }

        func run() async throws {
            var types: [DeliveryEventType] = []
            for name in (events ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
                guard let type = DeliveryEventType(rawValue: name) else {
                    Terminal.error("error: unknown event '\(name)': use any of \(WebhooksCommand.eventNames)")
                    throw ExitCode(2)
                }
                types.append(type)
            }
            var generated = false
            let secret: String
            if let secretFile {
                guard let data = FileManager.default.contents(atPath: secretFile) else {
                    Terminal.error("error: cannot read --secret-file \(secretFile)")
                    throw ExitCode(2)
                }
                secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            } else {
                var random = SystemRandomNumberGenerator()
                secret = "whsec_" + Base64URL.encode((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &random) })
                generated = true
            }
            do {
                // The URL's own rules first (no lookup), then where its name points today: the policy
                // every delivery applies again (docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks).
                try WebhookStore.validate(url: url, allowPrivate: allowPrivateWebhooks)
                try await OutboundPolicy.webhooks(allowPrivate: allowPrivateWebhooks,
                                                  overrideHint: "webhooks add \(WebhookStore.allowPrivateFlag)").check(url)
                let id = try await dataOptions.open().webhooks.add(url: url, events: types, secret: secret, allowPrivate: allowPrivateWebhooks,
                                                                   audit: AuditActor.cli())
                print(id)
                if generated { Terminal.error("signing secret (shown this once): \(secret)") }
                if allowPrivateWebhooks {
                    Terminal.error("note: its address was not checked; serve delivers to a receiver at a private address or over http only with \(WebhookStore.allowPrivateFlag) (env RICHPUSH_ALLOW_PRIVATE_WEBHOOKS)")
                }
            } catch let error as CoreError {
                Terminal.error("error: \(error.message)")
                throw ExitCode(1)
            } catch let error as OutboundError {
                // A name server that did not answer now says nothing of the receiver: the message says to try again.
                Terminal.error("error: \(error.message)")
                throw ExitCode(1)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Webhooks: id, URL, events, delivered, dropped, failing since.")
        @OptionGroup var dataOptions: DataOptions
        @Flag(help: "A JSON array of {\"id\",\"url\",\"events\",\"delivered\",\"dropped\",\"attempts\",\"lastError\",\"created\"}.") var json = false

        func run() async throws {
            let webhooks = try await dataOptions.open().webhooks.list()
            if json {
                let formatter = ISO8601DateFormatter()
                print(JSONOut.array(webhooks.map { webhook in
                    var object: [String: Any] = ["id": webhook.id, "url": webhook.url, "events": webhook.events.map(\.rawValue),
                                                 "delivered": webhook.delivered, "dropped": webhook.dropped, "attempts": webhook.attempts,
                                                 "created": formatter.string(from: webhook.createdAt)]
                    object["lastError"] = webhook.lastError
                    return object
                }))
                return
            }
            ListTable.print(["ID", "URL", "EVENTS", "DELIVERIES", "STATE"], webhooks.map { webhook in
                [String(webhook.id), webhook.url, webhook.events.map(\.rawValue).joined(separator: ","),
                 "\(webhook.delivered) delivered, \(webhook.dropped) dropped",
                 webhook.lastError.map { "failing (\(counted(webhook.attempts, "attempt"))): \($0)" } ?? "ok"]
            }, empty: "no webhooks yet: richpush webhooks add URL adds one")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Remove a webhook; its undelivered events go with it.")
        @OptionGroup var dataOptions: DataOptions
        @Argument(help: "The webhook's id.") var id: Int64

        func run() async throws {
            do {
                try await dataOptions.open().webhooks.remove(id: id, audit: AuditActor.cli())
            } catch let error as CoreError {
                Terminal.error("error: \(error.message)")
                throw ExitCode(1)
            }
            print("removed webhook \(id)")
        }
    }
}
