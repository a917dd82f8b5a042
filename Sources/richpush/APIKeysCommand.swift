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
            let keys = try await dataOptions.open().apiKeys
            do {
                let key = try await keys.add(name: name, scope: scope, app: app)
                print(key)
                Console.error("added API key \(name) (scope \(scope.rawValue)\(app.map { ", app \($0)" } ?? "")): it is shown this once; keep it secret")
            } catch let error as CoreError {
                Console.error("error: \(error.message)")
                throw ExitCode(1)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys: name, scope, app, created, last used (never the keys).")
        @OptionGroup var dataOptions: DataOptions
        @Flag(help: "One JSON object per line.") var json = false

        func run() async throws {
            let keys = try await dataOptions.open().apiKeys.list()
            let formatter = ISO8601DateFormatter()
            if json {
                for key in keys {
                    var object: [String: Any] = ["name": key.name, "scope": key.scope.rawValue, "created": formatter.string(from: key.createdAt)]
                    object["app"] = key.app
                    object["lastUsed"] = key.lastUsedAt.map(formatter.string(from:))
                    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
                    print(String(decoding: data, as: UTF8.self))
                }
                return
            }
            print(["NAME", "SCOPE", "APP", "CREATED", "LAST USED"].joined(separator: "\t"))
            for key in keys {
                print([key.name, key.scope.rawValue, key.app ?? "*", formatter.string(from: key.createdAt),
                       key.lastUsedAt.map(formatter.string(from:)) ?? "never"].joined(separator: "\t"))
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove a key: every server refuses it within a second.")
        @OptionGroup var dataOptions: DataOptions
        @Argument(help: "The key's name.") var name: String

        func run() async throws {
            do {
                try await dataOptions.open().apiKeys.remove(name: name)
            } catch let error as CoreError {
                Console.error("error: \(error.message)")
                throw ExitCode(1)
            }
            print("removed API key \(name)")
        }
    }
}

extension APIKeyScope: ExpressibleByArgument {}
