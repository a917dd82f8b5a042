import ArgumentParser
import BenchKit
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `richpush-bench`: keep-alive HTTP/1.1 load with HdrHistogram latencies (docs/operations.md#load-tool).
struct RichPushBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "richpush-bench",
        abstract: "Keep-alive HTTP/1.1 load generator with exact latency percentiles.",
        discussion: "Closed loop by default; with --rate, an open loop whose latencies are measured from each request's intended start.")

    @Option(help: "Open connections.") var connections = 64
    @Option(help: "How long to run (e.g. 10s, 500ms, 2m).") var duration = "10s"
    @Option(help: "Event-loop threads (default: one per core).") var threads = ProcessInfo.processInfo.activeProcessorCount
    @Option(help: "Total requests per second (open loop).") var rate: Double?
    @Option(name: .customLong("header"), help: "A request header, 'Name: value' (repeatable).") var headers: [String] = []
    @Option(help: "Request method.") var method = "GET"
    @Option(help: "A file sent as each request's body.") var bodyFile: String?
    @Option(help: "Seconds before an unanswered request counts as a timeout.") var timeout = "5s"
    @Flag(help: "Print one JSON object instead of the summary.") var json = false
    @Flag(help: "Add the mean and a latency percentile table to the summary.") var latency = false
    @Argument(help: "http://host[:port]/path") var url: String

    func run() async throws {
        try await execute()
    }

    /// Parses the options, runs the load, prints the result.
    func execute() async throws {
        var configuration: LoadConfiguration
        do {
            configuration = try LoadConfiguration(url: url)
            configuration.duration = try LoadConfiguration.parseDuration(duration)
            configuration.timeout = try LoadConfiguration.parseDuration(timeout)
            for header in headers { try configuration.addHeader(header) }
        } catch let error as LoadError {
            throw ValidationError(error.description)
        }
        configuration.connections = connections
        configuration.threads = max(1, min(threads, connections))
        configuration.rate = rate
        configuration.method = method
        if let bodyFile {
            guard let data = FileManager.default.contents(atPath: bodyFile) else { throw ValidationError("cannot read --body-file \(bodyFile)") }
            configuration.body = [UInt8](data)
        }
        let live = isatty(STDERR_FILENO) == 1
        let result = try await LoadGenerator.run(configuration) { second, requests, errors in
            guard live else { return }
            FileHandle.standardError.write(Data("\r\u{1B}[K  \(second)s  \(requests) req/s  \(errors) errors".utf8))
        }
        if live { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        print(json ? result.json() : result.summary(configuration: configuration, distribution: latency))
    }
}

// ArgumentParser exits 64 on usage errors; the richpush CLIs use 2.
do {
    var command = try RichPushBench.parseAsRoot()
    if let bench = command as? RichPushBench {
        try await bench.execute()
    } else {
        try command.run()
    }
} catch {
    let code = RichPushBench.exitCode(for: error)
    let message = RichPushBench.fullMessage(for: error)
    if !message.isEmpty {
        if code == .success { print(message) } else { FileHandle.standardError.write(Data((message + "\n").utf8)) }
    }
    exit(code == .validationFailure ? 2 : code.rawValue)
}
