import Foundation
import Logging

/// How log lines are written: `text` is logfmt (`key=value`, values quoted when they must be),
/// `json` one JSON object per line, for log shippers.
public enum LogFormat: String, Sendable, CaseIterable {
    case text
    case json
}

/// A stderr log handler that renders metadata only when a message is actually logged.
///
/// swift-log's `StreamLogHandler` re-renders all metadata whenever one key is set, and
/// Hummingbird sets the request id on every request: measurable at tens of thousands of
/// requests per second, for lines that are mostly below the log level.
///
/// Every line carries `time`, `level`, `logger` and `msg`, then the metadata sorted by key.
public struct RichPushLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let format: LogFormat
    private let write: @Sendable (String) -> Void

    /// Creates a handler for `label` at `level`, writing `format` lines to stderr (or to `write`).
    public init(label: String, level: Logger.Level, format: LogFormat = .text,
                write: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data($0.utf8)) }) {
        self.label = label
        self.logLevel = level
        self.format = format
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let extra = event.metadata { all.merge(extra) { _, new in new } }
        let fields: [(String, Logger.MetadataValue)] = [
            ("time", .string(Date().formatted(.iso8601))), ("level", .string(event.level.rawValue)),
            ("logger", .string(label)), ("msg", .string(event.message.description)),
        ] + all.sorted { $0.key < $1.key }.filter { !["time", "level", "logger", "msg"].contains($0.key) }.map { ($0.key, $0.value) }
        switch format {
        case .text: write(fields.map { "\(Self.logfmtKey($0.0))=\(Self.logfmtValue($0.1))" }.joined(separator: " ") + "\n")
        case .json: write("{" + fields.map { "\(Self.jsonString($0.0)):\(Self.json($0.1))" }.joined(separator: ",") + "}\n")
        }
    }

    /// A logfmt key: letters, digits and `_ . - /`; anything else becomes `_`.
    static func logfmtKey(_ key: String) -> String {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/")
        let cleaned = String(key.map { allowed.contains($0) ? $0 : "_" })
        return cleaned.isEmpty ? "_" : cleaned
    }

    /// A logfmt value: bare when it can be, else double-quoted with `\"`, `\\` and control
    /// characters escaped.
    static func logfmtValue(_ value: Logger.MetadataValue) -> String {
        let text = flat(value)
        let bare = !text.isEmpty && text.unicodeScalars.allSatisfy { $0.value > 0x20 && $0 != "\"" && $0 != "=" && $0 != "\\" && $0.value != 0x7F }
        return bare ? text : jsonString(text)
    }

    /// A metadata value as one string (nested values as JSON).
    static func flat(_ value: Logger.MetadataValue) -> String {
        switch value {
        case .string(let text): text
        case .stringConvertible(let convertible): convertible.description
        case .array, .dictionary: json(value)
        }
    }

    /// A metadata value as JSON: strings, arrays and objects as they are.
    static func json(_ value: Logger.MetadataValue) -> String {
        switch value {
        case .string(let text): jsonString(text)
        case .stringConvertible(let convertible): jsonString(convertible.description)
        case .array(let values): "[" + values.map(json).joined(separator: ",") + "]"
        case .dictionary(let entries): "{" + entries.sorted { $0.key < $1.key }.map { "\(jsonString($0.key)):\(json($0.value))" }.joined(separator: ",") + "}"
        }
    }

    /// A JSON string literal.
    static func jsonString(_ text: String) -> String {
        var out = "\""
        out.reserveCapacity(text.utf8.count + 2)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || scalar.value == 0x2028 || scalar.value == 0x2029 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
