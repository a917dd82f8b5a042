import Crypto
import Foundation
import Hummingbird
import HummingbirdBcrypt
import Logging
import NIOConcurrencyHelpers
import NIOPosix
import RichPushCore
import ServiceLifecycle

/// Verifies HTTP Basic credentials: bcrypt for accounts, or the tutorial's user-equals-password
/// rule with `--demo-auth`; verified headers are cached so bcrypt does not run per request.
public final class Authenticator: Sendable {
    private let users: UserStore
    private let demoAuth: Bool
    private let ttl: Double
    private struct Entry {
        var user: String
        /// When bcrypt last accepted the header.
        var verifiedAt: Double
        var refreshing = false
    }
    /// Verified headers, keyed by the SHA-256 of the header (never the password itself).
    private let cache = NIOLockedValueBox<[SHA256.Digest: Entry]>([:])
    private let inFlight = InFlightVerifications()
    private let epoch = NIOLockedValueBox<Int?>(nil)

    /// Creates an authenticator over the user store.
    public init(users: UserStore, demoAuth: Bool, ttl: Double) {
        self.users = users
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
        return cachedUser(header, key: Self.key(header))
    }

    private func cachedUser(_ header: String, key: SHA256.Digest) -> String? {
        let now = Date().timeIntervalSince1970
        let (user, refresh) = cache.withLockedValue { cache -> (String?, Bool) in
            guard var hit = cache[key], now - hit.verifiedAt < 2 * ttl else { return (nil, false) }
            guard now - hit.verifiedAt > ttl * 0.75, !hit.refreshing else { return (hit.user, false) }
            hit.refreshing = true
            cache[key] = hit
            return (hit.user, true)
        }
        if refresh {
            Task { try? await self.verifyAndCache(header, key: key) }
        }
        return user
    }

    /// The user named by a valid `Authorization` header; throws 401 otherwise.
    public func authenticate(_ header: String?) async throws -> String {
        guard let header else { throw Self.unauthorized("credentials are required: send Authorization: Basic base64(user:password)") }
        let key = Self.key(header)
        if let user = cachedUser(header, key: key) { return user }
        guard let user = try await verifyAndCache(header, key: key) else {
            throw Self.unauthorized("wrong user name or password")
        }
        return user
    }

    /// The cache key of an `Authorization` header: its SHA-256, so no credential is kept in memory.
    private static func key(_ header: String) -> SHA256.Digest {
        SHA256.hash(data: Data(header.utf8))
    }

    /// Verifies `header` (bcrypt, or the demo rule) and caches the outcome: the user when valid,
    /// no entry when not. Throws 401 for a header that is not Basic credentials.
    @discardableResult
    private func verifyAndCache(_ header: String, key: SHA256.Digest) async throws -> String? {
        let epochAtStart = epoch.withLockedValue { $0 }
        guard let (user, password) = Self.parseBasic(header) else {
            throw Self.unauthorized("the Authorization header is not valid Basic credentials (base64 of user:password)")
        }
        let valid: Bool
        if demoAuth && user == password && (try? UserStore.validateName(user)) != nil {
            valid = true
        } else {
            do {
                valid = try await inFlight.verify(key: key) { [users] in
                    guard let hash = try await users.passwordHash(of: user) else { return false }
                    return try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) }
                }
            } catch {
                cache.withLockedValue { $0[key]?.refreshing = false }
                throw error
            }
        }
        let verifiedAt = Date().timeIntervalSince1970
        cache.withLockedValue { cache in
            // A user removed while bcrypt ran must not be cached: keep it only if no removal was seen since.
            guard valid, epoch.withLockedValue({ $0 }) == epochAtStart else {
                cache[key] = nil
                return
            }
            if cache.count > 10_000 { cache.removeAll() }
            cache[key] = Entry(user: user, verifiedAt: verifiedAt)
        }
        return valid ? user : nil
    }

    /// Reads the users epoch once; call before serving so that the first removal is noticed.
    func start() async throws {
        observe(epoch: try await users.epoch())
    }

    /// Drops every cached credential when the users epoch moved (a user was removed).
    func observe(epoch newEpoch: Int) {
        let changed = epoch.withLockedValue { epoch in
            defer { epoch = newEpoch }
            return epoch != nil && epoch != newEpoch
        }
        if changed { cache.withLockedValue { $0.removeAll() } }
    }

    /// Watches the users epoch in the database (another process may remove a user).
    func epochWatcher(interval: Duration = .milliseconds(500), logger: Logger) -> some Service {
        EpochWatcher(authenticator: self, users: users, interval: interval, logger: logger)
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
    private var running: [SHA256.Digest: Task<Bool, any Error>] = [:]

    func verify(key: SHA256.Digest, _ work: @escaping @Sendable () async throws -> Bool) async throws -> Bool {
        if let task = running[key] { return try await task.value }
        let task = Task { try await work() }
        running[key] = task
        defer { running[key] = nil }
        return try await task.value
    }
}

struct EpochWatcher: Service {
    let authenticator: Authenticator
    let users: UserStore
    let interval: Duration
    let logger: Logger

    func run() async throws {
        for await _ in AsyncTimerSequence.repeating(every: interval).cancelOnGracefulShutdown() {
            do {
                authenticator.observe(epoch: try await users.epoch())
            } catch {
                logger.warning("cannot read the users epoch", metadata: ["error": "\(error)"])
            }
        }
    }
}

/// Authenticates every request below it and stores the user in the context.
struct BasicAuthMiddleware: RouterMiddleware {
    let authenticator: Authenticator

    func handle(_ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response) async throws -> Response {
        var context = context
        context.user = try await authenticator.authenticate(request.headers[.authorization])
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
