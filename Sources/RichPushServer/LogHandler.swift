import Foundation
import Logging

/// A stderr log handler that renders metadata only when a message is actually logged.
///
/// swift-log's `StreamLogHandler` re-renders all metadata whenever one key is set, and
/// Hummingbird sets the request id on every request: measurable at tens of thousands of
/// requests per second, for lines that are mostly below the log level.
public struct RichPushLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String

    /// Creates a handler for `label` at `level`.
    public init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let extra = event.metadata { all.merge(extra) { _, new in new } }
        let rendered = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let timestamp = Date().formatted(.iso8601)
        let line = "\(timestamp) \(event.level) \(label):\(rendered) \(event.message)\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
}
