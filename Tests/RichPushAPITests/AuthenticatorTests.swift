import SQLEngine
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import MediaStore
@testable import RichPushCore
@testable import RichPushAPI
import RichPushTestSupport
import Testing

@Suite("Credential cache")
struct AuthenticatorTests {
    func setUp() async throws -> (URL, UserStore) {
        let dir = try Fixtures.tempDirectory()
        let users = UserStore(database: try CoreDatabase.open(DataDirectory(path: dir.path)), cost: 4)
        _ = try await users.add(name: "alice", password: "pw")
        return (dir, users)
    }

    func authenticator(_ users: UserStore, ttl: Double) -> Authenticator {
        Authenticator(users: users, sessions: SessionStore(database: users.database), demoAuth: false, ttl: ttl)
    }

    let header = "Basic " + Data("alice:pw".utf8).base64EncodedString()

    @Test("an aged entry is still used while it is re-verified in the background, and lives on")
    func staleWhileRevalidate() async throws {
        let (dir, users) = try await setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let authenticator = authenticator(users, ttl: 4.0)
        #expect(try await authenticator.authenticate(header).user == "alice")
        let first = try #require(authenticator.verifiedAt(header))
        try await Task.sleep(for: .milliseconds(3100))       // past three quarters of the TTL: still used…
        #expect(authenticator.cachedUser(header) == "alice") // …and re-verified in the background
        // However long the background bcrypt takes on a busy machine, it renews the entry…
        #expect(try await eventually { (authenticator.verifiedAt(header) ?? 0) > first })
        // …which lives on past twice the first TTL. (Just past it: the renewed entry lives until
        // about first + 3.1 + 8 s, so a loaded machine has 3 s of slack before this check.)
        let wait = first + 8.1 - Date().timeIntervalSince1970
        if wait > 0 { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) }
        #expect(authenticator.cachedUser(header) == "alice")
    }

    @Test("an entry unused for twice the TTL is verified again before use")
    func expiry() async throws {
        let (dir, users) = try await setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let authenticator = authenticator(users, ttl: 0.5)
        #expect(try await authenticator.authenticate(header).user == "alice")
        try await Task.sleep(for: .milliseconds(1100))
        #expect(authenticator.cachedUser(header) == nil)
    }

    @Test("a refresh that finds the user gone drops the entry at once")
    func refreshDropsRemovedUser() async throws {
        let (dir, users) = try await setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let authenticator = authenticator(users, ttl: 20.0)
        #expect(try await authenticator.authenticate(header).user == "alice")
        try await Task.sleep(for: .milliseconds(15_100))     // past three quarters of the TTL
        try await users.remove(name: "alice")                // not observed through the epoch here
        #expect(authenticator.cachedUser(header) == "alice") // still cached; starts the refresh
        // Dropped by the refresh (a task that may wait many seconds on the loaded suite's two
        // cores), before the entry would expire by itself at twice the TTL (40 s after it was verified).
        #expect(try await eventually(within: 20) { authenticator.cachedUser(header) == nil })
        await #expect(throws: Problem.self) { try await authenticator.authenticate(header) }
    }

    @Test("the cache is keyed on the credentials, not the header's spelling: 100 spellings make one entry")
    func spellings() async throws {
        let (dir, users) = try await setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let authenticator = authenticator(users, ttl: 60)
        let token = Data("alice:pw".utf8).base64EncodedString()
        for i in 0..<100 {
            // The scheme in any case, and white space around the field's value (not part of it);
            // between scheme and credentials exactly one space (anything else is no credential).
            let scheme = ["Basic", "basic", "BASIC", "bAsIc"][i % 4]
            let header = String(repeating: " ", count: i % 3) + scheme + " " + token + String(repeating: "\t", count: i / 4 % 3)
            #expect(try await authenticator.authenticate(header).user == "alice")
        }
        #expect(authenticator.cachedCount == 1)
    }

    @Test("a full cache drops its least recently used entries, not everyone's")
    func leastRecentlyUsed() async throws {
        let (dir, users) = try await setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let authenticator = Authenticator(users: users, sessions: SessionStore(database: users.database), demoAuth: true, ttl: 60, cacheCapacity: 10)
        #expect(try await authenticator.authenticate(header).user == "alice")
        for i in 0..<50 {
            let name = "demo\(i)"
            _ = try await authenticator.authenticate("Basic " + Data("\(name):\(name)".utf8).base64EncodedString())
            #expect(authenticator.cachedUser(header) == "alice") // used all along: kept
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(authenticator.cachedCount <= 10)
        #expect(authenticator.cachedUser("Basic " + Data("demo0:demo0".utf8).base64EncodedString()) == nil) // unused since: dropped
    }

    @Test("an unknown name is checked against a dummy hash, as a known one is against its own")
    func unknownNamesCostABcrypt() async throws {
        let (dir, users) = try await setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let authenticator = authenticator(users, ttl: 60)
        let before = Authenticator.unknownNameChecks.withLockedValue { $0 }
        await #expect(throws: Problem.self) { try await authenticator.authenticate("Basic " + Data("nobody:pw".utf8).base64EncodedString()) }
        #expect(Authenticator.unknownNameChecks.withLockedValue { $0 } > before)
    }

    @Test("failed sign-ins are throttled per user and per address, before any bcrypt; a cached sign-in is unaffected")
    func throttling() async throws {
        let (dir, users) = try await setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        _ = try await users.add(name: "bob", password: "right")
        let authenticator = authenticator(users, ttl: 60)
        #expect(try await authenticator.authenticate(header, from: "10.0.0.1").user == "alice")
        let wrong = "Basic " + Data("bob:wrong".utf8).base64EncodedString()
        for _ in 0..<LoginThrottle.defaultPerUser {
            await #expect { try await authenticator.authenticate(wrong, from: "10.0.0.2") } throws: { ($0 as? Problem)?.status == .unauthorized }
        }
        // Now even the right password waits (from any address), with Retry-After.
        let right = "Basic " + Data("bob:right".utf8).base64EncodedString()
        await #expect { try await authenticator.authenticate(right, from: "10.0.0.3") } throws: { error in
            guard let problem = error as? Problem, problem.status == .tooManyRequests, let wait = problem.headers[.retryAfter].flatMap(Int.init) else { return false }
            return wait > 0 && wait <= 300
        }
        #expect(try await authenticator.authenticate(header, from: "10.0.0.2").user == "alice") // cached: never throttled
        // Per address: unknown names from one address, until it is refused for everyone it sends.
        for i in 0..<LoginThrottle.defaultPerUser * 5 {
            _ = try? await authenticator.authenticate("Basic " + Data("guess\(i):x".utf8).base64EncodedString(), from: "10.0.0.9")
        }
        _ = try await users.add(name: "carol", password: "c")
        await #expect { try await authenticator.authenticate("Basic " + Data("carol:c".utf8).base64EncodedString(), from: "10.0.0.9") }
            throws: { ($0 as? Problem)?.status == .tooManyRequests }
        #expect(try await authenticator.authenticate("Basic " + Data("carol:c".utf8).base64EncodedString(), from: "10.0.0.10").user == "carol")

        // --failed-sign-ins 0: no throttle (a proxy in front limits sign-ins, or a fuzzer runs): every wrong password is a 401.
        let open = Authenticator(users: users, sessions: SessionStore(database: users.database), demoAuth: false, ttl: 60, failedSignIns: 0)
        for _ in 0...LoginThrottle.defaultPerUser {
            await #expect { try await open.authenticate(wrong, from: "10.0.0.2") } throws: { ($0 as? Problem)?.status == .unauthorized }
        }
        #expect(try await open.authenticate(right, from: "10.0.0.2").user == "bob")
    }
}
