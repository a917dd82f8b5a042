import ArgumentParser
import Foundation
import MediaStore
import RichPushCore

#if canImport(Glibc)
import Glibc
#endif

struct UsersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "Manage the accounts that may call the API (HTTP Basic, bcrypt-hashed).",
        subcommands: [Add.self, List.self, Remove.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a user; the password is prompted for, or read from stdin.")
        @OptionGroup var dataOptions: DataOptions
        @Flag(help: "Read the password from the first line of standard input.") var passwordStdin = false
        @Argument(help: "User name: 1 to 64 of A-Z a-z 0-9 _ @ # . -") var name: String

        func validate() throws {
            do { try UserStore.validateName(name) } catch { throw ValidationError("\(error)") }
        }

        func run() async throws {
            let password: String
            if passwordStdin {
                guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                    Console.error("error: no password on standard input")
                    throw ExitCode(2)
                }
                password = line
            } else {
                guard isatty(STDIN_FILENO) == 1 else {
                    Console.error("error: standard input is not a terminal; use --password-stdin")
                    throw ExitCode(2)
                }
                let first = Terminal.readSecret("Password for \(name): ")
                let second = Terminal.readSecret("Repeat: ")
                guard first == second else {
                    Console.error("error: the passwords differ")
                    throw ExitCode(1)
                }
                password = first
            }
            let users = UserStore(database: try CoreDatabase.open(DataDirectory(path: dataOptions.data)))
            do {
                _ = try await users.add(name: name, password: password)
            } catch let error as CoreError {
                Console.error("error: \(error.message)")
                throw ExitCode(1)
            }
            print("added user \(name)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List users.")
        @OptionGroup var dataOptions: DataOptions

        func run() async throws {
            let users = UserStore(database: try CoreDatabase.open(DataDirectory(path: dataOptions.data)))
            let formatter = ISO8601DateFormatter()
            for user in try await users.list() { print("\(user.name) \(formatter.string(from: user.createdAt))") }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove a user and their device registrations; a running server forgets their credentials within a second.")
        @OptionGroup var dataOptions: DataOptions
        @Argument var name: String

        func run() async throws {
            let users = UserStore(database: try CoreDatabase.open(DataDirectory(path: dataOptions.data)))
            do {
                try await users.remove(name: name)
            } catch let error as CoreError {
                Console.error("error: \(error.message)")
                throw ExitCode(1)
            }
            print("removed user \(name)")
        }
    }
}

enum Terminal {
    /// Reads a line from the terminal without echoing it.
    static func readSecret(_ prompt: String) -> String {
        FileHandle.standardError.write(Data(prompt.utf8))
        var old = termios()
        tcgetattr(STDIN_FILENO, &old)
        var quiet = old
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &quiet)
        defer {
            tcsetattr(STDIN_FILENO, TCSANOW, &old)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        return readLine(strippingNewline: true) ?? ""
    }
}
