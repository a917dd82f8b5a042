import Foundation
import SQLEngine
import HTTPTypes
import HummingbirdTesting
import RichPushClient
import RichPushTestSupport
import Testing

/// The device library (`RichPushClient`) against a live server through real sockets and the
/// platform's URLSession: what an app and its Notification Service Extension will meet.
@Suite("The device library against a live server")
struct ClientLibraryTests {
    static let logo = try! Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))
    static let alice = RichPushClient.Credentials.basic(user: "alice", password: "wonderland")

    static func baseURL(_ s: TestServer) throws -> URL {
        let port = try #require(s.client.port)
        return try #require(URL(string: "http://127.0.0.1:\(port)"))
    }

    /// Creates a notification for alice and returns the server's JSON answer.
    static func createNotification(_ s: TestServer, body: String? = nil) async throws -> [String: Any] {
        let (response, object) = try await s.json(.post, "/api/notifications", body: body)
        #expect(response.status == .created)
        return try #require(object as? [String: Any])
    }

    /// The push the server built for notification `id`, as the device would receive it.
    static func storedPush(_ s: TestServer, _ id: Int) async throws -> Data {
        let data = try await s.database.read { db in try Data.fetchOne(db, sql: "SELECT push FROM notifications WHERE id = ?", arguments: [id]) }
        return try #require(data)
    }

    static func files(_ directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
    }

    /// The URL with its last character replaced by one whose base64url value differs in the top
    /// bit, so the token's bytes change (the last character's low bits may be padding only).
    static func changingLastCharacter(_ url: String) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        guard let last = url.last else { return url }
        let replacement: Character = alphabet.firstIndex(of: last).map { alphabet[$0 ^ 32] } ?? (last == "A" ? "B" : "A")
        return String(url.dropLast()) + String(replacement)
    }

    @Test("the silent push the server built parses, and the payload downloads with Basic credentials into a .png", arguments: StoreEngine.all)
    func basicDownload(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let created = try await Self.createNotification(s)
            let id = try #require(created["id"] as? Int)
            let push = try await Self.storedPush(s, id)
            let message = try RichPushMessage(json: push)
            #expect(message == RichPushMessage(id: Int64(id), message: "Check this image out!", richType: "img", kind: .silent))

            let directory = try Fixtures.tempDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let client = RichPushClient(baseURL: try Self.baseURL(s), credentials: Self.alice)
            let payload = try await client.downloadPayload(for: message, into: directory)
            #expect(payload.fileURL.pathExtension == "png")
            #expect(payload.fileURL.lastPathComponent.hasPrefix("\(id)-"))
            #expect(payload.fileURL.deletingLastPathComponent().path == directory.path)
            #expect(payload.contentType == "image/png")
            #expect(payload.size == Self.logo.count)
            #expect(try Fixtures.bytes(payload.fileURL) == Self.logo)
            #expect(Self.files(directory) == [payload.fileURL.lastPathComponent])
            // What an extension asks for: the push variant, a JPEG made from the PNG (docs/configuration.md#the-media-store).
            let pushed = try await client.downloadPayload(for: message, into: directory, variant: .push)
            #expect(pushed.fileURL.pathExtension == "jpg" && pushed.contentType == "image/jpeg" && pushed.size <= 1_048_576)
            try FileManager.default.removeItem(at: pushed.fileURL)

            let (_, list) = try await s.json(.get, "/api/notifications")
            #expect((list as? [[String: Any]])?.first?["read"] as? Bool == true)
        }
    }

    @Test("a device session: the bearer token downloads; once revoked it gets 401; a wrong password gets no session", arguments: StoreEngine.all)
    func bearerSession(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let created = try await Self.createNotification(s)
            let id = try #require(created["id"] as? Int)
            let message = RichPushMessage(id: Int64(id), message: "", kind: .silent)
            let directory = try Fixtures.tempDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }

            let anonymous = RichPushClient(baseURL: try Self.baseURL(s))
            let session = try await anonymous.createSession(user: "alice", password: "wonderland")
            #expect(!session.token.isEmpty)
            #expect(session.expires > Date())
            let device = anonymous.with(credentials: .bearer(session.token))
            let payload = try await device.downloadPayload(for: message, into: directory)
            #expect(try Fixtures.bytes(payload.fileURL) == Self.logo)

            try await device.revokeSession()
            let revoked = await #expect(throws: RichPushClientError.self) {
                try await device.downloadPayload(for: message, into: directory)
            }
            #expect(revoked?.kind == .http(status: 401))
            #expect(Self.files(directory) == [payload.fileURL.lastPathComponent])

            let wrong = await #expect(throws: RichPushClientError.self) {
                try await anonymous.createSession(user: "alice", password: "not her password")
            }
            #expect(wrong?.kind == .http(status: 401))
        }
    }

    @Test("reportOpened: with the payload URL (no credentials) or the client's credentials, counted once; another user's is 404")
    func reportOpened() async throws {
        try await TestServer.run { s in
            let alert = try await Self.createNotification(s, body: #"{"mode":"alert","title":"Hi","message":"Open me"}"#)
            let silent = try await Self.createNotification(s)
            let alice = RichPushClient(baseURL: try Self.baseURL(s), credentials: .basic(user: "alice", password: "wonderland"))
            let anonymous = RichPushClient(baseURL: try Self.baseURL(s))
            let link = try #require(URL(string: alert["richUrl"] as? String ?? ""))
            try await anonymous.reportOpened(RichPushMessage(id: Int64(alert["id"] as? Int ?? 0), message: "Open me", payloadURL: link, kind: .alert))
            let quiet = RichPushMessage(id: Int64(silent["id"] as? Int ?? 0), message: "", kind: .silent)
            try await alice.reportOpened(quiet)
            try await alice.reportOpened(quiet) // again: still once
            let opened = try await s.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM notifications WHERE openedAt IS NOT NULL") }
            #expect(opened == 2)
            let bob = RichPushClient(baseURL: try Self.baseURL(s), credentials: .basic(user: "bob", password: "builder"))
            let refused = await #expect(throws: RichPushClientError.self) { try await bob.reportOpened(quiet) }
            #expect(refused?.kind == .http(status: 404))
        }
    }

    @Test("bob's credentials get 404 for alice's notification, a wrong password 401, and no file is left", arguments: StoreEngine.all)
    func someoneElse(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let created = try await Self.createNotification(s)
            let id = try #require(created["id"] as? Int)
            let message = RichPushMessage(id: Int64(id), message: "", kind: .silent)
            let directory = try Fixtures.tempDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let base = try Self.baseURL(s)

            let bob = RichPushClient(baseURL: base, credentials: .basic(user: "bob", password: "builder"))
            let notFound = await #expect(throws: RichPushClientError.self) {
                try await bob.downloadPayload(for: message, into: directory)
            }
            #expect(notFound?.kind == .http(status: 404))
            #expect(notFound?.message.contains("404") == true)
            #expect(Self.files(directory).isEmpty)

            let wrongPassword = RichPushClient(baseURL: base, credentials: .basic(user: "alice", password: "nope"))
            let unauthorized = await #expect(throws: RichPushClientError.self) {
                try await wrongPassword.downloadPayload(for: message, into: directory)
            }
            #expect(unauthorized?.kind == .http(status: 401))
            #expect(Self.files(directory).isEmpty)

            let missing = RichPushMessage(id: Int64(id) + 1000, message: "", kind: .silent)
            let unknown = await #expect(throws: RichPushClientError.self) {
                try await RichPushClient(baseURL: base, credentials: Self.alice).downloadPayload(for: missing, into: directory)
            }
            #expect(unknown?.kind == .http(status: 404))
            #expect(Self.files(directory).isEmpty)
        }
    }

    @Test("a payload over maxBytes is refused as too large and leaves no file", arguments: StoreEngine.all)
    func tooLarge(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let created = try await Self.createNotification(s)
            let id = try #require(created["id"] as? Int)
            let message = RichPushMessage(id: Int64(id), message: "", kind: .silent)
            let directory = try Fixtures.tempDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let client = RichPushClient(baseURL: try Self.baseURL(s), credentials: Self.alice)

            for limit in [Self.logo.count - 1, 1024] {
                let error = await #expect(throws: RichPushClientError.self) {
                    try await client.downloadPayload(for: message, into: directory, maxBytes: limit)
                }
                #expect(error?.kind == .tooLarge)
                #expect(error?.message.contains(String(limit)) == true)
                #expect(Self.files(directory).isEmpty)
            }
            let exact = try await client.downloadPayload(for: message, into: directory, maxBytes: Self.logo.count)
            #expect(exact.size == Self.logo.count)
        }
    }

    @Test("an alert push's richUrl downloads with no credentials; a changed token is 404; no richUrl and no credentials is 401", arguments: StoreEngine.all)
    func payloadURL(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let created = try await Self.createNotification(s, body: #"{"mode":"alert"}"#)
            let id = try #require(created["id"] as? Int)
            let richUrl = try #require(created["richUrl"] as? String)
            let aps: [String: Any] = ["alert": ["title": "RichPush", "body": "Check this image out!"], "mutable-content": 1, "sound": "default"]
            let push: [String: Any] = ["aps": aps, "richId": String(id), "richMessage": "Check this image out!", "richType": "img", "richUrl": richUrl]
            let message = try RichPushMessage(json: JSONSerialization.data(withJSONObject: push))
            #expect(message.kind == .alert)
            #expect(message.title == "RichPush")
            #expect(message.payloadURL?.absoluteString == richUrl)

            let directory = try Fixtures.tempDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let anonymous = RichPushClient(baseURL: try Self.baseURL(s))
            let payload = try await anonymous.downloadPayload(for: message, into: directory)
            #expect(payload.fileURL.pathExtension == "png")
            #expect(try Fixtures.bytes(payload.fileURL) == Self.logo)

            let changedURL = try #require(URL(string: Self.changingLastCharacter(richUrl)))
            let tampered = RichPushMessage(id: Int64(id), message: message.message, title: message.title, payloadURL: changedURL, kind: .alert)
            #expect(tampered.payloadURL != message.payloadURL)
            let changed = await #expect(throws: RichPushClientError.self) {
                try await anonymous.downloadPayload(for: tampered, into: directory)
            }
            #expect(changed?.kind == .http(status: 404))

            let silent = RichPushMessage(id: Int64(id), message: message.message, kind: .silent)
            let noCredentials = await #expect(throws: RichPushClientError.self) {
                try await anonymous.downloadPayload(for: silent, into: directory)
            }
            #expect(noCredentials?.kind == .http(status: 401))
            #expect(Self.files(directory) == [payload.fileURL.lastPathComponent])
        }
    }
}
