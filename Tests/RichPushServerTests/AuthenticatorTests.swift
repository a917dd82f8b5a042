import Foundation
import MediaStore
import RichPushCore
@testable import RichPushServer
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
        let authenticator = authenticator(users, ttl: 1.0)
        #expect(try await authenticator.authenticate(header).user == "alice")
        try await Task.sleep(for: .milliseconds(1300))       // past the TTL: stale, still usable
        #expect(authenticator.cachedUser(header) == "alice") // starts the refresh
        try await Task.sleep(for: .milliseconds(900))        // past twice the first TTL
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
        let authenticator = authenticator(users, ttl: 1.0)
        #expect(try await authenticator.authenticate(header).user == "alice")
        try await Task.sleep(for: .milliseconds(900))
        try await users.remove(name: "alice")                // not observed through the epoch here
        #expect(authenticator.cachedUser(header) == "alice") // still cached; starts the refresh
        try await Task.sleep(for: .milliseconds(300))        // well before twice the TTL
        #expect(authenticator.cachedUser(header) == nil)
        await #expect(throws: Problem.self) { try await authenticator.authenticate(header) }
    }
}
