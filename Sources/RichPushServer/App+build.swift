import Foundation
import HTTPEdge
import Hummingbird
import HummingbirdCore
import Logging
import MediaStore
import Metrics
import NIOConcurrencyHelpers
import NIOPosix
import Prometheus
import PushDelivery
import Resilience
import RichPushAPI
import RichPushCore
import ServiceLifecycle

/// Opens the store (unless `data` is given), makes sure the default image exists, and builds the application.
///
/// `extraServices` run in the same service group (the push dispatcher, for one).
public func buildApplication(
    _ configuration: ServerConfiguration,
    dispatcher: any PushDispatching = NoPushProvider(),
    mirror: (any RegistrationMirror)? = nil,
    data: DataStore? = nil,
    extraServices: [any Service] = [],
    logger: Logger = Logger(label: "richpush")
) async throws -> RichPushApplication {
    var logger = logger
    logger.logLevel = configuration.logLevel
    // The pages are parsed now: a template that does not parse stops the start, not a request.
    PageFile.loadAll()
    let given = data
    let data: DataStore
    if let given {
        data = given
    } else {
        data = try await DataStore.open(path: configuration.dataPath, database: configuration.database, blobs: configuration.blobs,
                                        limits: configuration.limits)
    }
    let media = data.media
    try await ensureDefaultImage(configuration, media: media, logger: logger)
    let users = data.users
    let sessions = data.sessions
    let payloadIndex = PayloadIndex()
    let authenticator = Authenticator(users: users, sessions: sessions, apiKeys: data.apiKeys, demoAuth: configuration.demoAuth, ttl: configuration.credentialTTL,
                                      failedSignIns: configuration.failedSignInLimit,
                                      bcryptPool: configuration.bcryptPool ?? Authenticator.sharedBcryptPool,
                                      usersChanged: { payloadIndex.removeAll() })
    try await authenticator.start()
    let payloadKey = try await data.payloadKey()
    let publicURL = PublicURL(configuration)
    let links = PayloadLinks(key: payloadKey, lifetime: configuration.payloadURLLifetime) { publicURL.value }
    let blobs = BlobCache(store: media, capacity: configuration.blobCacheBytes)
    // docs/design/fast-path.md: a campaign's image and its push variant are in memory before its first push.
    let warmer = PayloadWarmer(blobs: blobs, logger: logger, patience: configuration.warmUpPatience)
    var campaigns = data.campaigns(links: links, defaultImage: configuration.defaultImage)
    campaigns.batchSize = configuration.campaignBatchSize
    campaigns.onQueued = { payloadIndex.made($0) }
    campaigns.beforeQueueing = { await warmer.warm([$0]) }
    dispatcher.beforeSending { jobs in await warmer.warm(Set(jobs.compactMap(\.image))) }
    let notifications = data.notifications(links: links)
    let follower = PayloadIndexFollower(index: payloadIndex, notifications: notifications, warmer: warmer, logger: logger)
    try await follower.start()
    // The breakers are made with the store, before the metrics system may have been: now it is.
    _ = PrometheusRegistry.registry
    let hubs = (mirror as? AppMirrors).map { $0.mirrors.values.compactMap { $0 as? NotificationHubsClient } } ?? [mirror as? NotificationHubsClient].compactMap { $0 }
    for breaker in [media.databaseBreaker, media.bucketBreaker].compactMap({ $0 }) + hubs.map(\.breaker) {
        breaker.reportState()
    }
    let registrations = data.registrations
    // docs/api.md#segments: versions devices reported before they were keyed (none, once done).
    try await registrations.fillAppVersionKeys()
    let campaignQueuer = CampaignQueuer(campaigns: campaigns, dispatcher: dispatcher, ahead: max(1, configuration.campaignQueueAhead), logger: logger)
    let readMarks = ReadMarks(notifications: notifications, logger: logger)
    let prometheus = PrometheusRegistry.registry
    let accessLog = AccessLog(fraction: configuration.accessLog, logger: Logger(label: "richpush.access"))
    let clientAddresses = ClientAddressResolver(trustedProxies: configuration.trustedProxies)
    let apps = AppCatalog(profiles: configuration.apps, defaultVAPIDKey: configuration.vapidPublicKey)
    var apiSettings = APISettings(
        apps: apps, publicMedia: configuration.publicMedia, defaultImage: configuration.defaultImage,
        sessionLifetime: configuration.sessionLifetime,
        servedOverHTTPS: configuration.tlsCertificatePath != nil || configuration.publicURL?.lowercased().hasPrefix("https://") == true,
        metricsOnOwnPort: configuration.metricsPort != nil, maxConcurrentUploads: configuration.maxConcurrentUploads,
        allowPrivatePushEndpoints: configuration.allowPrivatePushEndpoints, notificationsPerMinute: configuration.notificationsPerMinute,
        opensPerMinute: configuration.opensPerMinute)
    apiSettings.traceURL = configuration.traceURL
    let rooms = try Rooms(.init(media: media, users: users, sessions: sessions, registrations: registrations, topics: data.topics,
                                segments: data.segments, notifications: notifications, campaigns: campaigns, campaignQueuer: campaignQueuer, liveActivities: data.liveActivities, deliveries: data.deliveries, audit: data.audit,
                                idempotency: data.idempotency, links: links, blobs: blobs, payloadIndex: payloadIndex, readMarks: readMarks, authenticator: authenticator,
                                dispatcher: dispatcher, mirror: mirror, prometheus: prometheus),
                          settings: apiSettings)
    let router = buildRouter(rooms, authenticator: authenticator, clientAddresses: clientAddresses, accessLog: accessLog,
                             publicMedia: configuration.publicMedia)
    if configuration.demoAuth {
        logger.warning("--demo-auth: any user whose password equals the user name is accepted (the tutorial's test handler)")
    }
    let fastPath = HotPath(routes: FastPath(blobs: blobs, authenticator: authenticator, payloads: payloadIndex,
                                            links: links, readMarks: readMarks, publicMedia: configuration.publicMedia),
                           accessLog: accessLog, clientAddresses: clientAddresses)
    let settings = data.settings
    let appNames = apps.names
    let startLogger = logger
    // docs/operations.md#several-nodes-behind-one-name: session tickets under keys every node
    // shares, looked at again every `tlsTicketKeysCheckInterval`.
    let ticketKeys: TLSTicketKeys?
    if let path = configuration.tlsTicketKeysPath, configuration.tlsCertificatePath != nil {
        ticketKeys = try TLSTicketKeys(path: path)
    } else {
        ticketKeys = nil
    }
    let tls = try configuration.tlsCertificatePath.flatMap { certificate in
        try configuration.tlsKeyPath.map {
            try TLSSetup(certificate: certificate, key: $0, handshakeTimeout: configuration.tlsHandshakeTimeout, closeWait: configuration.tlsCloseWait,
                         ticketKeys: ticketKeys)
        }
    }
    var ticketKeysReloader: [any Service] = []
    if let ticketKeys, tls != nil {
        logger.info("TLS session tickets are encrypted with the first key of the file, and opened with any of its keys", metadata: ticketKeys.metadata)
        ticketKeysReloader = [TLSTicketKeysReloader(keys: ticketKeys, interval: configuration.tlsTicketKeysCheckInterval, logger: logger)]
    }
    let secure = tls != nil
    let epochs = authenticator.epochWatcher(payloadKey: payloadKey, logger: logger)
    let channel = { @Sendable (responder: @escaping HTTPChannelHandler.Responder) in
        FastPathHTTP1Channel(responder: responder, fastPath: fastPath, headTimeout: .nanoseconds(Int64(configuration.headTimeout * 1e9)),
                             idleTimeout: .milliseconds(Int64(configuration.idleTimeout * 1000)), secure: secure,
                             bodyRate: BodyRateLimit(window: .nanoseconds(Int64(configuration.bodyRateWindow * 1e9)),
                                                     minimum: configuration.bodyRateMinimum))
    }
    let eventLoopGroup = configuration.eventLoopThreads > 0
        ? MultiThreadedEventLoopGroup(numberOfThreads: configuration.eventLoopThreads) : MultiThreadedEventLoopGroup.singleton
    // `--metrics-port`: /metrics on a listener of its own (the main port's answers 404).
    let metricsListener: [any Service] = configuration.metricsPort.map {
        [MetricsListener.service(host: configuration.host, port: $0, registry: prometheus, eventLoopGroup: eventLoopGroup,
                                 logger: logger)]
    } ?? []
    // The edge's own services: the metrics listener, the ticket keys' reloader.
    let edgeServices = metricsListener + ticketKeysReloader
    return RichPushApplication(
        responder: router.buildResponder(),
        routes: router.routes.map { "\($0.method) \($0.path)" },
        channel: channel,
        fastPath: fastPath,
        tls: tls,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "RichPush",
                             availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections)),
        host: configuration.host,
        port: configuration.port,
        maxConnections: configuration.maxConnections,
        services: [epochs, follower, KeyUseRecorder(authenticator: authenticator),
                   try WebhookDispatcher(webhooks: data.webhooks, extraRoots: configuration.webhookRoots,
                                         allowPrivate: configuration.allowPrivateWebhooks, interval: configuration.webhookInterval,
                                         backoffBase: configuration.webhookBackoff, logger: logger),
                   // Services stop in reverse order: the resumer first, so that it cannot lease
                   // again what the stopping queuer gives back.
                   campaignQueuer,
                   CampaignResumer(campaigns: campaigns, queuer: campaignQueuer, idempotency: data.idempotency, dispatcher: dispatcher, clock: configuration.scheduleClock,
                                   interval: configuration.scheduleInterval, logger: logger),
                   OutboxGauge(deliveries: data.deliveries, interval: configuration.outboxGaugeInterval, logger: logger),
                   AuditPruner(audit: data.audit, days: configuration.auditDays, interval: configuration.auditPruneInterval, logger: logger)]
            + (data.changes().map { [ChangeListener(changes: $0, epochs: epochs, dispatcher: dispatcher)] } ?? [])
            + (mirror.map { [MirrorReconciler(registrations: registrations, mirror: $0, logger: logger)] } ?? []) + extraServices
            + edgeServices,
        eventLoopGroup: eventLoopGroup,
        logger: logger,
        running: { channel in
            // Payload URLs name the port actually bound; `richpush send` signs with the same base.
            publicURL.bound(port: channel.localAddress?.port)
            do { try await settings.set(SettingsStore.publicURL, publicURL.value) } catch {
                startLogger.warning("cannot record the public URL for the CLI", metadata: ["error": "\(error)"])
            }
            // The CLI's `api-keys add --app` checks its app against these.
            do { try await settings.set(SettingsStore.apps, appNames.joined(separator: ",")) } catch {
                startLogger.warning("cannot record the apps for the CLI", metadata: ["error": "\(error)"])
            }
            // Where to go from here, said once: the first hour should not need the code.
            let base = publicURL.value
            startLogger.notice("serving", metadata: ["console": "\(base)/console", "health": "\(base)/health", "ready": "\(base)/ready",
                                                     "metrics": "\(base)/metrics", "openapi": "\(base)/openapi.json",
                                                     "data": "\(URL(fileURLWithPath: configuration.dataPath).standardizedFileURL.path)"])
        })
}

/// The base of payload URLs: `--public-url`, or `http://<host>:<port>` with the port actually bound.
final class PublicURL: Sendable {
    private let configured: String?
    private let host: String
    private let secure: Bool
    private let port = NIOLockedValueBox<Int>(0)

    init(_ configuration: ServerConfiguration) {
        configured = configuration.publicURL.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        secure = configuration.tlsCertificatePath != nil
        port.withLockedValue { $0 = configuration.port }
    }

    func bound(port bound: Int?) {
        if let bound { port.withLockedValue { $0 = bound } }
    }

    var value: String { configured ?? "\(scheme)://\(host):\(port.withLockedValue { $0 })" }
    private var scheme: String { secure ? "https" : "http" }
}

/// Sends scheduled campaigns and local-time zones as they come due (every `interval`,
/// docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries), decides the A/B tests whose winner is due
/// (docs/api.md#ab-tests-and-conversions), and finishes queueing campaigns whose process died half-way (at start, then every 10 s).
struct CampaignResumer: Service {
    let campaigns: CampaignStore
    /// Queues what is resumed and what comes due, ahead of its sends, off this loop.
    let queuer: CampaignQueuer
    /// Its expired keys are removed every 10 s, off the requests' path.
    let idempotency: IdempotencyStore
    let dispatcher: any PushDispatching
    let clock: @Sendable () -> Date
    let interval: Duration
    let logger: Logger

    func run() async throws {
        let dispatcher = self.dispatcher
        var lastResume = ContinuousClock.now - .seconds(60)
        repeat {
            if ContinuousClock.now - lastResume >= .seconds(10) {
                lastResume = .now
                do {
                    let resumed = try await campaigns.resumeUnfinished(addressing: dispatcher.addressing, handOff: queuer.finish) { dispatcher.outboxChanged() }
                    if !resumed.isEmpty { logger.notice("queueing campaigns left half-queued by a process that stopped", metadata: ["campaigns": "\(resumed)"]) }
                    let finished = try await campaigns.finishStragglers()
                    if !finished.isEmpty { logger.notice("marked done campaigns a stopped process left unmarked", metadata: ["campaigns": "\(finished)"]) }
                    try await idempotency.expire()
                } catch {
                    logger.error("cannot resume campaigns", metadata: ["error": "\(error)"])
                }
            }
            do {
                let sent = try await campaigns.runDue(now: clock(), addressing: dispatcher.addressing, handOff: queuer.finish) { dispatcher.outboxChanged() }
                // Only what was queued: a local-time campaign's zones are looked at again every minute, which queues nothing.
                if !sent.isEmpty {
                    logger.info("queueing \(sent.count) scheduled \(sent.count == 1 ? "campaign" : "campaigns") that came due",
                                metadata: ["count": "\(sent.count)", "campaigns": "\(sent)"])
                }
            } catch {
                logger.error("cannot send scheduled campaigns", metadata: ["error": "\(error)"])
            }
            // docs/api.md#ab-tests-and-conversions: A/B tests whose winner is due (one node each,
            // under a lease); a rest to send goes to the queuer like any campaign.
            do {
                let decided = try await campaigns.decideExperiments(addressing: dispatcher.addressing, handOff: queuer.finish) { dispatcher.outboxChanged() }
                if !decided.isEmpty {
                    logger.info("decided the winners of \(decided.count) A/B \(decided.count == 1 ? "test" : "tests")",
                                metadata: ["count": "\(decided.count)", "campaigns": "\(decided)"])
                }
            } catch {
                logger.error("cannot decide A/B tests", metadata: ["error": "\(error)"])
            }
            // The pause ends at a graceful shutdown too: a plain sleep held every shutdown up to its length.
        } while (try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }) != nil && !Task.isShuttingDownGracefully
    }
}

/// docs/configuration.md#commands: when the store has no media named `defaultImage`, ingest
/// `<mediaDirectory>/<name>` when it exists, else the sample of that name built into the binary
/// (`Samples/`): `serve` started outside the repository still has `logo.png` (issue #49).
func ensureDefaultImage(_ configuration: ServerConfiguration, media: MediaStore, logger: Logger) async throws {
    let name = configuration.defaultImage
    if try await media.resolve(name) != nil { return }
    let path = "\(configuration.mediaDirectory)/\(name)"
    let onDisk = FileManager.default.fileExists(atPath: path)
    let sample = onDisk ? nil : SampleImages.bytes(named: name)
    guard onDisk || sample != nil else {
        logger.warning("default image '\(name)' is not in the media store, \(path) does not exist and richpush has no built-in sample of that name; notifications without a payload will be refused")
        return
    }
    let source = onDisk ? path : "the sample built into richpush"
    do {
        let result: IngestResult
        if let sample {
            result = try await media.ingest(bytes: sample, name: name)
        } else {
            result = try await media.ingest(file: path, name: name)
        }
        logger.info("ingested default image", metadata: ["name": "\(name)", "sha256": "\(result.item.id.hex)", "from": "\(source)"])
    } catch {
        logger.error("cannot ingest the default image from \(source): \(error); notifications without a payload will be refused")
    }
}

