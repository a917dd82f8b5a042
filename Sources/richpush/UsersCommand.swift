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
        subcommands: [Add.self, List.self, Remove.self, Import.self, Passwd.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a user; the password is prompted for, or read from stdin.")
        @OptionGroup var dataOptions: DataOptions
        @Flag(help: "Read the password from the first line of standard input.") var passwordStdin = false
        @Flag(help: "Make the account an admin: it may send campaigns and name media (docs/api.md#admins-imported-accounts-and-device-sessions).") var admin = false
        @Argument(help: "User name: 1 to 64 of A-Z a-z 0-9 _ @ # . -") var name: String

        func validate() throws {
            do { try UserStore.validateName(name) } catch { throw ValidationError("\(error)") }
        }

        func run() async throws {
            let password = try Terminal.password(for: name, fromStdin: passwordStdin)
            let users = try await dataOptions.open().users
            do {
                try await users.add(name: name, password: password, admin: admin, audit: AuditActor.cli())
            } catch let error as CoreError {
                Terminal.error("error: \(error.message)")
                throw ExitCode(1)
            }
            print("added \(admin ? "admin" : "user") \(name)")
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create accounts from JSON lines: {\"name\",\"password\"} or {\"name\",\"bcrypt\":\"$2b$…\"}, optional \"admin\":true.",
            discussion: """
                A line may also carry "timezone", "locale" and "attributes" (an object of key → string, number, true or false, \
                as PUT /api/me/attributes takes: docs/api.md#attributes-devices-versions-and-topics). \
                A given bcrypt hash ($2a$, $2b$ or $2y$) is stored as it is, so moving a user base in runs no bcrypt. \
                Names that exist are skipped. Every bad line is listed on stderr and the good ones are imported; \
                the exit status is then 1. Use - for standard input.
                """)
        @OptionGroup var dataOptions: DataOptions
        @Argument(help: "A JSON-lines file, or - for standard input.") var file: String

        func validate() throws {
            if file != "-" { try PathArgument.check(file, "users import") }
        }

        func run() async throws {
            let handle: FileHandle
            if file == "-" {
                handle = .standardInput
            } else {
                guard let opened = FileHandle(forReadingAtPath: file) else {
                    Terminal.error("error: cannot read \(file)")
                    throw ExitCode(2)
                }
                handle = opened
            }
            let users = try await dataOptions.open().users
            var summary = UserStore.ImportSummary()
            var bad = 0
            var batch: [UserImport.Entry] = []
            func flush() async throws {
                let done = try await users.importUsers(batch, audit: AuditActor.cli())
                summary.imported += done.imported
                summary.skipped += done.skipped
                batch.removeAll(keepingCapacity: true)
            }
            // Line by line, a batch per transaction: memory stays flat for any size of file.
            for (index, line) in LineReader(handle: handle).enumerated() {
                let text = line.trimmingCharacters(in: .whitespaces)
                if text.isEmpty { continue }
                do {
                    batch.append(try UserImport.parse(text))
                } catch let error as CoreError {
                    bad += 1
                    Terminal.error("error: \(file):\(index + 1): \(error.message)")
                    continue
                }
                if batch.count == 1000 { try await flush() }
            }
            try await flush()
            print("imported \(summary.imported), skipped \(summary.skipped)")
            if bad > 0 { throw ExitCode(1) }
        }
    }

    struct Passwd: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a user's password; every session of the user is revoked, and running servers forget the old one within a second.")
        @OptionGroup var dataOptions: DataOptions
        @Flag(help: "Read the password from the first line of standard input.") var passwordStdin = false
        @Argument var name: String

        func run() async throws {
            let password = try Terminal.password(for: name, fromStdin: passwordStdin)
            let users = try await dataOptions.open().users
            do {
                try await users.setPassword(name: name, password: password, audit: AuditActor.cli())
            } catch let error as CoreError {
                Terminal.error("error: \(error.message)")
                throw ExitCode(1)
            }
            print("changed the password of \(name); its sessions are revoked")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List users: name, role, created.")
        @OptionGroup var dataOptions: DataOptions
        @Flag(help: "A JSON array of {\"name\",\"role\",\"created\",\"timezone\",\"locale\"}.") var json = false

        func run() async throws {
            let users = try await dataOptions.open().users.list()
            let formatter = ISO8601DateFormatter()
            if json {
                print(JSONOut.array(users.map { user in
                    var object: [String: Any] = ["name": user.name, "role": user.admin ? "admin" : "user", "created": formatter.string(from: user.createdAt)]
                    object["timezone"] = user.timezone
                    object["locale"] = user.locale
                    return object
                }))
                return
            }
            ListTable.print(["NAME", "ROLE", "CREATED"], users.map { [$0.name, $0.admin ? "admin" : "user", formatter.string(from: $0.createdAt)] },
                        empty: "no users yet: richpush users add NAME creates one")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove a user and their device registrations; a running server forgets their credentials within a second.")
        @OptionGroup var dataOptions: DataOptions
        @Argument var name: String

        func run() async throws {
            let users = try await dataOptions.open().users
            do {
                try await users.remove(name: name, audit: AuditActor.cli())
            } catch let error as CoreError {
                Terminal.error("error: \(error.message)")
                throw ExitCode(1)
            }
            print("removed user \(name)")
        }
    }
}

/// The lines of a file, read a buffer at a time (not the whole file at once).
struct LineReader: Sequence, IteratorProtocol {
    let handle: FileHandle
    private var buffer: [UInt8] = []
    private var start = 0
    private var finished = false

    init(handle: FileHandle) { self.handle = handle }

    mutating func next() -> String? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 0x0A) {
                defer { start = newline + 1 }
                return String(decoding: buffer[start..<newline], as: UTF8.self)
            }
            if finished {
                guard start < buffer.count else { return nil }
                defer { start = buffer.count }
                return String(decoding: buffer[start...], as: UTF8.self)
            }
            buffer.removeFirst(start)
            start = 0
            let chunk = handle.readData(ofLength: 1 << 16)
            if chunk.isEmpty { finished = true } else { buffer.append(contentsOf: chunk) }
        }
    }
}

extension Terminal {
    /// A new password: the first line of stdin, or asked twice on the terminal.
    static func password(for name: String, fromStdin: Bool) throws -> String {
        if fromStdin {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                Terminal.error("error: no password on standard input")
                throw ExitCode(2)
            }
            return line
        }
        guard isatty(STDIN_FILENO) == 1 else {
            Terminal.error("error: standard input is not a terminal; use --password-stdin")
            throw ExitCode(2)
        }
        let first = readSecret("Password for \(name): ")
        let second = readSecret("Repeat: ")
        guard first == second else {
            Terminal.error("error: the passwords differ")
            throw ExitCode(1)
        }
        return first
    }

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
