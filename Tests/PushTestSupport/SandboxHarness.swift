import APNsSandbox
import AsyncHTTPClient
import Crypto
import CryptoExtras
import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import HummingbirdTesting
import PushDelivery
import PushSandboxes
import RichPushTestSupport
import ServiceLifecycle

/// A running APNs sandbox on a free port, with the provider key and a trusted certificate.
public struct RunningSandbox: Sendable {
    public let sandbox: APNsSandbox
    public let port: Int
    public let key: P256.Signing.PrivateKey
    public let certificatePath: String
    public static let teamID = "TEAM123456"
    public static let keyID = "KEY1234567"
    public static let topic = "com.example.richpush"

    /// A sandbox already running on `port`.
    public init(sandbox: APNsSandbox, port: Int, key: P256.Signing.PrivateKey, certificatePath: String) {
        self.sandbox = sandbox
        self.port = port
        self.key = key
        self.certificatePath = certificatePath
    }

    /// An APNs client of RichPush pointed at this sandbox.
    public func client(tokens: APNsTokenManager? = nil) throws -> APNsClient {
        try APNsClient(credentials: credentials, topic: Self.topic, environment: .custom("https://127.0.0.1:\(port)"),
                       extraRoots: [certificatePath], tokens: tokens)
    }

    public var credentials: APNsCredentials { APNsCredentials(key: key, keyID: Self.keyID, teamID: Self.teamID) }

    /// Starts a sandbox, runs `body`, stops it.
    public static func with(_ body: @Sendable (RunningSandbox) async throws -> Void) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = P256.Signing.PrivateKey()
        let (certificate, tlsKey) = try APNsSandbox.selfSignedCertificate()
        let certificatePath = dir.appendingPathComponent("ca.pem").path
        try certificate.write(toFile: certificatePath, atomically: true, encoding: .utf8)
        var configuration = APNsSandbox.Configuration(teamID: teamID, keyID: keyID, publicKey: key.publicKey,
                                                      tlsCertificatePEM: certificate, tlsKeyPEM: tlsKey)
        configuration.port = 0
        configuration.topics = [topic]
        let sandbox = try APNsSandbox(configuration)
        let port = NIOLockedValueBox<Int?>(nil)
        var logger = Logger(label: "sandbox")
        logger.logLevel = .warning
        let app = try sandbox.application(logger: logger) { channel in
            port.withLockedValue { $0 = channel.localAddress?.port }
        }
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let bound = try await boundPort(port)
            do {
                try await body(RunningSandbox(sandbox: sandbox, port: bound, key: key, certificatePath: certificatePath))
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }
}

/// A value a test needed was not there.
public struct MissingValue: Error {
    public init() {}
}

/// The port a server under test bound, once its `onServerRunning` has stored it in `port`.
///
/// Counted in polls of 10 ms, not by the wall clock: a loaded suite that keeps the cooperative
/// pool busy delays the server's start and these polls alike, so a slow start is waited for
/// (6,000 polls, a minute at the least) instead of failing the test.
public func boundPort(_ port: NIOLockedValueBox<Int?>, polls: Int = 6000) async throws -> Int {
    for _ in 0..<polls {
        if let bound = port.withLockedValue({ $0 }) { return bound }
        try await Task.sleep(for: .milliseconds(10))
    }
    throw MissingValue()
}

/// `value`, or `MissingValue`.
public func requireValue<T>(_ value: T?) throws -> T {
    guard let value else { throw MissingValue() }
    return value
}


/// Serves `standIns` on one free port, each under its prefix (none: at the root) and bound to
/// its origin, while `body` runs with the server's origin (`http://127.0.0.1:<port>`).
public func serving(_ standIns: [(standIn: any PushStandIn, prefix: String)], _ body: @Sendable (String) async throws -> Void) async throws {
    let router = Router()
    for (standIn, prefix) in standIns { standIn.addRoutes(to: router, at: prefix) }
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
    try await app.test(.live) { client in
        guard let port = client.port else { throw FixtureError("the stand-ins have no port") }
        let origin = "http://127.0.0.1:\(port)"
        for (standIn, prefix) in standIns { standIn.bound(origin: prefix.isEmpty ? origin : "\(origin)/\(prefix)") }
        try await body(origin)
    }
}

/// Runs `body` with a client, and shuts the client down however `body` ends.
public func using<Client: Sendable>(_ client: Client, shutdown: (Client) async throws -> Void, _ body: (Client) async throws -> Void) async throws {
    do {
        try await body(client)
    } catch {
        try? await shutdown(client)
        throw error
    }
    try await shutdown(client)
}

/// A Firebase service account for the tests: its RSA key, and the JSON Google's console gives.
public enum FCMFixtures {
    /// The account's private key (the sandbox verifies assertions with its public half).
    public static let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)

    /// An FCM sandbox that knows this account.
    public static func sandbox() -> FCMSandbox {
        FCMSandbox(account: .init(projectID: "rich-push-test", clientEmail: "sender@rich-push-test.iam.gserviceaccount.com",
                                  publicKey: key.publicKey))
    }

    /// A device route of the sandbox, as `curl` calls it: its status and JSON object.
    public static func call(_ method: NIOHTTP1.HTTPMethod, _ url: String) async throws -> (status: Int, body: [String: Any]) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        let object = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
        return (Int(response.status.code), object ?? [:])
    }

    /// The `richId`s of the messages in a device route's `arrived`.
    public static func arrived(_ body: [String: Any]) -> [String] {
        (body["arrived"] as? [[String: Any]] ?? []).compactMap { ($0["data"] as? [String: Any])?["richId"] as? String }
    }

    /// The service account JSON for `key`, whose token endpoint is `tokenURI`.
    public static func accountJSON(tokenURI: String, key: String = FCMFixtures.key.pkcs8PEMRepresentation) -> Data {
        try! JSONSerialization.data(withJSONObject: [
            "type": "service_account", "project_id": "rich-push-test", "private_key_id": "k1", "private_key": key,
            "client_email": "sender@rich-push-test.iam.gserviceaccount.com", "token_uri": tokenURI,
        ])
    }
}
