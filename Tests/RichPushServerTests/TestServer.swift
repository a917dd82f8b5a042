import Foundation
import SQLEngine
import HTTPTypes
import Hummingbird
import Logging
import PushDelivery
import HummingbirdTesting
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle
import MediaStore
@testable import RichPushCore
@testable import HTTPEdge
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport

/// A live server on a free port over a fresh data directory, with users alice and bob and the admin root.
struct TestServer {
    let dir: URL
    /// The server's own store (its database's and bucket's breakers, for the fault tests).
    let data: DataStore
    let database: SQLDatabase
    let client: LiveClient
    let configuration: ServerConfiguration
    let environment: [String: String]
    /// The router's routes, `METHOD /path`.
    let routes: [String]
    /// What the server answers from memory (its count of connections handed to the router).
    let fastPath: HotPath<FastPath>
    /// What its dispatcher holds back (docs/api.md#frequency-caps-and-quiet-hours); a second node's holds back the same.
    var guardrails: Guardrails? = nil

    /// The same store opened again, as another process (another node) would.
    func openStoreAgain() async throws -> DataStore {
        try await DataStore.open(path: configuration.dataPath, database: configuration.database, blobs: configuration.blobs,
                           limits: configuration.limits, passwordCost: 4, environment: environment)
    }

    static let passwords = ["alice": "wonderland", "bob": "builder", "root": "rootpw"]

    /// Runs `body` against a live server configured by `configure`.
    /// On `engine`'s store: a new database and bucket prefix for `.shared`. With `provider`, an
    /// outbox dispatcher sends through it, logging to `dispatcherLogger` (the tests' quiet one by
    /// default) and giving a push up after `maxAttempts`.
    static func run(engine: StoreEngine = .embedded, _ configure: (inout ServerConfiguration) -> Void = { _ in },
                    provider: (any PushProvider)? = nil, mirror: (any RegistrationMirror)? = nil,
                    dispatcherLogger: Logger? = nil, maxAttempts: Int = 12, guardrails: Guardrails? = nil,
                    environment: [String: String] = ProcessInfo.processInfo.environment,
                    _ body: @Sendable (TestServer) async throws -> Void) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.dataPath = dir.appendingPathComponent("data").path
        configuration.mediaDirectory = Fixtures.media.path
        configuration.logLevel = .warning
        var environment = environment
        if engine != .embedded {
            let locations = try await engine.locations()
            configuration.database = locations.database
            configuration.blobs = locations.blobs
            environment.merge(locations.environment) { _, new in new }
        }
        configure(&configuration)
        let data = try await DataStore.open(path: configuration.dataPath, database: configuration.database, blobs: configuration.blobs,
                                      limits: configuration.limits, passwordCost: 4, environment: environment)
        defer { data.close() }
        let users = data.users(cost: 4)
        for (name, password) in passwords { _ = try await users.add(name: name, password: password, admin: name == "root") }
        try await serveNode(dir: dir, data: data, configuration: configuration, environment: environment, label: "test", provider: provider,
                            mirror: mirror, dispatcherLogger: dispatcherLogger, maxAttempts: maxAttempts, guardrails: guardrails, body)
    }

    /// Serves a node over `data` until `body` returns: its application as `serve` builds it and,
    /// with `provider`, an outbox dispatcher sending through it.
    private static func serveNode(dir: URL, data: DataStore, configuration: ServerConfiguration, environment: [String: String], label: String,
                                  provider: (any PushProvider)?, mirror: (any RegistrationMirror)? = nil, dispatcherLogger: Logger? = nil,
                                  maxAttempts: Int = 12, guardrails: Guardrails? = nil,
                                  _ body: @Sendable (TestServer) async throws -> Void) async throws {
        var logger = Logger(label: label)
        logger.logLevel = .warning
        var outbox = data.outbox
        outbox.guardrails = guardrails
        let dispatcher = provider.map {
            OutboxDispatcher(outbox: outbox, provider: $0, logger: dispatcherLogger ?? logger, concurrency: 64, pollInterval: .milliseconds(50),
                             maxAttempts: maxAttempts, backoffBase: 0.05, backoffCap: 0.2)
        }
        let app = try await buildApplication(configuration, dispatcher: dispatcher ?? NoPushProvider(), mirror: mirror, data: data,
                                             extraServices: dispatcher.map { [$0] } ?? [], logger: logger)
        let (routes, fastPath) = (app.routes, app.fastPath)
        try await app.serve { client in
            try await body(TestServer(dir: dir, data: data, database: data.database, client: client, configuration: configuration,
                                      environment: environment, routes: routes, fastPath: fastPath, guardrails: guardrails))
        }
    }

    /// Runs `body` against a second node on this server's store (its database and bucket, its
    /// data directory for SQLite), as `serve` on another machine would run: its own listener,
    /// payload index and, with `provider`, its own outbox dispatcher.
    func secondNode(provider: (any PushProvider)? = nil, _ body: @Sendable (TestServer) async throws -> Void) async throws {
        let data = try await openStoreAgain()
        defer { data.close() }
        try await Self.serveNode(dir: dir, data: data, configuration: configuration, environment: environment, label: "test-node-2",
                                 provider: provider, guardrails: guardrails, body)
    }

    static func basic(_ user: String, _ password: String? = nil) -> HTTPFields {
        let token = Data("\(user):\(password ?? passwords[user] ?? user)".utf8).base64EncodedString()
        return [.authorization: "Basic \(token)"]
    }

    func request(_ method: HTTPRequest.Method, _ uri: String, as user: String? = "alice", headers: HTTPFields = [:],
                 body: [UInt8]? = nil) async throws -> TestResponse {
        var all = headers
        if let user { all.append(contentsOf: Self.basic(user)) }
        return try await client.execute(uri: uri, method: method, headers: all, body: body.map { ByteBuffer(bytes: $0) })
    }

    /// A GET with exactly these headers (no credentials added).
    func get(_ uri: String, headers: HTTPFields) async throws -> TestResponse {
        try await client.execute(uri: uri, method: .get, headers: headers, body: nil)
    }

    func json(_ method: HTTPRequest.Method, _ uri: String, as user: String? = "alice", body: String? = nil) async throws -> (TestResponse, Any?) {
        let response = try await request(method, uri, as: user, headers: [.contentType: "application/json"], body: body.map { Array($0.utf8) })
        let object = try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView), options: [.fragmentsAllowed])
        return (response, object)
    }

    var tmpFiles: [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent("data/tmp").path)) ?? []
    }
}

/// Hummingbird's test client on the port `RichPushApplication.run()` bound (HummingbirdTesting's
/// live framework would serve through Hummingbird's own server instead of `HTTPListener`).
struct LiveClient: Sendable {
    let client: TestClient
    let port: Int?

    func execute(uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer? = nil) async throws -> TestResponse {
        var headers = headers
        headers[.connection] = "keep-alive"
        let response = try await client.execute(.init(uri, method: method, authority: "localhost", headers: headers, body: body))
        return TestResponse(head: response.head, body: response.body ?? ByteBuffer(), trailerHeaders: response.trailerHeaders)
    }
}

/// A response, as HummingbirdTesting's (whose initialiser is not public).
struct TestResponse: Sendable {
    let head: HTTPResponse
    let body: ByteBuffer
    let trailerHeaders: HTTPFields?
    var status: HTTPResponse.Status { head.status }
    var headers: HTTPFields { head.headerFields }
}

extension RichPushApplication {
    /// Runs the application as `serve` does, on a free port, and `body` with a client of it.
    func serve<Value: Sendable>(_ body: @Sendable (LiveClient) async throws -> Value) async throws -> Value {
        let port = NIOLockedValueBox<Int?>(nil)
        let app = self.onRunning { channel in port.withLockedValue { $0 = channel.localAddress?.port } }
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var bound: Int?
            for _ in 0..<500 where bound == nil {
                bound = port.withLockedValue { $0 }
                if bound == nil { try await Task.sleep(for: .milliseconds(10)) }
            }
            guard let bound else { throw CancellationError() }
            // Generous: on two cores busy with the whole suite an answer has taken over 20 s (a request that
            // must time out is made with `rawExchange`, which has its own deadline).
            let client = TestClient(host: "localhost", port: bound, configuration: .init(timeout: .seconds(120)))
            client.connect()
            do {
                let value = try await body(LiveClient(client: client, port: bound))
                try await client.shutdown()
                await group.triggerGracefulShutdown()
                return value
            } catch {
                try? await client.shutdown()
                await group.triggerGracefulShutdown()
                throw error
            }
        }
    }
}

extension TestResponse {
    var bytes: [UInt8] { Array(body.readableBytesView) }
    var problem: [String: Any]? {
        guard headers[.contentType] == "application/problem+json" else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
    }
    var detail: String { problem?["detail"] as? String ?? "" }
}

#if canImport(Glibc)
import Glibc
#endif

/// A raw TCP exchange: sends `request` as is and returns what the server answers within `timeout`
/// (everything until the server closes, with `untilClose`). Runs on its own thread: blocking
/// calls on the cooperative pool would starve the server under test.
func rawExchange(port: Int, _ request: String, timeout: Double = 30, untilClose: Bool = false) async throws -> String {
    try await onOwnThread { try blockingExchange(port: port, request, timeout: timeout, untilClose: untilClose) }
}

private func blockingExchange(port: Int, _ request: String, timeout: Double, untilClose: Bool) throws -> String {
    let fd = try connectTo(port: port, timeout: Int(timeout))
    defer { close(fd) }
    sendAll(fd, Array(request.utf8))
    if untilClose { return receiveAll(fd) }
    let (head, body) = exchange(fd, "")
    return head + "\r\n\r\n" + String(decoding: body, as: UTF8.self)
}
