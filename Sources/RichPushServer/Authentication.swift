import Crypto
import Foundation
import Hummingbird
import HummingbirdBcrypt
import Logging
import NIOConcurrencyHelpers
import NIOPosix
import RichPushCore
import ServiceLifecycle

/// Who a request is from, once its credentials were verified.
public struct Principal: Sendable, Equatable {
    /// The user name.
    public var user: String
    /// Whether the account is an admin (SPEC §9).
    public var admin: Bool
    /// The bearer token the request carried, when it used a session rather than a password.
    public var sessionToken: String?
}

/// Verifies credentials: HTTP Basic (bcrypt for accounts, or the tutorial's user-equals-password
/// rule with `--demo-auth`) and `Bearer` session tokens (a SHA-256 lookup). Verified headers are
/// cached so bcrypt does not run per request.
public final class Authenticator: Sendable {
    private let users: UserStore
    private let sessions: SessionStore
    private let demoAuth: Bool
    private let ttl: Double
    private struct Entry {
        var principal: Principal
        /// When the header was last verified.
        var verifiedAt: Double
        /// A session's expiry: the entry is never used after it.
        var expiresAt: Double = .infinity
        var refreshing = false
    }
    /// Verified headers, keyed by the SHA-256 of the header (never the password itself).
    private let cache = NIOLockedValueBox<[SHA256.Digest: Entry]>([:])
    private let inFlight = InFlightVerifications()
    private let epoch = NIOLockedValueBox<(users: Int, sessions: Int)?>(nil)

    /// Creates an authenticator over the user and session stores.
    public init(users: UserStore, sessions: SessionStore, demoAuth: Bool, ttl: Double) {
        self.users = users
        self.sessions = sessions
        self.demoAuth = demoAuth
        self.ttl = ttl
    }

    /// The user of an `Authorization` header verified recently, without verifying anything now.
    ///
    /// An entry is fresh for three quarters of the TTL. After that, and until twice the TTL,
    /// it is still used while the header is re-verified once in the background
    /// (stale-while-revalidate), so traffic never waits for bcrypt because an entry aged;
    /// a removed user is dropped by the users epoch or by that re-verification.
    func cachedUser(_ header: String?) -> String? {
        guard let header else { return nil }
        return cachedPrincipal(header, key: Self.key(header))?.user
    }

    private func cachedPrincipal(_ header: String, key: SHA256.Digest) -> Principal? {
        let now = Date().timeIntervalSince1970
        let (principal, refresh) = cache.withLockedValue { cache -> (Principal?, Bool) in
            guard var hit = cache[key], now - hit.verifiedAt < 2 * ttl, now < hit.expiresAt else { return (nil, false) }
            guard now - hit.verifiedAt > ttl * 0.75, !hit.refreshing else { return (hit.principal, false) }
            hit.refreshing = true
            cache[key] = hit
            return (hit.principal, true)
        }
        if refresh {
            Task { try? await self.verifyAndCache(header, key: key) }
        }
        return principal
    }

    /// Who sent a valid `Authorization` header (Basic or Bearer); throws 401 otherwise.
    public func authenticate(_ header: String?) async throws -> Principal {
        guard let header else {
            throw Self.unauthorized("credentials are required: send Authorization: Basic base64(user:password), or Bearer <session token>")
        }
        let key = Self.key(header)
        if let principal = cachedPrincipal(header, key: key) { return principal }
        guard let principal = try await verifyAndCache(header, key: key) else {
            throw Self.unauthorized(Self.isBearer(header) ? "the session token is unknown, expired or revoked; sign in again with POST /api/sessions"
                                                          : "wrong user name or password")
        }
        return principal
    }

    /// Forgets a header at once (its session was revoked here).
    func forget(_ header: String) {
        let key = Self.key(header)
        cache.withLockedValue { $0[key] = nil }
    }

    static func isBearer(_ header: String) -> Bool {
        header.utf8.count > 7 && header.prefix(7).lowercased() == "bearer "
    }

    /// The token of a `Bearer` header.
    static func bearerToken(_ header: String) -> String? {
        guard isBearer(header) else { return nil }
        let token = header.dropFirst(7).trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }

    /// The cache key of an `Authorization` header: its SHA-256, so no credential is kept in memory.
    private static func key(_ header: String) -> SHA256.Digest {
        SHA256.hash(data: Data(header.utf8))
    }

    /// Verifies `header` (a session lookup, bcrypt, or the demo rule) and caches the outcome:
    /// the principal when valid, no entry when not. Throws 401 for a header that is neither
    /// Basic credentials nor a bearer token.
    @discardableResult
    private func verifyAndCache(_ header: String, key: SHA256.Digest) async throws -> Principal? {
        let epochAtStart = epoch.withLockedValue { $0 }
        var principal: Principal?
        var expiresAt = Double.infinity
        if let token = Self.bearerToken(header) {
            do {
                if let owner = try await sessions.owner(of: token) {
                    principal = Principal(user: owner.username, admin: owner.admin, sessionToken: token)
                    expiresAt = owner.expires.timeIntervalSince1970
                }
            } catch {
                cache.withLockedValue { $0[key]?.refreshing = false }
                throw error
            }
        } else {
            guard let (user, password) = Self.parseBasic(header) else {
                throw Self.unauthorized("the Authorization header is neither Basic credentials (base64 of user:password) nor Bearer <session token>")
            }
            do {
                let admin = try await inFlight.verify(key: key) { [users, demoAuth] () -> Bool? in
                    guard let stored = try await users.credentials(of: user) else {
                        // The tutorial's test rule, only for names that have no account: it never opens a real one.
                        return demoAuth && user == password && (try? UserStore.validateName(user)) != nil ? false : nil
                    }
                    let valid = try await NIOThreadPool.singleton.runIfActive { UserStore.verify(password: password, hash: stored.passwordHash) }
                    return valid ? stored.admin : nil
                }
                principal = admin.map { Principal(user: user, admin: $0) }
            } catch {
                cache.withLockedValue { $0[key]?.refreshing = false }
                throw error
            }
        }
        let verifiedAt = Date().timeIntervalSince1970
        cache.withLockedValue { cache in
            // A user removed (or a session revoked) while this ran must not be cached: keep it only if no change was seen since.
            guard let principal, epoch.withLockedValue({ $0 }) ?? (0, 0) == epochAtStart ?? (0, 0) else {
                cache[key] = nil
                return
            }
            if cache.count > 10_000 { cache.removeAll() }
            cache[key] = Entry(principal: principal, verifiedAt: verifiedAt, expiresAt: expiresAt)
        }
        return principal
    }

    /// Reads the epochs once; call before serving so that the first removal is noticed.
    func start() async throws {
        observe(epochs: try await users.epochs())
    }

    /// Drops every cached credential when the users epoch moved (a user was removed or changed
    /// password), and every cached session when the sessions epoch moved (one was revoked).
    func observe(epochs newEpochs: (users: Int, sessions: Int)) {
        let (usersChanged, sessionsChanged) = epoch.withLockedValue { epoch in
            defer { epoch = newEpochs }
            guard let old = epoch else { return (false, false) }
            return (old.users != newEpochs.users, old.sessions != newEpochs.sessions)
        }
        if usersChanged {
            cache.withLockedValue { $0.removeAll() }
        } else if sessionsChanged {
            cache.withLockedValue { cache in cache = cache.filter { $0.value.principal.sessionToken == nil } }
        }
    }

    /// Watches the users epoch in the database (another process may remove a user).
    func epochWatcher(interval: Duration = .milliseconds(500), payloadKey: PayloadKey?, logger: Logger) -> some Service {
        EpochWatcher(authenticator: self, users: users, payloadKey: payloadKey, interval: interval, logger: logger)
    }

    static func parseBasic(_ header: String) -> (String, String)? {
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic",
              let data = Data(base64Encoded: String(parts[1]).trimmingCharacters(in: .whitespaces)),
              let text = String(data: data, encoding: .utf8),
              let colon = text.firstIndex(of: ":") else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    static func unauthorized(_ detail: String) -> Problem {
        Problem(.unauthorized, detail, headers: [.wwwAuthenticate: "Basic realm=\"RichPush\", charset=\"UTF-8\""])
    }
}

/// Makes concurrent requests with the same uncached header share one bcrypt run.
actor InFlightVerifications {
    private var running: [SHA256.Digest: Task<Bool?, any Error>] = [:]

    /// Runs `work` once for concurrent callers with the same key; its result is the admin flag, nil when refused.
    func verify(key: SHA256.Digest, _ work: @escaping @Sendable () async throws -> Bool?) async throws -> Bool? {
        if let task = running[key] { return try await task.value }
        let task = Task { try await work() }
        running[key] = task
        defer { running[key] = nil }
        return try await task.value
    }
}

/// Every `interval`: notices removed users and revoked sessions (from any process), and a
/// rotated payload key.
struct EpochWatcher: Service {
    let authenticator: Authenticator
    let users: UserStore
    let payloadKey: PayloadKey?
    let interval: Duration
    let logger: Logger

    func run() async throws {
        for await _ in AsyncTimerSequence.repeating(every: interval).cancelOnGracefulShutdown() {
            do {
                authenticator.observe(epochs: try await users.epochs())
                try payloadKey?.reloadIfChanged()
            } catch {
                logger.warning("cannot read the users epoch or the payload key", metadata: ["error": "\(error)"])
            }
        }
    }
}

/// Authenticates every request below it (Basic or Bearer) and stores who sent it in the context.
struct AuthMiddleware: RouterMiddleware {
    let authenticator: Authenticator

    func handle(_ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response) async throws -> Response {
        var context = context
        context.principal = try await authenticator.authenticate(request.headers[.authorization])
        return try await next(request, context)
    }
}

/// Lets only admins through (403 for everyone else); goes below `AuthMiddleware`.
struct AdminMiddleware: RouterMiddleware {
    func handle(_ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response) async throws -> Response {
        guard let principal = context.principal else { throw Authenticator.unauthorized("credentials are required") }
        guard principal.admin else { throw Problem(.forbidden, "\(principal.user) is not an admin; only admins may do this (richpush users add NAME --admin)") }
        return try await next(request, context)
    }
}

/// A sequence that yields every `interval` until cancelled.
struct AsyncTimerSequence: AsyncSequence {
    typealias Element = Void
    let interval: Duration

    static func repeating(every interval: Duration) -> Self { .init(interval: interval) }

    struct AsyncIterator: AsyncIteratorProtocol {
        let interval: Duration
        mutating func next() async -> Void? {
            do {
                try await Task.sleep(for: interval)
                return ()
            } catch {
                return nil
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(interval: interval) }
}
