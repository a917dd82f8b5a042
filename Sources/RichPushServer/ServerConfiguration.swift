import RichPushCore
import HTTPEdge
import Foundation
import Logging
import MediaStore
import NIOPosix

/// Everything `richpush serve` can be told (docs/configuration.md#commands).
public struct ServerConfiguration: Sendable {
    /// Address to listen on.
    public var host = "127.0.0.1"
    /// Port to listen on (0 picks a free one).
    public var port = 8080
    /// The data directory.
    public var dataPath = "./data"
    /// `--database`: nil for `<data>/richpush.sqlite`, `sqlite:PATH` or `postgres://…`.
    public var database: String?
    /// `--blobs`: nil for files in the data directory, or an `s3://` bucket.
    public var blobs: String?
    /// Accept any user whose password equals the user name (the tutorial's test handler).
    public var demoAuth = false
    /// Serve `/media/{sha256}` without credentials, cacheable by shared caches.
    public var publicMedia = false
    /// The media name used when a notification names no payload.
    public var defaultImage = "logo.png"
    /// Where the default image is looked for on start (`media/` of the working directory).
    public var mediaDirectory = "media"
    /// Limits for uploads.
    public var limits = MediaLimits.default
    /// How long verified credentials are cached, in seconds.
    public var credentialTTL: Double = 60
    /// `--tls-cert`: the certificate chain (PEM) to serve HTTPS with, HTTP/2 and HTTP/1.1 by ALPN.
    public var tlsCertificatePath: String?
    /// `--tls-key`: its private key (PEM).
    public var tlsKeyPath: String?
    /// `--tls-ticket-keys`: the session-ticket keys every node shares, so that a TLS session
    /// resumes on any of them (`TLSTicketKeys`, docs/operations.md#several-nodes-behind-one-name);
    /// nil for a key of this process alone. Used only with `tlsCertificatePath`.
    public var tlsTicketKeysPath: String?
    /// How often that file is looked at for a change (the hidden `--tls-ticket-keys-check`, for tests).
    public var tlsTicketKeysCheckInterval: Duration = .seconds(10)
    /// The share of requests written to the access log (`--access-log`): 0 off, 1 all.
    public var accessLog: Double = 0
    /// How log lines are written (`--log-format`).
    public var logFormat: LogFormat = .text
    /// How often `richpush_outbox_pending` is sampled from the database.
    public var outboxGaugeInterval: Duration = .seconds(5)
    /// How many bytes of hot blobs are kept in memory.
    public var blobCacheBytes = 64 << 20
    /// How long a campaign's POST and a node's first pushes wait for its image and push variant
    /// to be in memory (docs/design/fast-path.md); the warm-up goes on behind them past it.
    public var warmUpPatience: Duration = .seconds(2)
    /// Event-loop threads (0: one per core).
    public var eventLoopThreads = 0
    /// How long a session token (`POST /api/sessions`) works, in seconds.
    public var sessionLifetime: Double = 90 * 86_400
    /// How long a payload URL (`richUrl`) works, in seconds.
    public var payloadURLLifetime: Double = 7 * 86_400
    /// The base of payload URLs, as devices reach this server; nil for `http://<host>:<port>`.
    public var publicURL: String?
    /// docs/operations.md#traces: a trace viewer's URL with `{traceId}` in it (`serve --trace-url`):
    /// the console links a campaign to its trace there; nil for no link.
    public var traceURL: String?
    /// Seconds a connection may sit with no request in flight before it is closed.
    public var idleTimeout: Double = 60
    /// Seconds a request head may take to arrive, from its first byte (slow heads are an attack).
    public var headTimeout: Double = 10
    /// Seconds over which a request body's rate is judged once its head has arrived: each such
    /// window must bring `bodyRateMinimum` bytes until the body ends, or the request is answered
    /// 408 and its connection closed (slow bodies are an attack too).
    public var bodyRateWindow: Double = 20
    /// Bytes a request body must bring in every `bodyRateWindow` (20 KiB in 20 s: 1 KiB/s).
    public var bodyRateMinimum = 20 << 10
    /// Seconds a connection may take to finish its TLS handshake (`--tls-cert`), from its accept.
    public var tlsHandshakeTimeout: Double = 10
    /// Seconds a TLS connection the server closes may take to send what is left and its
    /// `close_notify` before its socket is closed (a client that does not read); the client's
    /// own `close_notify` is not waited for.
    public var tlsCloseWait: Double = 0.25
    /// Connections open at once; past it, new ones wait in the listen backlog.
    public var maxConnections = 4_096
    /// Uploads decoded at once; past it, `POST /api/media` answers 503 with `Retry-After`.
    public var maxConcurrentUploads = 16
    /// Failed sign-ins per user name in 5 minutes before further attempts get 429 (per client
    /// address: five times as many); 0 turns the throttle off (`--failed-sign-ins`).
    public var failedSignInLimit = 10
    /// Notifications one user may create a minute through `POST /api/notifications` (a
    /// minute's worth at once); past it, 429 with `Retry-After`. 0 turns the limit off
    /// (`--notifications-per-minute`).
    public var notificationsPerMinute = 60
    /// Opens one client address may report a minute (`POST /p/{token}/opened` and
    /// `POST /api/notifications/{id}/opened`); past it, 429 with `Retry-After`; 0 turns the
    /// limit off (`--opens-per-minute`).
    public var opensPerMinute = 600
    /// The threads bcrypt runs on; nil for `Authenticator.sharedBcryptPool` (one per process).
    /// Given, for a server embedded beside others (a test's), the caller starts and stops it.
    public var bcryptPool: NIOThreadPool?
    /// The VAPID public key browsers subscribe with (`GET /api/webpush/key`); nil without Web Push.
    public var vapidPublicKey: String?
    /// docs/api.md#apps-and-api-keys: the apps this server sends for besides `default` (`serve --apps`), each with
    /// what a device of it may ask: its VAPID public key, and whether it sends through a hub.
    public var apps: [String: AppProfile] = [:]
    /// Web Push endpoints may be http, on any port, at private and loopback addresses
    /// (`--allow-private-push-endpoints`, for local stand-ins); else https on 443 to public addresses only.
    public var allowPrivatePushEndpoints = false
    /// Proxies whose `X-Forwarded-For` names the client (`--trusted-proxy`); with none, the TCP
    /// peer is the client (`ClientAddressResolver`).
    public var trustedProxies: [CIDR] = []
    /// `--metrics-port`: serve `/metrics` only on this port of `host` (the main port answers 404
    /// for it); nil serves it on the main port.
    public var metricsPort: Int?
    /// Logging threshold.
    public var logLevel: Logger.Level = .info
    /// What time it is for schedules (docs/api.md#scheduled-local-time-and-multilingual-campaigns-cancel-safe-retries): when a scheduled campaign or a zone of a
    /// local-time one is due. The wall clock; tests move it through a day in an instant.
    public var scheduleClock: @Sendable () -> Date = { Date() }
    /// How often due schedules are looked for.
    public var scheduleInterval: Duration = .seconds(1)
    /// Recipients queued per transaction, and how many of a campaign's pushes may wait to be
    /// sent before its queueing pauses (`POST /api/admin/campaigns` answers once that many
    /// recipients are queued, or everyone is; the rest is queued in the background as the
    /// sends go out).
    public var campaignBatchSize = 500
    public var campaignQueueAhead = 5_000
    /// docs/api.md#what-happened-to-every-push-displayed-opened-stats-and-webhooks: extra trusted roots for webhook receivers (`--push-ca`), how often the queue is
    /// looked at, and the first retry's delay (doubling to 10 minutes).
    public var webhookRoots: [String] = []
    public var webhookInterval: Duration = .milliseconds(500)
    public var webhookBackoff: Double = 1
    /// Webhook receivers may be http and at loopback and private addresses
    /// (`--allow-private-webhooks`, for receivers on this machine or a private network); else
    /// https to host names whose every address is public, checked at each delivery (docs/security.md).
    public var allowPrivateWebhooks = false
    /// How many days the audit log keeps an entry (`--audit-days`, docs/operations.md#audit-log),
    /// and how often older ones are removed.
    public var auditDays = AuditStore.defaultRetentionDays
    public var auditPruneInterval: Duration = .seconds(3600)

    /// The defaults of docs/configuration.md#commands.
    public init() {}
}

