import APNsSandbox
import Crypto
import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import HummingbirdTesting
import PushDelivery
import PushSandboxes
import RichPushTestSupport
import ServiceLifecycle

/// A running APNs sandbox on a free port, with the provider key and a trusted certificate.
struct RunningSandbox: Sendable {
    let sandbox: APNsSandbox
    let port: Int
    let key: P256.Signing.PrivateKey
    let certificatePath: String
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let topic = "com.example.richpush"

    /// An APNs client of RichPush pointed at this sandbox.
    func client(tokens: APNsTokenManager? = nil) throws -> APNsClient {
        try APNsClient(credentials: credentials, topic: Self.topic, environment: .custom("https://127.0.0.1:\(port)"),
                       extraRoots: [certificatePath], tokens: tokens)
    }

    var credentials: APNsCredentials { APNsCredentials(key: key, keyID: Self.keyID, teamID: Self.teamID) }

    /// Starts a sandbox, runs `body`, stops it.
    static func with(_ body: @Sendable (RunningSandbox) async throws -> Void) async throws {
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

struct MissingValue: Error {}

/// The port a server under test bound, once its `onServerRunning` has stored it in `port`.
///
/// Counted in polls of 10 ms, not by the wall clock: a loaded suite that keeps the cooperative
/// pool busy delays the server's start and these polls alike, so a slow start is waited for
/// (6,000 polls, a minute at the least) instead of failing the test.
func boundPort(_ port: NIOLockedValueBox<Int?>, polls: Int = 6000) async throws -> Int {
    for _ in 0..<polls {
        if let bound = port.withLockedValue({ $0 }) { return bound }
        try await Task.sleep(for: .milliseconds(10))
    }
    throw MissingValue()
}

func requireValue<T>(_ value: T?) throws -> T {
    guard let value else { throw MissingValue() }
    return value
}


/// Serves `standIns` on one free port, each under its prefix (none: at the root) and bound to
/// its origin, while `body` runs with the server's origin (`http://127.0.0.1:<port>`).
func serving(_ standIns: [(standIn: any PushStandIn, prefix: String)], _ body: @Sendable (String) async throws -> Void) async throws {
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
func using<Client: Sendable>(_ client: Client, shutdown: (Client) async throws -> Void, _ body: (Client) async throws -> Void) async throws {
    do {
        try await body(client)
    } catch {
        try? await shutdown(client)
        throw error
    }
    try await shutdown(client)
}
