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

    let header = "Basic " + Data("alice:pw".utf8).base64EncodedString()

    @Test("an entry used in its last quarter is re-verified in the background and outlives its first expiry")
    func refreshAhead() async throws {
        let (dir, users) = try await setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let authenticator = Authenticator(users: users, demoAuth: false, ttl: 1.0)
        #expect(try await authenticator.authenticate(header) == "alice")
        try await Task.sleep(for: .milliseconds(850))
        #expect(authenticator.cachedUser(header) == "alice") // starts the refresh
        try await Task.sleep(for: .milliseconds(450))        // past the first expiry
        #expect(authenticator.cachedUser(header) == "alice")
    }

    @Test("a refresh that finds the user gone drops the entry at once")
    func refreshDropsRemovedUser() async throws {
        let (dir, users) = try await setUp()
        defer { try? FileManager.default.removeItem(at: dir) }
        let authenticator = Authenticator(users: users, demoAuth: false, ttl: 2.0)
        #expect(try await authenticator.authenticate(header) == "alice")
        try await Task.sleep(for: .milliseconds(1600))
        try await users.remove(name: "alice")                // not observed through the epoch here
        #expect(authenticator.cachedUser(header) == "alice") // still cached; starts the refresh
        try await Task.sleep(for: .milliseconds(250))        // before the first expiry
        #expect(authenticator.cachedUser(header) == nil)
        await #expect(throws: Problem.self) { try await authenticator.authenticate(header) }
    }
}
