import ArgumentParser
import Foundation
import RichPushCore

/// `richpush api-keys add|list|rm` (docs/api.md#apps-and-api-keys): keys for servers that call RichPush.
struct APIKeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api-keys",
        abstract: "Manage API keys for servers that call RichPush (Authorization: Bearer rpk_…).",
        subcommands: [Add.self, List.self, Remove.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a key and print it once (only its SHA-256 is stored).",
            discussion: """
                send: create notifications and campaigns (and upload their images); read: read campaigns and media; \
                admin: everything an admin account may do. With --app, the key reaches that app's devices and campaigns only.
                """)
        @OptionGroup var dataOptions: DataOptions
        @Option(help: "send, read or admin.") var scope: APIKeyScope
        @Option(help: "Bind the key to one app of serve --apps (or default).") var app: String?
        @Argument(help: "A name for the key: 1 to 64 of A-Z a-z 0-9 _ . -") var name: String

        func validate() throws {
            do {
                try APIKeyStore.validateName(name)
                if let app { try AppName.validate(app) }
            } catch let error as CoreError {
                throw ValidationError(error.message)
            }
        }

        func run() async throws {
            let data = try await dataOptions.open()
            if let app { try await Self.checkApp(app, settings: data.settings) }
            let keys = data.apiKeys
            do {
                let key = try await keys.add(name: name, scope: scope, app: app, audit: AuditActor.cli())
                print(key)
                Terminal.error("added API key \(name) (scope \(scope.rawValue)\(app.map { ", app \($0)" } ?? "")): it is shown this once; keep it secret")
            } catch let error as CoreError {
                Terminal.error("error: \(error.message)")
                throw ExitCode(1)
            }
        }

        /// A key bound to an app the server does not have would be accepted by every request and
        /// reach no device: refused (exit 2), naming the apps `serve` recorded in the store when it
        /// last started (`default` alone until a serve has run: the apps are those of `serve --apps`).
        static func checkApp(_ app: String, settings: SettingsStore) async throws {
            let recorded = try await settings.value("apps")
            let apps: [String] = recorded.map { list in
                list.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            } ?? [AppName.default]
            guard !apps.contains(app) else { return }
            if recorded == nil {
                Terminal.error("""
                    error: --app \(app): no serve has recorded its apps in this data directory yet; the apps are those of serve --apps, \
                    and until a serve with them has started here only \(AppName.default) is known (start serve --apps FILE, then add the key)
                    """)
            } else {
                Terminal.error("error: --app \(app): the server has no such app; its apps are \(apps.joined(separator: ", ")) (those of serve --apps, as the last serve on this data directory recorded them)")
            }
            throw ExitCode(2)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys: name, scope, app, created, last used (never the keys).")
        @OptionGroup var dataOptions: DataOptions
        @Flag(help: "A JSON array of {\"name\",\"scope\",\"app\",\"created\",\"lastUsed\"}.") var json = false

        func run() async throws {
            let keys = try await dataOptions.open().apiKeys.list()
            let formatter = ISO8601DateFormatter()
            if json {
                print(JSONOut.array(keys.map { key in
                    var object: [String: Any] = ["name": key.name, "scope": key.scope.rawValue, "created": formatter.string(from: key.createdAt)]
                    object["app"] = key.app
                    object["lastUsed"] = key.lastUsedAt.map(formatter.string(from:))
                    return object
                }))
                return
            }
            ListTable.print(["NAME", "SCOPE", "APP", "CREATED", "LAST USED"], keys.map { key in
                [key.name, key.scope.rawValue, key.app ?? "*", formatter.string(from: key.createdAt),
                 key.lastUsedAt.map(formatter.string(from:)) ?? "never"]
            }, empty: "no API keys yet: richpush api-keys add NAME --scope send|read|admin creates one")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove a key: every server refuses it within a second.")
        @OptionGroup var dataOptions: DataOptions
        @Argument(help: "The key's name.") var name: String

        func run() async throws {
            do {
                try await dataOptions.open().apiKeys.remove(name: name, audit: AuditActor.cli())
            } catch let error as CoreError {
                Terminal.error("error: \(error.message)")
                throw ExitCode(1)
            }
            print("removed API key \(name)")
        }
    }
}

extension APIKeyScope: ExpressibleByArgument {}
