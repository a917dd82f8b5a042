import Foundation
import GRDB
import Hummingbird
import Logging
import MediaStore
import Metrics
import NIOPosix
import Prometheus
import PushDelivery
import RichPushCore
import ServiceLifecycle

/// Opens the data directory, makes sure the default image exists, and builds the application.
///
/// `extraServices` run in the same service group (the push dispatcher, for one).
public func buildApplication(
    _ configuration: ServerConfiguration,
    dispatcher: any PushDispatching = NoPushProvider(),
    mirror: (any RegistrationMirror)? = nil,
    database: DatabasePool? = nil,
    extraServices: [any Service] = [],
    logger: Logger = Logger(label: "richpush")
) async throws -> some ApplicationProtocol {
    var logger = logger
    logger.logLevel = configuration.logLevel
    let directory = DataDirectory(path: configuration.dataPath)
    let database = try database ?? CoreDatabase.open(directory)
    let media = MediaStore(directory: directory, database: database, limits: configuration.limits)
    try await ensureDefaultImage(configuration, media: media, logger: logger)
    let users = UserStore(database: database)
    let authenticator = Authenticator(users: users, demoAuth: configuration.demoAuth, ttl: configuration.credentialTTL)
    try await authenticator.start()
    let services = Services(
        configuration: configuration, media: media, blobs: BlobCache(store: media, capacity: configuration.blobCacheBytes),
        users: users, registrations: RegistrationStore(database: database), notifications: NotificationStore(database: database),
        authenticator: authenticator, dispatcher: dispatcher, mirror: mirror, prometheus: PrometheusRegistry.registry)
    let router = buildRouter(services)
    if configuration.demoAuth {
        logger.warning("--demo-auth: any user whose password equals the user name is accepted (the tutorial's test handler)")
    }
    let fastPath = FastPath(blobs: services.blobs, authenticator: authenticator, payloads: services.readPayloads,
                            publicMedia: configuration.publicMedia)
    return Application(
        router: router,
        server: FastPathHTTP1Channel.builder(fastPath),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "RichPush"),
        services: [authenticator.epochWatcher(logger: logger)] + extraServices,
        eventLoopGroupProvider: configuration.eventLoopThreads > 0
            ? .shared(MultiThreadedEventLoopGroup(numberOfThreads: configuration.eventLoopThreads)) : .singleton,
        logger: logger)
}

/// The routes of SPEC §5.
func buildRouter(_ services: Services) -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self)
    router.add(middleware: MetricsMiddleware())
    router.add(middleware: LogRequestsMiddleware(.debug))
    router.add(middleware: ProblemMiddleware())
    router.get("health", use: services.health)
    router.get("metrics", use: services.metrics)

    let auth = BasicAuthMiddleware(authenticator: services.authenticator)
    let media = router.group("media")
    if !services.configuration.publicMedia { media.add(middleware: auth) }
    media.get(":sha256", use: services.serveMedia)
    media.head(":sha256", use: services.serveMedia)

    let api = router.group("api").add(middleware: auth)
    api.post("media", use: services.uploadMedia)
    api.post("register", use: services.createRegistration)
    api.put("register/:id", use: services.updateRegistration)
    api.delete("register/:id", use: services.deleteRegistration)
    api.post("notifications", use: services.createNotification)
    api.get("notifications", use: services.listNotifications)
    api.get("notifications/:id", use: services.fetchPayload)
    api.head("notifications/:id", use: services.fetchPayload)
    return router
}

/// SPEC §4: when the store has no media named `defaultImage` and `media/<name>` exists, ingest it.
func ensureDefaultImage(_ configuration: ServerConfiguration, media: MediaStore, logger: Logger) async throws {
    let name = configuration.defaultImage
    if try await media.resolve(name) != nil { return }
    let path = "\(configuration.mediaDirectory)/\(name)"
    guard FileManager.default.fileExists(atPath: path) else {
        logger.warning("default image '\(name)' is not in the media store and \(path) does not exist; notifications without a payload will be refused")
        return
    }
    do {
        let result = try await media.ingest(file: path, name: name)
        logger.info("ingested default image", metadata: ["name": "\(name)", "sha256": "\(result.item.id.hex)"])
    } catch {
        logger.error("cannot ingest the default image \(path): \(error); notifications without a payload will be refused")
    }
}

/// The process's Prometheus registry, bootstrapped into swift-metrics once.
enum PrometheusRegistry {
    static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }()
}
