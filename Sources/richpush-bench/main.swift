import ArgumentParser
import BenchKit
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `richpush-bench`: HTTP/1.1 and HTTP/2 load, plain or over TLS, with HdrHistogram latencies (docs/operations.md#load-tool).
struct RichPushBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "richpush-bench",
        abstract: "HTTP/1.1 and HTTP/2 load generator, plain or over TLS, with exact latency percentiles.",
        discussion: """
            Closed loop by default; with --rate, an open loop whose latencies are measured from each request's intended start. \
            HTTP/1.1 keeps connections alive unless --new-connection; --http2 keeps --streams requests open on each connection \
            (ALPN h2 over https://, prior knowledge over http://).
            """)

    @Option(help: "Open connections.") var connections = 64
    @Option(help: "How long to run (e.g. 10s, 500ms, 2m; default 10s, or 10m as the cap of --requests).") var duration: String?
    @Option(help: "Stop once this many requests are answered (as h2load's -n; with --urls, its line count takes each line once).") var requests: Int?
    @Option(help: "Event-loop threads (default: one per core).") var threads = ProcessInfo.processInfo.activeProcessorCount
    @Option(help: "Total requests per second (open loop).") var rate: Double?
    @Option(name: .customLong("header"), help: "A request header, 'Name: value' (repeatable).") var headers: [String] = []
    @Option(help: "Request method.") var method = "GET"
    @Option(help: "A file sent as each request's body.") var bodyFile: String?
    @Option(help: "Seconds before an unanswered request counts as a timeout.") var timeout = "5s"
    @Flag(help: "Print one JSON object instead of the summary.") var json = false
    @Flag(help: "Add the mean and a latency percentile table to the summary.") var latency = false
    @Flag(help: "HTTP/2: by ALPN over https://, by prior knowledge over http://.") var http2 = false
    @Option(help: "HTTP/2 streams kept open on each connection.") var streams = 1
    @Option(help: "A file of paths or URLs of one server, one a line; each request takes the next line.") var urls: String?
    @Flag(help: "A new connection (and TLS handshake) for every request, as a phone's first fetch.") var newConnection = false
    @Flag(help: "https:// without checking the server's certificate.") var insecure = false
    @Option(help: "https:// trusting the certificates in this PEM file (default: the system's).") var ca: String?
    @Argument(help: "http(s)://host[:port]/path (with --urls, the server the file's paths go to)") var url: String?

    func run() async throws {
        try await execute()
    }

    /// Parses the options, runs the load, prints the result.
    func execute() async throws {
        var configuration: LoadConfiguration
        do {
            if let urls {
                guard let data = FileManager.default.contents(atPath: urls) else { throw LoadError("cannot read --urls \(urls)") }
                configuration = try LoadConfiguration(urls: String(decoding: data, as: UTF8.self), base: url)
            } else {
                guard let url else { throw LoadError("give the URL to load (http(s)://host[:port]/path), or --urls FILE") }
                configuration = try LoadConfiguration(url: url)
            }
            if insecure && ca != nil { throw LoadError("--insecure and --ca contradict each other: --ca checks the certificate, --insecure does not") }
            if (insecure || ca != nil) && !configuration.isTLS { throw LoadError("--insecure and --ca are for https:// URLs") }
            guard streams > 0 else { throw LoadError("--streams must be positive") }
            if streams > 1 && !http2 { throw LoadError("--streams is for HTTP/2: add --http2 (HTTP/1.1 sends one request at a time on a connection)") }
            configuration.duration = try LoadConfiguration.parseDuration(duration ?? (requests == nil ? "10s" : "10m"))
            if let requests, requests <= 0 { throw LoadError("--requests must be positive") }
            configuration.requests = requests
            configuration.timeout = try LoadConfiguration.parseDuration(timeout)
            for header in headers { try configuration.addHeader(header) }
        } catch let error as LoadError {
            throw ValidationError(error.description)
        }
        configuration.connections = connections
        configuration.http2 = http2
        configuration.streams = streams
        configuration.newConnection = newConnection
        configuration.insecure = insecure
        configuration.caFile = ca
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
