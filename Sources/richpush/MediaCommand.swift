import ArgumentParser
import Foundation
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

#if canImport(Glibc)
import Glibc
#endif

struct MediaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "media",
        abstract: "Add, list, inspect, remove, verify and collect images in the media store.",
        subcommands: [Add.self, List.self, Show.self, Remove.self, Verify.self, GC.self]
    )
}

extension MediaItem {
    /// The JSON object of `media list --json` / `media show --json`.
    var json: [String: any Sendable] {
        [
            "sha256": id.hex, "contentType": info.contentType, "width": info.width, "height": info.height,
            "size": size, "bitDepth": info.bitDepth, "colorModel": info.colorModel, "interlaced": info.interlaced,
            "names": names, "references": references,
            "created": ISO8601DateFormatter().string(from: createdAt),
        ]
    }
}

enum JSONOut {
    /// One compact JSON line with sorted keys.
    static func line(_ object: [String: any Sendable]) -> String {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }

    /// A list command's `--json`: one JSON array (sorted keys) on one line; `[]` when empty.
    static func array(_ objects: [[String: Any]]) -> String {
        let data = try! JSONSerialization.data(withJSONObject: objects, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }
}

/// A list command's table: a header row, then the rows, tab-separated; nothing on stdout when
/// there are no rows, and `empty` on stderr instead (an empty answer is said, not silent).
enum ListTable {
    static func print(_ header: [String], _ rows: [[String]], empty: String) {
        guard !rows.isEmpty else {
            Terminal.error(empty)
            return
        }
        Swift.print(header.joined(separator: "\t"))
        for row in rows { Swift.print(row.joined(separator: "\t")) }
    }
}

extension MediaCommand {
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate and store images (files or directories, recursively).",
            discussion: """
                Prints `<sha256> <content-type> <width>x<height> <bytes> <path>` for each stored file and \
                `error: <path>: <class>: <reason>` on stderr for each rejected one. Exit 0 when all were \
                accepted, 1 when any was rejected, 2 on a usage error.
                """)

        @OptionGroup var dataOptions: DataOptions
        @OptionGroup var limitOptions: LimitOptions
        @Option(help: "Name for the (single) file, usable in API calls in place of its hash.")
        var name: String?
        @Flag(help: "One JSON object per file on stdout.")
        var json = false
        @Argument(help: "Files or directories.")
        var paths: [String]

        func validate() throws {
            if let name {
                if paths.count != 1 || isDirectory(paths[0]) { throw ValidationError("--name needs exactly one file") }
                do { try MediaIndex.validateName(name) } catch { throw ValidationError("\(error)") }
            }
        }

        func run() async throws {
            let store = try await dataOptions.openMediaStore(limits: limitOptions.limits)
            var files: [String] = []
            var failed = false
            for path in paths {
                guard FileManager.default.fileExists(atPath: path) else {
                    report(path: path, error: "missing", reason: "no such file or directory")
                    failed = true
                    continue
                }
                files += isDirectory(path) ? Self.walk(path) : [path]
            }
            let allFiles = files
            let progress = Progress(total: files.count, enabled: Terminal.stderrIsTerminal && files.count > 1)
            let name = self.name
            let command = self
            // docs/operations.md#audit-log: each image stored, in the transaction that records it.
            let audit = Audit.media(AuditActor.cli(), "media.add", name: name)
            // Results are printed in input order, each as soon as it and all before it are done.
            let sink = OrderedSink { index, result in
                progress.clear()
                let accepted = command.emit(path: allFiles[index], result: result)
                progress.redraw()
                return accepted
            }
            await Concurrently.forEach(count: allFiles.count, width: max(2, ProcessInfo.processInfo.activeProcessorCount * 2)) { index in
                let result: Result<IngestResult, any Error>
                do { result = .success(try await store.ingest(file: allFiles[index], name: name, also: audit)) }
                catch { result = .failure(error) }
                sink.deliver(index, result) { progress.advance(bytes: (try? result.get().item.size) ?? 0) }
            }
            if sink.anyRejected { failed = true }
            progress.finish()
            if failed { throw ExitCode(1) }
        }

        /// Prints one file's outcome; returns false for a rejection.
        func emit(path: String, result: Result<IngestResult, any Error>) -> Bool {
            switch result {
            case .success(let r):
                if json {
                    Terminal.out(JSONOut.line([
                        "path": path, "sha256": r.item.id.hex, "contentType": r.item.info.contentType,
                        "width": r.item.info.width, "height": r.item.info.height, "size": r.item.size,
                        "status": r.status.rawValue, "stripped": r.stripped.map(\.rawValue),
                    ]))
                } else {
                    Terminal.out("\(r.item.id.hex) \(r.item.info.contentType) \(r.item.info.width)x\(r.item.info.height) \(r.item.size) \(path)")
                }
                return true
            case .failure(let error as MediaRejection):
                report(path: path, error: error.kind.rawValue, reason: error.reason)
            case .failure(let error):
                report(path: path, error: "error", reason: "\(error)")
            }
            return false
        }

        private func report(path: String, error kind: String, reason: String) {
            if json {
                Terminal.out(JSONOut.line(["path": path, "error": ["class": kind, "reason": reason]]))
            } else {
                Terminal.error("error: \(path): \(kind): \(reason)")
            }
        }

        static func walk(_ directory: String) -> [String] {
            let base = URL(fileURLWithPath: directory)
            guard let enumerator = FileManager.default.enumerator(
                at: base, includingPropertiesForKeys: [.isRegularFileKey], options: [.skipsHiddenFiles])
            else { return [] }
            var files: [String] = []
            for case let url as URL in enumerator {
                if (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
                    let relative = url.path.dropFirst(base.path.count).drop(while: { $0 == "/" })
                    files.append(directory.hasSuffix("/") ? directory + relative : directory + "/" + relative)
                }
            }
            return files.sorted()
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List stored images, newest first: sha256, type, size, bytes, names.")
        @OptionGroup var dataOptions: DataOptions
        @Flag(help: "A JSON array of the images (as media show --json).") var json = false

        func run() async throws {
            let store = try await dataOptions.openMediaStore()
            let items = try await store.list(variants: false)
            if json {
                print(JSONOut.array(items.map { $0.json.mapValues { $0 as Any } }))
                return
            }
            ListTable.print(["SHA256", "TYPE", "SIZE", "BYTES", "NAMES"], items.map { item in
                [item.id.hex, item.info.contentType, "\(item.info.width)x\(item.info.height)", String(item.size),
                 item.names.isEmpty ? "-" : item.names.joined(separator: ",")]
            }, empty: "no images yet: richpush media add FILE stores one")
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one image by id or name.")
        @OptionGroup var dataOptions: DataOptions
        @Flag(help: "As a JSON object.") var json = false
        @Argument(help: "Media id (64 hex) or name.") var key: String

        func run() async throws {
            let store = try await dataOptions.openMediaStore()
            guard let item = try await store.resolve(key) else {
                Terminal.error("error: no media with id or name '\(key)'")
                throw ExitCode(1)
            }
            if json {
                print(JSONOut.line(item.json.merging(["path": store.blobPath(item.id)]) { a, _ in a }))
                return
            }
            print("""
                sha256:       \(item.id.hex)
                content-type: \(item.info.contentType)
                dimensions:   \(item.info.width)x\(item.info.height)
                size:         \(counted(item.size, "byte"))
                bit depth:    \(item.info.bitDepth)
                color model:  \(item.info.colorModel)
                \(item.info.contentType == "image/png" ? "interlaced: " : "progressive:")  \(item.info.interlaced ? "yes" : "no")
                names:        \(item.names.isEmpty ? "-" : item.names.joined(separator: ", "))
                references:   \(item.references)
                created:      \(ISO8601DateFormatter().string(from: item.createdAt))
                path:         \(store.blobPath(item.id))
                """)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm",
            abstract: "Remove a name, or an image with all its names.",
            discussion: "A name is removed, and its image too when nothing else names or uses it. An id removes the image and its names, unless a notification uses it.")
        @OptionGroup var dataOptions: DataOptions
        @Argument(help: "Media id (64 hex) or name.") var key: String

        func run() async throws {
            let store = try await dataOptions.openMediaStore()
            do {
                let removal = try await store.remove(key, also: Audit.media(AuditActor.cli(), "media.remove", name: MediaID(key) == nil ? key : nil))
                if let name = removal.name { print("removed name \(name)") }
                if let id = removal.deletedBlob { print("removed \(id.hex)") }
            } catch let error as MediaStoreError {
                Terminal.error("error: \(error.message)")
                throw ExitCode(1)
            }
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-hash every blob and check the index against the files; exit 1 listing every problem.")
        @OptionGroup var dataOptions: DataOptions

        func run() async throws {
            let store = try await dataOptions.openMediaStore()
            let (checked, problems) = try await store.verify()
            for problem in problems { Terminal.error("problem: \(problem)") }
            print("\(counted(checked, "blob")) checked, \(counted(problems.count, "problem"))")
            if !problems.isEmpty { throw ExitCode(1) }
        }
    }

    struct GC: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "gc",
            abstract: "Delete blobs that nothing names or references and that are older than the grace period.")
        @OptionGroup var dataOptions: DataOptions
        @Option(help: "How long an unreferenced blob is kept (e.g. 250ms, 90s, 30m, 24h, 7d).", transform: Duration.parse)
        var grace: TimeInterval = 24 * 3600

        func run() async throws {
            let data = try await dataOptions.open()
            let report = try await data.media.collectGarbage(grace: grace)
            if !report.removed.isEmpty {
                // docs/operations.md#audit-log: several transactions of the media store's, so one entry after them.
                try await data.audit.record(AuditEntry(AuditActor.cli(), "media.gc", detail: ["removed": .integer(Int64(report.removed.count)),
                                                                                               "freedBytes": .integer(Int64(report.freedBytes))]))
            }
            for id in report.removed { print("removed \(id.hex)") }
            print("\(counted(report.removed.count, "blob")) and \(counted(report.orphansRemoved, "orphan file")) removed, \(counted(report.freedBytes, "byte")) freed")
        }
    }
}

enum Duration {
    /// Parses `90`, `250ms`, `90s`, `30m`, `24h`, `7d`.
    static func parse(_ text: String) throws -> TimeInterval {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var number = Substring(text)
        var scale = 1.0
        if text.hasSuffix("ms") {
            number = number.dropLast(2)
            scale = 0.001
        } else if let last = text.last, let unit = units[last] {
            number = number.dropLast()
            scale = unit
        }
        guard let value = Double(number), value >= 0 else {
            throw ValidationError("'\(text)' is not a duration (e.g. 250ms, 90s, 30m, 24h, 7d)")
        }
        return value * scale
    }
}

func isDirectory(_ path: String) -> Bool {
    var isDir: ObjCBool = false
    return FileManager.default.fileExists(atPath: path, isDirectory: &isDir) && isDir.boolValue
}

/// Releases results in input order although they complete out of order; safe from any task.
final class OrderedSink: @unchecked Sendable {
    private let lock = NIOLock()
    private var pending: [Int: Result<IngestResult, any Error>] = [:]
    private var released = 0
    private var rejected = false
    private let emit: (Int, Result<IngestResult, any Error>) -> Bool

    /// `emit` prints one result and returns false for a rejection; it runs under the sink's lock.
    init(emit: @escaping (Int, Result<IngestResult, any Error>) -> Bool) {
        self.emit = emit
    }

    /// Records result `index`, runs `also` under the lock, and emits every result now in order.
    func deliver(_ index: Int, _ result: Result<IngestResult, any Error>, also: () -> Void) {
        lock.withLock {
            also()
            pending[index] = result
            while let next = pending.removeValue(forKey: released) {
                if !emit(released, next) { rejected = true }
                released += 1
            }
        }
    }

    /// True when any emitted result was a rejection.
    var anyRejected: Bool { lock.withLock { rejected } }
}

/// A one-line progress display on a terminal's stderr.
final class Progress: @unchecked Sendable { // used under OrderedSink's lock only
    private let total: Int
    private let enabled: Bool
    private var done = 0
    private var bytes = 0
    private let start = Date()

    init(total: Int, enabled: Bool) {
        self.total = total
        self.enabled = enabled
    }

    func advance(bytes: Int) {
        done += 1
        self.bytes += bytes
        redraw()
    }

    func redraw() {
        guard enabled, done > 0 else { return }
        let seconds = max(Date().timeIntervalSince(start), 0.001)
        let mb = Double(self.bytes) / 1_000_000
        let line = String(format: "[%d/%d] %.1f MB stored, %.1f MB/s, %.0f images/s", done, total, mb, mb / seconds, Double(done) / seconds)
        FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8))
    }

    func clear() {
        if enabled { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    func finish() {
        guard enabled else { return }
        clear()
    }
}
