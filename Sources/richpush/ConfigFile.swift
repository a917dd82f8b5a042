import ArgumentParser
import Configuration
import Foundation
import NIOConcurrencyHelpers
import RichPushCore
import SystemPackage

/// `--config FILE` (env `RICHPUSH_CONFIG`): a JSON file that carries any flag that has an
/// environment variable, read through swift-configuration. A flag's key is its long name
/// (`RICHPUSH_LOG_FORMAT` and `--log-format` are `"log-format"`); values are strings, numbers,
/// booleans, or arrays of strings for repeatable flags (`"push-ca"`). A flag on the command line
/// wins over the environment, which wins over the file.
enum ConfigFile {
    private struct Loaded {
        var reader: ConfigReader
        var path: String
        var keys: Set<String>
        var read: Set<String> = []
    }
    private static let loaded = NIOLockedValueBox<Loaded?>(nil)

    /// Takes `--config FILE` (or `--config=FILE`) out of `arguments`, or `RICHPUSH_CONFIG` from
    /// the environment, and loads that file.
    static func load(arguments: inout [String]) async throws {
        var path = ProcessInfo.processInfo.environment["RICHPUSH_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        if let index = arguments.firstIndex(where: { $0 == "--config" || $0.hasPrefix("--config=") }) {
            if arguments[index] == "--config" {
                guard index + 1 < arguments.count else { throw ValidationError("--config needs a file") }
                path = arguments[index + 1]
                arguments.removeSubrange(index...(index + 1))
            } else {
                path = String(arguments[index].dropFirst("--config=".count))
                arguments.remove(at: index)
            }
        }
        guard let path else { return }
        guard FileManager.default.isReadableFile(atPath: path) else { throw ValidationError("--config (env RICHPUSH_CONFIG): cannot read \(path)") }
        // The keys, for the error on one that no flag has.
        guard let data = FileManager.default.contents(atPath: path),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { throw ValidationError("--config \(path): not a JSON object of flag names and values") }
        let provider: FileProvider<JSONSnapshot>
        do {
            provider = try await FileProvider<JSONSnapshot>(filePath: FilePath(path))
        } catch {
            throw ValidationError("--config \(path): \(error)")
        }
        loaded.withLockedValue { $0 = Loaded(reader: ConfigReader(provider: provider), path: path, keys: Set(object.keys)) }
    }

    /// Keys of the file that no flag of the command that ran read (a typo, or another command's).
    static var unread: [String] {
        loaded.withLockedValue { file in file.map { $0.keys.subtracting($0.read).sorted() } ?? [] }
    }

    /// What to say about `unread` keys, if any.
    static var unreadWarning: String? {
        let unread = self.unread
        guard !unread.isEmpty else { return nil }
        // A key near one the command's flags asked for is most likely that one, misspelt.
        let asked = loaded.withLockedValue { $0?.read ?? [] }
        let hints = unread.compactMap { key in EditDistance.nearest(to: key, in: asked).map { "did you mean \"\($0)\" for \"\(key)\"?" } }
        return "--config: no flag of this command reads \(unread.map { "\"\($0)\"" }.joined(separator: ", "))"
            + (hints.isEmpty ? "" : "; " + hints.joined(separator: " "))
    }

    /// The key of environment variable `name` (`RICHPUSH_LOG_FORMAT` → `log-format`).
    static func key(_ name: String) -> String {
        (name.hasPrefix("RICHPUSH_") ? String(name.dropFirst(9)) : name).lowercased().replacingOccurrences(of: "_", with: "-")
    }

    /// The file's value for environment variable `name`, as text; `source` names it for errors.
    static func value(for name: String) -> (value: String, source: String)? {
        let key = Self.key(name)
        guard let file = loaded.withLockedValue({ loaded -> Loaded? in loaded?.read.insert(key); return loaded }) else { return nil }
        guard file.keys.contains(key) else { return nil }
        let configKey = ConfigKey([key])
        let source = "\"\(key)\" in \(file.path)"
        if let text = file.reader.string(forKey: configKey, isSecret: true) { return (text, source) }
        if let number = file.reader.int(forKey: configKey) { return (String(number), source) }
        if let number = file.reader.double(forKey: configKey) { return (String(number), source) }
        if let flag = file.reader.bool(forKey: configKey) { return (flag ? "true" : "false", source) }
        if let list = file.reader.stringArray(forKey: configKey, isSecret: true) { return (list.joined(separator: ","), source) }
        return ("", source)
    }

    /// The file's values for a repeatable flag (a string or an array of strings).
    static func values(for name: String) -> [String]? {
        let key = Self.key(name)
        guard let file = loaded.withLockedValue({ loaded -> Loaded? in loaded?.read.insert(key); return loaded }), file.keys.contains(key) else { return nil }
        let configKey = ConfigKey([key])
        return file.reader.stringArray(forKey: configKey) ?? file.reader.string(forKey: configKey).map { [$0] }
    }
}
