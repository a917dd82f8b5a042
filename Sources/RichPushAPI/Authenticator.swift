import Crypto
import Foundation
import Hummingbird
import HummingbirdBcrypt
import Logging
import PushDelivery
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RichPushCore
import ServiceLifecycle

/// Verifies credentials: HTTP Basic (bcrypt for accounts, or the tutorial's user-equals-password
/// rule with `--demo-auth`) and `Bearer` session tokens (a SHA-256 lookup). Verified headers are
/// cached so bcrypt does not run per request.
public final class Authenticator: Sendable {
    private let users: UserStore
    private let sessions: SessionStore
    /// API keys (docs/api.md#apps-and-api-keys); nil where none are accepted.
    private let apiKeys: APIKeyStore?
    /// When each API key was last used here, not yet written (`recordKeyUses` writes them in one batch).
    private let keyUses = NIOLockedValueBox<[String: Date]>([:])
    private let demoAuth: Bool
    private let ttl: Double
    private struct Entry {
        var principal: Principal
        /// When the header was last verified.
        var verifiedAt: Double
        /// A session's expiry: the entry is never used after it.
        var expiresAt: Double = .infinity
        var refreshing = false
        /// A session's entry (the token itself is in the header, and is not kept here).
        var session = false
        /// When it was last used (the least recently used entries go first when the cache is full).
        var usedAt: Double = 0
    }
    /// Entries kept at most; past it the least recently used tenth is dropped.
    private let cacheCapacity: Int
    /// Verified credentials, keyed by the SHA-256 of the parsed credentials (never the password
    /// itself): differently spelled headers for the same credentials share one entry.
    private let cache = NIOLockedValueBox<[CredentialKey: Entry]>([:])
    private let inFlight = InFlightVerifications()
    private let throttle: LoginThrottle
    /// Hashes checked against for names that have no account, one per cost: the store's own, so
    /// that a name without an account takes as long as a wrong password (made once, on first use).
    private static let dummyHashes = NIOLockedValueBox<[UInt8: String]>([:])

    /// The hash of `cost` for names that have no account.
    static func dummyHash(cost: UInt8) -> String {
        dummyHashes.withLockedValue { hashes in
            if let hash = hashes[cost] { return hash }
            let hash = Bcrypt.hash("no such user: \(UInt64.random(in: .min ... .max))", cost: cost)
            hashes[cost] = hash
            return hash
        }
    }
    /// The threads bcrypt runs on: its own, so that a flood of sign-ins (each a cost-12 bcrypt,
    /// about 0.2 s of a core) never makes a blob read or a decode wait for a thread of
    /// `NIOThreadPool.singleton`. Half the cores, at least two: on a large machine a flood of
    /// sign-ins leaves the other half to the event loops and blob reads; `LoginThrottle` bounds
    /// the queue.
    public static let sharedBcryptPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: max(2, System.coreCount / 2))
        pool.start()
        return pool
    }()
    /// How many unknown names were checked against the dummy hash (for tests).
    static let unknownNameChecks = NIOLockedValueBox(0)
    private let epoch = NIOLockedValueBox<(users: Int, sessions: Int)?>(nil)

    private let usersChanged: @Sendable () -> Void
    /// Where bcrypt runs (`sharedBcryptPool` unless given).
    let bcryptPool: NIOThreadPool

    /// Creates an authenticator over the user and session stores. `usersChanged` runs when a
    /// user was removed or changed (by any process), after the cached credentials are dropped.
    /// `failedSignIns` is the throttle's limit per user name (0: no throttle).
    public init(users: UserStore, sessions: SessionStore, apiKeys: APIKeyStore? = nil, demoAuth: Bool, ttl: Double, cacheCapacity: Int = 100_000,
                failedSignIns: Int = LoginThrottle.defaultPerUser, bcryptPool: NIOThreadPool = Authenticator.sharedBcryptPool,
                usersChanged: @escaping @Sendable () -> Void = {}) {
        self.bcryptPool = bcryptPool
        self.throttle = LoginThrottle(perUser: failedSignIns)
        self.users = users
        self.sessions = sessions
        self.apiKeys = apiKeys
        self.demoAuth = demoAuth
        self.ttl = ttl
        self.cacheCapacity = cacheCapacity
        self.usersChanged = usersChanged
    }

    /// Caches a session just opened here, as if its first request had been verified (the
    /// token is only returned to the client after this).
    func remember(session token: String, of principal: Principal, expires: Date) {
        guard let key = Self.key("Bearer \(token)") else { return }
        store(principal, key: key, expiresAt: expires.timeIntervalSince1970, epochAtStart: epoch.withLockedValue { $0 }, session: true)
    }

    /// Caches the newest valid sessions in the database (at most half the cache), so that
    /// devices' first requests after a restart need no lookup.
    func loadSessions() async throws {
        let epochAtStart = epoch.withLockedValue { $0 }
        for active in try await sessions.active(limit: cacheCapacity / 2) {
            store(Principal(user: active.owner.username, admin: active.owner.admin), key: CredentialKey(bytes: active.tokenHash),
                  expiresAt: active.owner.expires.timeIntervalSince1970, epochAtStart: epochAtStart, session: true)
        }
    }

    /// The user of an `Authorization` header verified recently, without verifying anything now.
    ///
    /// An entry is fresh for three quarters of the TTL. After that, and until twice the TTL,
    /// it is still used while the header is re-verified once in the background
    /// (stale-while-revalidate), so traffic never waits for bcrypt because an entry aged;
    /// a removed user is dropped by the users epoch or by that re-verification.
    func cachedUser(_ header: String?) -> String? {
        var memo: CredentialMemo?
        return cachedUser(header, memo: &memo)
    }

    /// The same, with the key of the header a connection sent last (`memo`): a keep-alive
    /// connection sends the same credentials each time, and their parse and hash were a tenth
    /// of a cached payload fetch's own work. The cache entry is looked up as ever.
    func cachedUser(_ header: String?, memo: inout CredentialMemo?) -> String? {
        cachedPrincipal(header, memo: &memo)?.user // a user name needs no session token
    }

    /// The cached principal of `header` (without its session token), with the connection's
    /// `memo` as for `cachedUser`: what the fast path decides on, as the router would.
    func cachedPrincipal(_ header: String?, memo: inout CredentialMemo?) -> Principal? {
        guard let header else { return nil }
        let key: CredentialKey
        // Byte for byte: `==` on strings is canonical equivalence ("K" equals the Kelvin sign).
        if let memo, memo.header.utf8.elementsEqual(header.utf8) {
            key = memo.key
        } else {
            guard let made = Self.key(header) else { return nil }
            key = made
            memo = CredentialMemo(header: header, key: made)
        }
        return cachedEntry(header, key: key)
    }

    private func cachedPrincipal(_ header: String, key: CredentialKey) -> Principal? {
        cachedEntry(header, key: key).map { Self.withSessionToken($0, from: header) }
    }

    /// The cached principal of `key` (re-verified in the background when aged), as cached.
    private func cachedEntry(_ header: String, key: CredentialKey) -> Principal? {
        let now = Date().timeIntervalSince1970
        let (principal, refresh) = cache.withLockedValue { cache -> (Principal?, Bool) in
            guard var hit = cache[key], now - hit.verifiedAt < 2 * ttl, now < hit.expiresAt else { return (nil, false) }
            hit.usedAt = now
            let refresh = now - hit.verifiedAt > ttl * 0.75 && !hit.refreshing
            if refresh { hit.refreshing = true }
            cache[key] = hit
            return (hit.principal, refresh)
        }
        if refresh {
            Task { try? await self.verifyAndCache(header, key: key) }
        }
        return principal
    }

    /// A session's principal carries its token, read from the header (the cache does not keep it).
    private static func withSessionToken(_ principal: Principal, from header: String) -> Principal {
        guard isBearer(header), principal.apiKey == nil else { return principal }
        var principal = principal
        principal.sessionToken = bearerToken(header)
        return principal
    }

    /// Who sent a valid `Authorization` header (Basic or Bearer); throws 401 otherwise, and 429
    /// while the user name or the client's address has failed too often lately.
    public func authenticate(_ header: String?, from address: String? = nil) async throws -> Principal {
        guard let header else {
            throw Self.unauthorized("credentials are required: send Authorization: Basic base64(user:password), or Bearer <session token>")
        }
        guard let key = Self.key(header) else {
            throw Self.unauthorized("the Authorization header is neither Basic credentials (base64 of user:password) nor Bearer <session token>")
        }
        if let principal = cachedPrincipal(header, key: key) {
            noteKeyUse(principal)
            return principal
        }
        // The attempt is counted before any work (a failure until it succeeds): guesses sent
        // at once are refused as soon as their count passes the limit, not after their bcrypt.
        let admission = LoginAdmission(throttle: throttle, user: Self.parseBasic(header)?.0, address: address)
        guard let principal = try await verifyAndCache(header, key: key, hideUnknownNames: true, admission: admission) else {
            throw Self.unauthorized(Self.bearerToken(header)?.hasPrefix(APIKeyStore.prefix) == true
                                    ? "the API key is unknown or was removed (richpush api-keys list shows the keys)"
                                    : Self.isBearer(header) ? "the session token is unknown, expired or revoked; sign in again with POST /api/sessions"
                                                            : "wrong user name or password")
        }
        noteKeyUse(principal)
        return principal
    }

    /// Remembers that an API key was used now (written in batches by `recordKeyUses`, never per request).
    private func noteKeyUse(_ principal: Principal) {
        guard let key = principal.apiKey else { return }
        let now = Date()
        keyUses.withLockedValue { $0[key.name] = now }
    }

    /// Writes when API keys were last used, in one transaction for every key used since the last
    /// call; kept for the next call when the database cannot take them now.
    func recordKeyUses() async {
        guard let apiKeys else { return }
        let uses = keyUses.withLockedValue { uses in
            defer { uses = [:] }
            return uses
        }
        guard !uses.isEmpty else { return }
        do { try await apiKeys.recordUse(uses) } catch {
            keyUses.withLockedValue { pending in pending.merge(uses) { max($0, $1) } }
        }
    }

    /// Forgets a header at once (its session was revoked here).
    func forget(_ header: String) {
        guard let key = Self.key(header) else { return }
        cache.withLockedValue { $0[key] = nil }
    }

    /// How many credentials are cached (for tests).
    var cachedCount: Int { cache.withLockedValue { $0.count } }

    /// When `header`'s entry was last verified, or nil (for tests).
    func verifiedAt(_ header: String) -> Double? {
        guard let key = Self.key(header) else { return nil }
        return cache.withLockedValue { $0[key]?.verifiedAt }
    }

    static func isBearer(_ header: String) -> Bool {
        AuthorizationHeader(header)?.scheme == .bearer
    }

    /// The token of a `Bearer` header.
    static func bearerToken(_ header: String) -> String? {
        AuthorizationHeader(header)?.bearerToken
    }

    /// The cache key of an `Authorization` header, read by `AuthorizationHeader` (the one
    /// strict parser). For a bearer token, its SHA-256: the hash the session store keeps, so
    /// sessions loaded from the database share entries with headers. For Basic credentials,
    /// the SHA-256 of the scheme and the token68, so the scheme's case and the field's outer
    /// white space do not make another entry. (Base64 itself has one spelling per value, so
    /// the credentials are not decoded here: this runs for every request the fast path
    /// answers.) nil for a header that is not exactly one of the two.
    static func key(_ header: String) -> CredentialKey? {
        guard let parsed = AuthorizationHeader(header) else { return nil }
        var hasher = parsed.scheme == .basic ? basicHasher : SHA256()
        var credentials = parsed.credentials
        credentials.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        return CredentialKey(hasher.finalize())
    }

    /// A hasher that has taken the Basic keys' domain ("basic", NUL), copied for each key (the
    /// key of every cached fetch is made anew, and this was an array built per request).
    private static let basicHasher: SHA256 = {
        var hasher = SHA256()
        hasher.update(data: Array("basic".utf8) + [0])
        return hasher
    }()

    /// Verifies `header` (a session lookup, bcrypt, or the demo rule) and caches the outcome:
    /// the principal when valid, no entry when not. Throws 401 for a header that is neither
    /// Basic credentials nor a bearer token.
    ///
    /// `hideUnknownNames` runs a dummy bcrypt for a name with no account, where a client waits
    /// for the answer (not in background refreshes, whose timing nobody sees).
    @discardableResult
    ///
    /// `admission` reserves a sign-in attempt before the work starts (and throws 429 or 503
    /// when none may start); a request that joins a verification already running for the same
    /// credentials reserves none. Background refreshes pass nil.
    private func verifyAndCache(_ header: String, key: CredentialKey, hideUnknownNames: Bool = false,
                                admission: LoginAdmission? = nil) async throws -> Principal? {
        let epochAtStart = epoch.withLockedValue { $0 }
        var principal: Principal?
        var expiresAt = Double.infinity
        if let token = Self.bearerToken(header) {
            // A session lookup is one indexed read, not a bcrypt: it is refused while the address
            // is throttled and a miss counts as a failure, but it takes no slot of the bcrypt caps.
            try admission?.refuseWhileThrottled()
            do {
                if token.hasPrefix(APIKeyStore.prefix) {
                    // An API key: a lookup of its hash, cached like a session (removal moves the sessions epoch).
                    if let found = try await apiKeys?.find(token: token) { principal = Principal(key: found) }
                } else if let owner = try await sessions.owner(of: token) {
                    principal = Principal(user: owner.username, admin: owner.admin)
                    expiresAt = owner.expires.timeIntervalSince1970
                }
                if principal == nil { admission?.recordFailure() }
            } catch {
                cache.withLockedValue { $0[key]?.refreshing = false }
                throw error
            }
        } else {
            guard let (user, password) = Self.parseBasic(header) else {
                throw Self.unauthorized("the Authorization header is neither Basic credentials (base64 of user:password) nor Bearer <session token>")
            }
            do {
                let admin = try await inFlight.verify(key: key, admit: { try admission?.reserve() }) { [users, demoAuth, bcryptPool] () -> Bool? in
                    guard let stored = try await users.credentials(of: user) else {
                        // The tutorial's test rule, only for names that have no account: it never opens a real one.
                        if demoAuth && user == password && (try? UserStore.validateName(user)) != nil { return false }
                        // An unknown name costs the same bcrypt as a known one: timing tells nobody which names exist.
                        if hideUnknownNames {
                            _ = try await bcryptPool.runIfActive { UserStore.verify(password: password, hash: Authenticator.dummyHash(cost: users.cost)) }
                            Authenticator.unknownNameChecks.withLockedValue { $0 += 1 }
                        }
                        return nil
                    }
                    let valid = try await bcryptPool.runIfActive { UserStore.verify(password: password, hash: stored.passwordHash) }
                    return valid ? stored.admin : nil
                }
                principal = admin.map { Principal(user: user, admin: $0) }
            } catch {
                cache.withLockedValue { $0[key]?.refreshing = false }
                throw error
            }
        }
        store(principal, key: key, expiresAt: expiresAt, epochAtStart: epochAtStart, session: Self.isBearer(header))
        return principal.map { Self.withSessionToken($0, from: header) }
    }

    /// Caches `principal` for `key` (or drops the entry for nil), unless a user was removed
    /// or a session revoked since `epochAtStart`.
    private func store(_ principal: Principal?, key: CredentialKey, expiresAt: Double, epochAtStart: (users: Int, sessions: Int)?,
                       session: Bool) {
        let verifiedAt = Date().timeIntervalSince1970
        cache.withLockedValue { cache in
            // A user removed (or a session revoked) while this ran must not be cached: keep it only if no change was seen since.
            guard let principal, epoch.withLockedValue({ $0 }) ?? (0, 0) == epochAtStart ?? (0, 0) else {
                cache[key] = nil
                return
            }
            if cache.count >= cacheCapacity {
                // Drop the least recently used tenth: one flood of new credentials cannot flush everyone's.
                let oldest = cache.sorted { $0.value.usedAt < $1.value.usedAt }.prefix(max(1, cacheCapacity / 10)).map(\.key)
                for old in oldest { cache[old] = nil }
            }
            cache[key] = Entry(principal: principal, verifiedAt: verifiedAt, expiresAt: expiresAt, session: session, usedAt: verifiedAt)
        }
    }

    /// Reads the epochs once and loads the newest sessions; call before serving so that the
    /// first removal is noticed.
    package func start() async throws {
        observe(epochs: try await users.epochs())
        try await loadSessions()
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
            self.usersChanged()
        } else if sessionsChanged {
            cache.withLockedValue { cache in cache = cache.filter { !$0.value.session } }
        }
    }

    /// Watches the users epoch in the database (another process may remove a user).
    package func epochWatcher(interval: Duration = .milliseconds(500), payloadKey: PayloadKey?, logger: Logger) -> EpochWatcher {
        EpochWatcher(authenticator: self, users: users, payloadKey: payloadKey, interval: interval, logger: logger)
    }

    static func parseBasic(_ header: String) -> (String, String)? {
        AuthorizationHeader(header)?.basic
    }

    static func unauthorized(_ detail: String) -> Problem {
        Problem(.unauthorized, detail, headers: [.wwwAuthenticate: "Basic realm=\"RichPush\", charset=\"UTF-8\""])
    }
}
