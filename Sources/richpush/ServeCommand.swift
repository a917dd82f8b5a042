import HTTPEdge
import ArgumentParser
import Foundation
import Hummingbird
import Logging
import MediaStore
import NIOConcurrencyHelpers
import PushDelivery
import RichPushCore
import RichPushServer
import ServiceLifecycle

struct ServeCommand: AsyncParsableCommand, LogsConfigWarnings {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the HTTP service (media store and the rich-push notification API).",
        discussion: "Every option also reads RICHPUSH_<OPTION> from the environment, e.g. RICHPUSH_PORT=9000.")

    @OptionGroup var dataOptions: DataOptions
    @OptionGroup var limitOptions: LimitOptions
    @OptionGroup var providerFlags: ProviderFlags
    @OptionGroup var urlOptions: PayloadURLOptions
    @Option(help: "How long a session token from POST /api/sessions works, e.g. 30d (env RICHPUSH_SESSION_TTL).", transform: Duration.parse)
    var sessionTtl: TimeInterval = Environment.duration("RICHPUSH_SESSION_TTL", default: 90 * 86_400)
    @Option(help: "Failed sign-ins per user name in 5 minutes before further attempts get 429 (per client address: five times as many); 0 turns the throttle off, e.g. behind a proxy that limits sign-ins itself (env RICHPUSH_FAILED_SIGN_INS).")
    var failedSignIns: Int = Environment.int("RICHPUSH_FAILED_SIGN_INS") ?? 10
    @Option(help: "Notifications one user may create a minute with POST /api/notifications (a minute's worth at once); past it, 429 with Retry-After; 0 turns the limit off (env RICHPUSH_NOTIFICATIONS_PER_MINUTE).")
    var notificationsPerMinute: Int = Environment.int("RICHPUSH_NOTIFICATIONS_PER_MINUTE") ?? 60
    @Option(help: "Opens one client address may report a minute (POST /p/TOKEN/opened needs no credentials); past it, 429 with Retry-After; 0 turns the limit off (env RICHPUSH_OPENS_PER_MINUTE).")
    var opensPerMinute: Int = Environment.int("RICHPUSH_OPENS_PER_MINUTE") ?? 600
    @Option(help: "How many days the audit log keeps who changed what (docs/operations.md#audit-log); older entries are removed hourly (env RICHPUSH_AUDIT_DAYS).")
    var auditDays: Int = Environment.int("RICHPUSH_AUDIT_DAYS") ?? AuditStore.defaultRetentionDays
    @Option(help: "Address to listen on (env RICHPUSH_HOST).")
    var host: String = Environment.string("RICHPUSH_HOST") ?? "127.0.0.1"
    @Option(help: "Port to listen on (env RICHPUSH_PORT).")
    var port: Int = Environment.int("RICHPUSH_PORT") ?? 8080
    @Flag(inversion: .prefixedNo, help: "Accept any user whose password equals the user name, as the tutorial's test handler did (env RICHPUSH_DEMO_AUTH).")
    var demoAuth: Bool = Environment.bool("RICHPUSH_DEMO_AUTH") ?? false
    @Flag(inversion: .prefixedNo, help: "Serve /media/{sha256} without credentials, cacheable publicly (env RICHPUSH_PUBLIC_MEDIA).")
    var publicMedia: Bool = Environment.bool("RICHPUSH_PUBLIC_MEDIA") ?? false
    @Option(help: "Media name used when a notification names no payload; ingested from media/<name> on start when missing (env RICHPUSH_DEFAULT_IMAGE).")
    var defaultImage: String = Environment.string("RICHPUSH_DEFAULT_IMAGE") ?? "logo.png"
    @Option(help: "Event-loop threads, 0 for one per core (env RICHPUSH_THREADS).")
    var threads: Int = Environment.int("RICHPUSH_THREADS") ?? 0
    @Option(help: "Connections open at once; past it, new ones wait to be accepted (env RICHPUSH_MAX_CONNECTIONS).")
    var maxConnections: Int = Environment.int("RICHPUSH_MAX_CONNECTIONS") ?? 4_096
    @Option(help: ArgumentHelp("Serve HTTPS with this certificate chain (PEM), HTTP/2 and HTTP/1.1 by ALPN; with --tls-key (env RICHPUSH_TLS_CERT).",
                               valueName: "pem"))
    var tlsCert: String?
    @Option(help: ArgumentHelp("The certificate's private key (PEM) (env RICHPUSH_TLS_KEY).", valueName: "pem"))
    var tlsKey: String?
    @Option(help: ArgumentHelp("Session-ticket keys every node shares, so that a TLS session resumes on any (docs/operations.md#several-nodes-behind-one-name): one a line, base64 of 80 random bytes, the first encrypting; re-read when the file changes; with --tls-cert (env RICHPUSH_TLS_TICKET_KEYS).",
                               valueName: "file"))
    var tlsTicketKeys: String?
    // Hidden: the tests look at the file every second.
    @Option(help: ArgumentHelp("How often the --tls-ticket-keys file is looked at for a change, e.g. 1s (env RICHPUSH_TLS_TICKET_KEYS_CHECK).",
                               visibility: .hidden),
            transform: Duration.parse)
    var tlsTicketKeysCheck: TimeInterval = Environment.duration("RICHPUSH_TLS_TICKET_KEYS_CHECK", default: 10)
    /// `--tls-cert`, else its variable (an optional flag's default cannot be read from the environment).
    private var certificatePath: String? { tlsCert ?? Environment.string("RICHPUSH_TLS_CERT") }
    private var keyPath: String? { tlsKey ?? Environment.string("RICHPUSH_TLS_KEY") }
    private var ticketKeysPath: String? { tlsTicketKeys ?? Environment.string("RICHPUSH_TLS_TICKET_KEYS") }
    @OptionGroup var logOptions: LogOptions
    @Option(help: "Log each request at info: off, on, or the fraction of requests to log, e.g. 0.01 (env RICHPUSH_ACCESS_LOG).")
    var accessLog: String = Environment.string("RICHPUSH_ACCESS_LOG") ?? "off"
    @Option(help: ArgumentHelp("A reverse proxy (an address or a block: 10.0.0.0/8, 172.28.0.10, fd00::/8) whose X-Forwarded-For names the client, so that the sign-in throttle and the access log see clients, not the proxy; repeatable (env RICHPUSH_TRUSTED_PROXY, comma-separated).",
                               valueName: "cidr"))
    var trustedProxy: [String] = Environment.strings("RICHPUSH_TRUSTED_PROXY") ?? []
    @Option(help: ArgumentHelp("Serve /metrics only on this port (of --host), for Prometheus; the main port then answers 404 for it (env RICHPUSH_METRICS_PORT).",
                               valueName: "port"))
    var metricsPort: Int?
    @Option(help: ArgumentHelp("A JSON file of apps (docs/configuration.md#the-apps-file), each with its own credentials: {\"apps\":[{\"name\",\"apns\":{…},\"fcm\":{…},\"webpush\":{…},\"hub\":{…}}]}; the push flags configure the app named default (env RICHPUSH_APPS).",
                               valueName: "file"))
    var apps: String?
    private var appsPath: String? { apps ?? Environment.string("RICHPUSH_APPS") }
    @Option(help: ArgumentHelp("The app default's frequency cap (docs/api.md#frequency-caps-and-quiet-hours): at most N campaign pushes to a user per rolling PERIOD, e.g. 3/24h or 10/7d; other apps set theirs in --apps (env RICHPUSH_FREQUENCY_CAP).",
                               valueName: "N/PERIOD"))
    var frequencyCap: String = Environment.string("RICHPUSH_FREQUENCY_CAP") ?? ""
    @Option(help: ArgumentHelp("The app default's quiet hours in each user's time zone (docs/api.md#frequency-caps-and-quiet-hours): FROM-TO, then /delay (hold campaign pushes to the end, the default) or /drop, e.g. 22:00-08:00 or 21:30-07:00/drop (env RICHPUSH_QUIET_HOURS).",
                               valueName: "FROM-TO[/MODE]"))
    var quietHours: String = Environment.string("RICHPUSH_QUIET_HOURS") ?? ""
    @Option(help: ArgumentHelp("Send OpenTelemetry traces over OTLP/HTTP to this collector, e.g. http://127.0.0.1:4318 (docs/operations.md#traces); OTEL_EXPORTER_OTLP_ENDPOINT does the same, and the other OTEL_* variables apply. Off when neither is set.",
                               valueName: "url"))
    var otelEndpoint: String?
    @Option(help: ArgumentHelp("A trace viewer's URL with {traceId} in it, e.g. http://grafana:3000/explore?left=… or http://jaeger:16686/trace/{traceId}: the console links each campaign made while tracing was on to its trace (env RICHPUSH_TRACE_URL).",
                               valueName: "url"))
    var traceUrl: String = Environment.string("RICHPUSH_TRACE_URL") ?? ""
    /// `--frequency-cap` and `--quiet-hours`, read.
    private var defaultLimits: AppLimits {
        get throws {
            var limits = AppLimits()
            do {
                if !frequencyCap.isEmpty { limits.frequencyCap = try FrequencyCap(frequencyCap) }
            } catch let error as CoreError { throw ValidationError("--frequency-cap (env RICHPUSH_FREQUENCY_CAP): \(error.message)") }
            do {
                if !quietHours.isEmpty { limits.quietHours = try QuietHours(quietHours) }
            } catch let error as CoreError { throw ValidationError("--quiet-hours (env RICHPUSH_QUIET_HOURS): \(error.message)") }
            return limits
        }
    }
    /// `--trusted-proxy`'s values, comma-separated lists split.
    private var trustedProxyBlocks: [String] {
        trustedProxy.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
    /// `--metrics-port`, else its variable (an optional flag's default cannot be read from the environment).
    private var metricsPortValue: Int? { metricsPort ?? Environment.int("RICHPUSH_METRICS_PORT") }

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0 to 65535") }
        guard (0...256).contains(threads) else { throw ValidationError("--threads must be 0 to 256") }
        guard (certificatePath == nil) == (keyPath == nil) else {
            throw ValidationError("--tls-cert and --tls-key (env RICHPUSH_TLS_CERT, RICHPUSH_TLS_KEY) go together")
        }
        // Before anything is opened or created: a missing, unreadable or swapped file is named.
        if let certificatePath, let keyPath { try TLSFiles.check(certificate: certificatePath, key: keyPath) }
        if let ticketKeysPath {
            guard certificatePath != nil else {
                throw ValidationError("--tls-ticket-keys goes with --tls-cert and --tls-key (env RICHPUSH_TLS_TICKET_KEYS, RICHPUSH_TLS_CERT): session tickets are TLS's")
            }
            try PathArgument.check(ticketKeysPath, "--tls-ticket-keys")
            do {
                _ = try TLSTicketKeys(path: ticketKeysPath)
            } catch {
                throw ValidationError("--tls-ticket-keys (env RICHPUSH_TLS_TICKET_KEYS): \(error)")
            }
        }
        guard tlsTicketKeysCheck > 0 else { throw ValidationError("--tls-ticket-keys-check must be more than 0") }
        guard AccessLog.fraction(accessLog) != nil else {
            throw ValidationError("--access-log (env RICHPUSH_ACCESS_LOG) '\(accessLog)' is not off, on or a fraction in (0, 1]")
        }
        guard failedSignIns >= 0 else { throw ValidationError("--failed-sign-ins must be 0 (off) or more") }
        for block in trustedProxyBlocks where CIDR(block) == nil {
            throw ValidationError("--trusted-proxy (env RICHPUSH_TRUSTED_PROXY) '\(block.prefix(60))' is not an IP address or block, e.g. 10.0.0.0/8, 172.28.0.10 or fd00::/8")
        }
        if let metricsPort = metricsPortValue {
            guard (1...65535).contains(metricsPort) else { throw ValidationError("--metrics-port (env RICHPUSH_METRICS_PORT) must be 1 to 65535") }
            guard metricsPort != port else { throw ValidationError("--metrics-port must differ from --port") }
        }
        _ = try defaultLimits
        if !traceUrl.isEmpty {
            guard traceUrl.contains("{traceId}"), traceUrl.hasPrefix("http://") || traceUrl.hasPrefix("https://") else {
                throw ValidationError("--trace-url (env RICHPUSH_TRACE_URL) must be an http(s) URL with {traceId} in it, e.g. http://jaeger:16686/trace/{traceId}")
            }
        }
        guard notificationsPerMinute >= 0 else { throw ValidationError("--notifications-per-minute must be 0 (off) or more") }
        guard opensPerMinute >= 0 else { throw ValidationError("--opens-per-minute must be 0 (off) or more") }
        guard sessionTtl >= 60 else { throw ValidationError("--session-ttl must be at least 60s") }
        guard auditDays >= 1 else { throw ValidationError("--audit-days (env RICHPUSH_AUDIT_DAYS) must be at least 1") }
        guard maxConnections >= 1 else { throw ValidationError("--max-connections must be at least 1") }
    }

    func run() async throws {
        // Whatever serve creates (the database, its WAL, blobs, keys) is the service's alone,
        // even in a data directory made beforehand with a looser mode (a Docker volume).
        umask(0o077)
        var configuration = ServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.dataPath = dataOptions.data
        configuration.blobs = dataOptions.blobs
        configuration.database = dataOptions.database
        configuration.demoAuth = demoAuth
        configuration.publicMedia = publicMedia
        configuration.defaultImage = defaultImage
        configuration.limits = limitOptions.limits
        configuration.tlsCertificatePath = certificatePath
        configuration.tlsKeyPath = keyPath
        configuration.tlsTicketKeysPath = ticketKeysPath
        configuration.tlsTicketKeysCheckInterval = .milliseconds(Int64(tlsTicketKeysCheck * 1000))
        configuration.logLevel = logOptions.level
        configuration.logFormat = logOptions.format
        configuration.accessLog = AccessLog.fraction(accessLog) ?? 0
        configuration.eventLoopThreads = threads
        configuration.sessionLifetime = sessionTtl
        configuration.failedSignInLimit = failedSignIns
        configuration.trustedProxies = trustedProxyBlocks.compactMap { CIDR($0) }
        configuration.metricsPort = metricsPortValue
        configuration.notificationsPerMinute = notificationsPerMinute
        configuration.opensPerMinute = opensPerMinute
        configuration.auditDays = auditDays
        configuration.maxConnections = maxConnections
        configuration.payloadURLLifetime = urlOptions.payloadUrlTtl
        configuration.publicURL = urlOptions.publicUrl
        configuration.traceURL = traceUrl.isEmpty ? nil : traceUrl
        logOptions.bootstrap()
        let logger = Logger(label: "richpush")
        if let warning = ConfigFile.unreadWarning { logger.warning("\(warning)") }
        // The apps file first: a bad one is exit 2 naming the app and the field, before anything opens.
        var providers = ProviderWiring(settings: providerFlags.settings)
        if let path = appsPath {
            do {
                try providers.addApps(file: path, to: &configuration)
            } catch let error as AppsFileError {
                Terminal.error("error: \(error)")
                throw ExitCode(2)
            }
        }
        let flagged = try defaultLimits
        if !flagged.isEmpty {
            if providers.limits[AppName.default] != nil {
                Terminal.error("error: --frequency-cap and --quiet-hours set the app default's limits, which --apps sets too; give them in one place")
                throw ExitCode(2)
            }
            providers.limits[AppName.default] = flagged
        }
        let created = dataOptions.isNew
        let data = try await dataOptions.open(limits: configuration.limits, announce: false)
        if created { logger.notice("created a new data directory", metadata: ["data": "\(dataOptions.directory)"]) }
        try providers.addSettings(to: &configuration)
        // Traces, when a collector is named: on before anything is served.
        let traces: [any Service]
        do {
            traces = try TraceExport.start(endpoint: otelEndpoint).map { [$0] } ?? []
        } catch {
            Terminal.error("error: traces (--otel-endpoint, OTEL_*): \(error)")
            throw ExitCode(2)
        }
        if !traces.isEmpty { logger.notice("sending traces", metadata: ["endpoint": "\(otelEndpoint ?? ProcessInfo.processInfo.environment["OTEL_EXPORTER_OTLP_ENDPOINT"] ?? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")"]) }
        let app: RichPushApplication
        // One app: its provider as it is. Several: each push through its app's.
        if let (dispatcher, mirror) = providers.makeDispatcher(outbox: data.outbox, logger: logger) {
            app = try await buildApplication(configuration, dispatcher: dispatcher, mirror: mirror, data: data,
                                             extraServices: [dispatcher] + traces, logger: logger)
        } else {
            logger.warning("no push provider configured (--apns-key…, --fcm-service-account, --vapid-key… or --anh-connection-string…): pushes stay pending in the outbox")
            app = try await buildApplication(configuration, data: data, extraServices: traces, logger: logger)
        }
        // SIGTERM and SIGINT stop serve gracefully (ServiceLifecycle's handlers); StopSignals only
        // notes which one came, so that the log says how serve was asked to stop.
        let stop = StopSignals(logger: logger)
        try await app.onRunning(first: true) { _ in stop.watch() }.runService()
        // Both ServiceLifecycle's source and ours see a signal; ours may be handled a moment
        // after the group has already stopped.
        await stop.settle()
        logger.notice("stopped", metadata: stop.metadata)
        stop.cancel()
    }
}

/// Notes the first SIGTERM or SIGINT serve gets and logs "stopping" at once (a graceful
/// shutdown first lets the requests in flight finish; "stopped" follows).
final class StopSignals: @unchecked Sendable { // its state under `lock`
    private let lock = NIOLock()
    private var sources: [any DispatchSourceSignal] = []
    private var received: String?
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// Starts watching. Called once the listener is bound, when ServiceLifecycle's own signal
    /// sources exist: libdispatch installs its signal handler for the first source of a signal
    /// only, and ServiceLifecycle sets the signal to SIG_IGN before making its own, so a source
    /// made before them would leave SIGTERM ignored.
    func watch() {
        let made = [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")].map { number, name in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.caught(name) }
            source.resume()
            return source
        }
        lock.withLock { sources += made }
    }

    private func caught(_ name: String) {
        let first = lock.withLock { () -> Bool in
            guard received == nil else { return false }
            received = name
            return true
        }
        if first { logger.notice("stopping", metadata: ["signal": .string(name)]) }
    }

    /// Waits up to half a second for a signal that stopped the group to be noted here (its
    /// handler runs on another queue); at once when one was.
    func settle() async {
        for _ in 0..<50 where lock.withLock({ received }) == nil && !lock.withLock({ sources.isEmpty }) {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// `signal=SIGTERM` once one came; empty otherwise.
    var metadata: Logger.Metadata {
        guard let signal = lock.withLock({ received }) else { return [:] }
        return ["signal": .string(signal)]
    }

    func cancel() {
        lock.withLock {
            for source in sources { source.cancel() }
            sources = []
        }
    }
}
