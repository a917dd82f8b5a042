import ArgumentParser
import Foundation
import Logging
import RichPushServer
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

#if canImport(Glibc)
import Glibc
#endif

/// The `richpush` command: the service and its admin CLI.
struct RichPushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "richpush",
        abstract: "Self-hosted backend for rich push notifications.",
        discussion: """
            Every command also takes --config FILE (env RICHPUSH_CONFIG): a JSON object whose keys are \
            long flag names ("port", "log-format", "apns-key-id", "push-ca": [...]), for any flag that \
            has an environment variable. The command line wins over the environment, which wins over \
            the file.
            """,
        version: RichPushBuild.version,
        subcommands: [ServeCommand.self, MediaCommand.self, UsersCommand.self, NotifyCommand.self, SendCommand.self, DeliveriesCommand.self,
                      KeysCommand.self, SandboxCommand.self, FCMSandboxCommand.self, WebPushSandboxCommand.self, HealthcheckCommand.self,
                      MigrateCommand.self, WebPushEncryptCommand.self, APIKeysCommand.self, CampaignsCommand.self, ScheduleBenchmarkCommand.self, WebhooksCommand.self,
                      AuditCommand.self]
    )
}

/// `--data DIR`, shared by every command that touches state.
struct DataOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Data directory (env RICHPUSH_DATA).", valueName: "dir"))
    var data: String = Environment.string("RICHPUSH_DATA") ?? "./data"
    @Option(name: .customLong("blobs"), help: ArgumentHelp(
        "Where blob bytes live: file:<data>/blobs (the default) or s3://BUCKET[/PREFIX]?endpoint=URL[&region=R], credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (env RICHPUSH_BLOBS).",
        valueName: "url"))
    var blobsFlag: String?
    @Option(name: .customLong("database"), help: ArgumentHelp(
        "The database: sqlite:PATH (default sqlite:<data>/richpush.sqlite) or postgres://USER:PASSWORD@HOST[:PORT]/DB[?sslmode=require&pool=N], shared by many nodes (env RICHPUSH_DATABASE).",
        valueName: "url"))
    var databaseFlag: String?
    @Option(name: .customLong("database-file"),
            help: ArgumentHelp("A file holding the --database URL, which may carry a password, e.g. a Docker secret (env RICHPUSH_DATABASE_FILE).",
                               valueName: "path"))
    var databaseFile: String?
    @Option(name: .customLong("bcrypt-cost"), help: ArgumentHelp(
        "The bcrypt cost of passwords this command hashes, 4–31; each step doubles the work. Below 10 only for tests (env RICHPUSH_BCRYPT_COST).",
        valueName: "n"))
    var bcryptCost: Int = Environment.int("RICHPUSH_BCRYPT_COST") ?? Int(UserStore.defaultCost)

    /// `--database`, else `--database-file`'s contents, else `RICHPUSH_DATABASE` (or
    /// `RICHPUSH_DATABASE_FILE`'s), else nil (`<data>/richpush.sqlite`).
    var database: String? {
        try? Environment.secret(databaseFlag, file: databaseFile, fileFlag: "--database-file", variable: "RICHPUSH_DATABASE")
    }

    /// `--blobs`, else `RICHPUSH_BLOBS`, else nil (files in the data directory).
    var blobs: String? { blobsFlag ?? Environment.string("RICHPUSH_BLOBS") }

    func validate() throws {
        guard UserStore.costs.contains(where: { Int($0) == bcryptCost }) else {
            throw ValidationError("--bcrypt-cost (env RICHPUSH_BCRYPT_COST) \(bcryptCost) is not from \(UserStore.costs.lowerBound) to \(UserStore.costs.upperBound)")
        }
        if let database = try Environment.secret(databaseFlag, file: databaseFile, fileFlag: "--database-file", variable: "RICHPUSH_DATABASE") {
            do { _ = try DatabaseLocation(database) } catch let error as DatabaseConfigurationError { throw ValidationError(error.description) }
        }
        if let blobs {
            do {
                if case .s3 = try BlobsLocation(blobs, dataPath: data) { _ = try S3Credentials.fromEnvironment() }
            } catch let error as S3Error {
                throw ValidationError(error.description)
            }
        }
    }
}

extension DataOptions {
    /// The store of `--data`, opened once, with the whole schema migrated (off the concurrency
    /// pool: connecting to PostgreSQL blocks). When that creates a new store, `announce` says so
    /// on stderr with its absolute path (docs/configuration.md#the-data-directory): a command run
    /// from another folder than `serve`'s is not silently working on a store of its own.
    func open(limits: MediaLimits = .default, announce: Bool = true) async throws -> DataStore {
        let new = isNew
        let store = try await DataStore.open(path: data, database: database, blobs: blobs, limits: limits, passwordCost: UInt8(bcryptCost))
        if new && announce { Terminal.error("note: \(createdMessage)") }
        return store
    }

    /// `--data`, absolute.
    var directory: String { URL(fileURLWithPath: data, isDirectory: true).standardizedFileURL.path }

    /// The SQLite file of the store (in `--data`, or `--database sqlite:PATH`); nil on PostgreSQL.
    var sqlitePath: String? {
        guard let database else { return DataDirectory(path: data).databasePath }
        guard case .sqlite(let path)? = try? DatabaseLocation(database) else { return nil }
        return DataDirectory(path: data, databasePath: path).databasePath
    }

    /// Whether opening the store creates it: its SQLite file is not there yet (a PostgreSQL
    /// store is never new here: other nodes may share it).
    var isNew: Bool { sqlitePath.map { !FileManager.default.fileExists(atPath: $0) } ?? false }

    /// Whether `--data` is the default `./data` of the working directory (no flag, variable or config key).
    private var isDefaultDirectory: Bool { data == "./data" && Environment.string("RICHPUSH_DATA") == nil }

    /// What `open` says when it creates the store.
    var createdMessage: String {
        var message = "created a new data directory at \(directory)"
        if database != nil, let sqlitePath { message += " (its database \(sqlitePath))" }
        if isDefaultDirectory {
            message += "; a serve started in another folder does not see it: run from the directory serve uses, or pass --data DIR"
        }
        return message
    }

    /// The media store of `--data`, with the whole schema migrated (the server's tables too).
    func openMediaStore(limits: MediaLimits = .default) async throws -> MediaStore {
        try await open(limits: limits).media
    }
}

/// `--log-level` and `--log-format` (docs/operations.md), for the commands that run as services.
struct LogOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (env RICHPUSH_LOG_LEVEL).")
    var logLevel: String = Environment.string("RICHPUSH_LOG_LEVEL") ?? "info"
    @Option(help: "Log lines as text (logfmt) or json, one object per line (env RICHPUSH_LOG_FORMAT).")
    var logFormat: String = Environment.string("RICHPUSH_LOG_FORMAT") ?? "text"

    var level: Logger.Level { Logger.Level(rawValue: logLevel) ?? .info }
    var format: LogFormat { LogFormat(rawValue: logFormat) ?? .text }

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level (env RICHPUSH_LOG_LEVEL) '\(logLevel)' is not one of trace, debug, info, notice, warning, error, critical")
        }
        guard LogFormat(rawValue: logFormat) != nil else {
            throw ValidationError("--log-format (env RICHPUSH_LOG_FORMAT) '\(logFormat)' is not text or json")
        }
    }

    /// Sends every logger of the process through `RichPushLogHandler` in this format.
    func bootstrap() {
        let (level, format) = (self.level, self.format)
        LoggingSystem.bootstrap { label in RichPushLogHandler(label: label, level: level, format: format) }
    }
}

/// `--max-bytes`, `--max-pixels`, `--max-side` (docs/configuration.md#the-media-store).
struct LimitOptions: ParsableArguments {
    @Option(help: "Largest accepted image in bytes (env RICHPUSH_MAX_BYTES).")
    var maxBytes: Int = Environment.int("RICHPUSH_MAX_BYTES") ?? 10_485_760
    @Option(help: "Largest accepted width × height (env RICHPUSH_MAX_PIXELS).")
    var maxPixels: UInt64 = Environment.int("RICHPUSH_MAX_PIXELS").map { UInt64(clamping: $0) } ?? 40_000_000
    @Option(help: "Largest accepted width or height (env RICHPUSH_MAX_SIDE).")
    var maxSide: UInt32 = Environment.int("RICHPUSH_MAX_SIDE").map { UInt32(clamping: $0) } ?? 16_384
    @Flag(help: "Store images byte for byte, EXIF (GPS included), XMP, IPTC and comments kept; by default they are stripped losslessly (env RICHPUSH_KEEP_METADATA).")
    var keepMetadata: Bool = Environment.bool("RICHPUSH_KEEP_METADATA") ?? false

    func validate() throws {
        guard maxBytes > 0, maxPixels > 0, maxSide > 0 else {
            throw ValidationError("limits must be positive")
        }
    }

    var limits: MediaLimits { MediaLimits(maxBytes: maxBytes, maxPixels: maxPixels, maxSide: maxSide, keepMetadata: keepMetadata) }
}

/// Defaults from `RICHPUSH_*` environment variables.
///
/// A value that does not parse is not silently replaced by the default: it is recorded in
/// `problems`, and `main` refuses to run (a usage error, exit 2) naming the variable.
enum Environment {
    private static let recorded = NIOLockedValueBox<[String]>([])

    /// What was wrong with the environment values read so far.
    static var problems: [String] { recorded.withLockedValue { $0 } }

    private static func problem(_ name: String, _ value: String, _ expected: String) {
        let line = "\(name)='\(value.prefix(40))' is not \(expected)"
        recorded.withLockedValue { if !$0.contains(line) { $0.append(line) } }
    }

    /// A secret: `value` (its flag), else the file `file` names (`fileFlag`), else the variable
    /// (or the file `VARIABLE_FILE` names), else the `--config` file's key. A file that cannot be
    /// read is a usage error naming where it was asked for.
    static func secret(_ value: String?, file: String?, fileFlag: String, variable: String) throws -> String? {
        if let value, !value.isEmpty { return value }
        do {
            if let file { return try SecretEnvironment.read(file, for: fileFlag) }
            if let value = try SecretEnvironment.value(variable) { return value }
        } catch let error as SecretFileError {
            throw ValidationError(error.description)
        }
        return ConfigFile.value(for: variable)?.value
    }

    /// Variable `name`, else its key in the `--config` file; with where it came from.
    private static func lookup(_ name: String) -> (value: String, source: String)? {
        if let value = ProcessInfo.processInfo.environment[name], !value.isEmpty { return (value, name) }
        return ConfigFile.value(for: name)
    }

    static func string(_ name: String) -> String? {
        guard let (value, source) = lookup(name) else { return nil }
        if value.isEmpty { problem(source, value, "a string") }
        return value.isEmpty ? nil : value
    }

    /// A repeatable flag's values: the variable (one value), or the config file's string or array.
    static func strings(_ name: String) -> [String]? {
        if let value = ProcessInfo.processInfo.environment[name], !value.isEmpty { return [value] }
        return ConfigFile.values(for: name)
    }

    static func int(_ name: String) -> Int? {
        guard let (text, source) = lookup(name) else { return nil }
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)) else {
            problem(source, text, "a whole number")
            return nil
        }
        return value
    }

    static func bool(_ name: String) -> Bool? {
        guard let (text, source) = lookup(name) else { return nil }
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default:
            problem(source, text, "a boolean (1/0, true/false, yes/no, on/off)")
            return nil
        }
    }

    /// A duration (`90s`, `30m`, `24h`, `7d`), or `fallback` when unset.
    static func duration(_ name: String, default fallback: TimeInterval) -> TimeInterval {
        guard let (text, source) = lookup(name) else { return fallback }
        guard let value = try? Duration.parse(text) else {
            problem(source, text, "a duration (e.g. 250ms, 90s, 30m, 24h, 7d)")
            return fallback
        }
        return value
    }
}

/// A path given on the command line, checked as a path before it is used, so that a missing
/// file is said to be missing (not malformed, nor an unknown name): a usage error, exit 2.
enum PathArgument {
    /// What is wrong with `path` as a file to read, or nil when it can be read.
    static func problem(_ path: String) -> String? {
        var directory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &directory) else {
            return "the file does not exist\(whereLooked(path))"
        }
        if directory.boolValue { return "it is a directory, not a file" }
        if !FileManager.default.isReadableFile(atPath: path) { return "permission denied" }
        return nil
    }

    /// " in <working directory>" for a relative path: where it was looked for.
    static func whereLooked(_ path: String) -> String {
        path.hasPrefix("/") ? "" : " in \(FileManager.default.currentDirectoryPath)"
    }

    /// A usage error naming `flag`, `path` and what is wrong with it (then `hint`), when something is.
    static func check(_ path: String?, _ flag: String, hint: String? = nil) throws {
        guard let path, let problem = problem(path) else { return }
        throw ValidationError("\(flag): cannot read \(path): \(problem)" + (hint.map { "; \($0)" } ?? ""))
    }
}

/// `--tls-cert` and `--tls-key` (serve's, apns-sandbox's), checked before anything is opened or
/// created: each a readable PEM file holding what its flag says, so that swapped files are named
/// as swapped instead of failing later as a bare `failedToLoadCertificate`.
enum TLSFiles {
    static func check(certificate: String, key: String, certificateFlag: String = "--tls-cert", keyFlag: String = "--tls-key") throws {
        try PathArgument.check(certificate, certificateFlag)
        try PathArgument.check(key, keyFlag)
        let certificateText = String(decoding: FileManager.default.contents(atPath: certificate) ?? Data(), as: UTF8.self)
        let keyText = String(decoding: FileManager.default.contents(atPath: key) ?? Data(), as: UTF8.self)
        let isCertificate = { (text: String) in text.contains("-----BEGIN CERTIFICATE-----") }
        let isKey = { (text: String) in text.contains("-----BEGIN ") && text.contains("PRIVATE KEY-----") }
        if !isCertificate(certificateText) && isKey(certificateText) && isCertificate(keyText) && !isKey(keyText) {
            throw ValidationError("\(certificateFlag) \(certificate) holds a private key and \(keyFlag) \(key) a certificate: they are swapped; give \(certificateFlag) \(key) \(keyFlag) \(certificate)")
        }
        guard isCertificate(certificateText) else {
            throw ValidationError(isKey(certificateText)
                ? "\(certificateFlag) \(certificate) holds a private key, not a certificate: give it to \(keyFlag), and the certificate (-----BEGIN CERTIFICATE-----) to \(certificateFlag)"
                : "\(certificateFlag) \(certificate) is not a PEM certificate: it has no -----BEGIN CERTIFICATE----- line (a DER file converts with openssl x509 -inform der -in FILE -out cert.pem)")
        }
        guard isKey(keyText) else {
            throw ValidationError(isCertificate(keyText)
                ? "\(keyFlag) \(key) holds a certificate, not a private key: give it to \(certificateFlag), and the key (-----BEGIN PRIVATE KEY-----) to \(keyFlag)"
                : "\(keyFlag) \(key) is not a PEM private key: it has no -----BEGIN PRIVATE KEY----- line")
        }
        if keyText.contains("ENCRYPTED") {
            throw ValidationError("\(keyFlag) \(key) is encrypted, and nothing here asks for its passphrase: decrypt it with openssl pkey -in \(key) -out key.pem")
        }
    }
}

/// `count` and the noun, singular for one: "1 device", "2 devices".
func counted(_ count: Int, _ singular: String, _ plural: String? = nil) -> String {
    "\(count) \(count == 1 ? singular : plural ?? singular + "s")"
}

/// A command that logs `ConfigFile.unreadWarning` itself, once its log handler is set up (so
/// that a JSON log stays all JSON).
protocol LogsConfigWarnings {}

/// Writes lines for a person at the terminal: results on stdout, words on stderr.
enum Terminal {
    static func error(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// Writes a line to stdout at once (unbuffered), so a reader sees it before a crash.
    static func out(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}

@main
enum Main {
    /// Parses `arguments` (the config file already loaded) and runs the command.
    private static func execute(_ arguments: [String]) async throws {
        var command = try RichPushCommand.parseAsRoot(arguments)
        if let problem = Environment.problems.first {
            throw ValidationError(problem)
        }
        if !(command is any LogsConfigWarnings), let warning = ConfigFile.unreadWarning {
            Terminal.error("warning: \(warning)")
        }
        if var asyncCommand = command as? any AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
    }

    static func main() async {
        do {
            var arguments = Array(CommandLine.arguments.dropFirst())
            try await ConfigFile.load(arguments: &arguments)
            try await execute(arguments)
        } catch {
            let code = RichPushCommand.exitCode(for: error)
            let message = RichPushCommand.fullMessage(for: error)
            if !message.isEmpty {
                if code == .success { print(message) } else { Terminal.error(message) }
            }
            // docs/configuration.md#commands: 2 on a usage error (ArgumentParser's own is 64).
            exit(code == .validationFailure ? 2 : code.rawValue)
        }
    }
}
