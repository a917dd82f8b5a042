import Foundation

/// Secrets from the environment, as Docker secrets give them: `NAME` itself, or `NAME_FILE`
/// naming a file that holds the value (its trailing newline dropped). The value is never part of
/// an error message.
public enum SecretEnvironment {
    /// `NAME`, else the contents of the file `NAME_FILE` names, else nil.
    public static func value(_ name: String, in environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String? {
        if let value = environment[name], !value.isEmpty { return value }
        guard let path = environment[name + "_FILE"], !path.isEmpty else { return nil }
        return try read(path, for: "\(name)_FILE")
    }

    /// The secret in the file at `path`, for the flag or variable `source` (named in errors).
    public static func read(_ path: String, for source: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw SecretFileError(description: "\(source): cannot read the file \(path)")
        }
        let value = text.trimmingCharacters(in: .newlines)
        guard !value.isEmpty else { throw SecretFileError(description: "\(source): the file \(path) is empty") }
        return value
    }
}

/// A secret file that could not be used.
public struct SecretFileError: Error, CustomStringConvertible {
    public let description: String
}
