import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PushDelivery
import SQLEngine
@testable import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import Testing

/// The security review's findings (sessions from Basic only, the login throttle under
/// concurrency, a pool of bcrypt's own, one account against everyone's pushes, the lower
/// items), each through real sockets where a client would meet it.
@Suite("Security review")
struct SecurityTests {
    /// A request on a fresh connection, read to its answer's status.
    /// Runs on a thread of its own: a blocking read on the cooperative pool would stall the server it waits for.
    static func status(port: Int, _ request: String) async throws -> Int {
        try await onOwnThread {
            let fd = try connectTo(port: port, timeout: 30)
            defer { close(fd) }
            let (head, _) = exchange(fd, request)
            return Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
    }

    @Test("the Authorization parser takes one scheme, one space and a token68, and nothing else")
    func strictParser() {
        let token = "rps_" + String(repeating: "A", count: 43)
        #expect(AuthorizationHeader("Bearer \(token)")?.bearerToken == token)
        #expect(AuthorizationHeader("bearer \(token)")?.bearerToken == token)   // the scheme is case-insensitive (RFC 7235)
        #expect(AuthorizationHeader(" Bearer \(token) ")?.bearerToken == token) // the field's outer white space is not its value
        #expect(AuthorizationHeader("Basic YWxpY2U6d29uZGVybGFuZA==")?.basic?.user == "alice")
        let confusables = [
            "Bearer\t\(token)", "Bearer  \(token)", "Bearer \t\(token)", "Bearer\u{0B}\(token)", "Bearer \(token),Basic YTpi",
            "Bearer \(token) x", "Bearer=\(token)", "Bearer:\(token)", "Bearer", "Bearer ", "Bearer \(token)=x", "Bearer =\(token)",
            "Basic\tYWxpY2U6d29uZGVybGFuZA==", "Basic  YWxpY2U6d29uZGVybGFuZA==", "Basic YWxp Y2U6", "BasicYWxpY2U6",
            "Bearer \u{00A0}\(token)", "Bearer \(token)\u{00A0}", "Bearer\u{3000}\(token)", "Digest \(token)", "Bearerx \(token)",
            "Bearer \(token)\r\n", "Bearer \(token)\0",
        ]
        for header in confusables {
            #expect(AuthorizationHeader(header) == nil, "\(header.debugDescription)")
            #expect(Authenticator.key(header) == nil, "\(header.debugDescription)")
        }
    }

    @Test("a session token never mints a session, in any spelling: only Basic credentials do", arguments: StoreEngine.all)
    func sessionsFromBasicOnly(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let (created, object) = try await s.json(.post, "/api/sessions", as: "alice")
            #expect(created.status == .created)
            let token = try #require((object as? [String: Any])?["token"] as? String)
            let port = try #require(s.client.port)
            // The token works as a bearer, so it is cached as a session.
            #expect(try await Self.status(port: port, "GET /api/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n") == 200)
            for separator in ["\t", "  ", " \t", "\t "] {
                let status = try await Self.status(port: port, "POST /api/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nAuthorization: Bearer\(separator)\(token)\r\n\r\n")
                #expect(status == 401, "Bearer\(separator.debugDescription)token: \(status)")
            }
            for scheme in ["Bearer", "bearer", "BEARER"] {
                let status = try await Self.status(port: port, "POST /api/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nAuthorization: \(scheme) \(token)\r\n\r\n")
                #expect(status == 403, "\(scheme): \(status)")
            }
        }
    }

    @Test("200 wrong passwords at once from one address: no more are checked than the address may fail, the rest get 429")
    func throttleCountsBeforeTheWork() async throws {
        // --failed-sign-ins 2: ten failures per address (each a cost-12 bcrypt on a shared test machine).
        try await TestServer.run({ $0.failedSignInLimit = 2 }) { s in
            let port = try #require(s.client.port)
            let perAddress = 2 * 5
            // Every connection is open and its request written before any answer is read.
            let statuses = try await onOwnThread { () -> [Int] in
                var fds: [Int32] = []
                defer { fds.forEach { close($0) } }
                for i in 0..<200 {
                    let fd = try connectTo(port: port, timeout: 60)
                    fds.append(fd)
                    let credentials = Data("guesser\(i % 7):wrong\(i)".utf8).base64EncodedString()
                    sendAll(fd, Array("GET /api/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(credentials)\r\n\r\n".utf8))
                }
                return fds.map { fd in
                    let (head, _) = exchange(fd, "")
                    return Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                }
            }
            let unauthorized = statuses.filter { $0 == 401 }.count
            let refused = statuses.filter { $0 == 429 || $0 == 503 }.count
            #expect(unauthorized + refused == 200, "\(Dictionary(grouping: statuses, by: { $0 }).mapValues(\.count))")
            #expect(unauthorized <= perAddress, "\(unauthorized) guesses were checked; the address may fail \(perAddress) times")
            #expect(refused >= 200 - perAddress)
            // One guess at a time from now on: the address gets what is left of its fifty, then 429.
            var more = 0
            var throttled = false
            for i in 0..<perAddress + 1 where !throttled {
                let status = try await s.get("/api/notifications", headers: TestServer.basic("late\(i)", "wrong")).status
                if status == .unauthorized { more += 1 } else { throttled = status == .tooManyRequests }
            }
            #expect(throttled)
            #expect(unauthorized + more == perAddress, "\(unauthorized) at once and \(more) after")
        }
    }

    @Test("the throttle reserves attempts before the work and caps concurrent checks per address")
    func reservations() throws {
        let throttle = LoginThrottle(perUser: 10, globalConcurrent: 6)
        var held: [LoginReservation] = []
        for i in 0..<LoginThrottle.perAddressConcurrent {
            held.append(try throttle.reserve(user: "u\(i)", address: "10.0.0.1"))
        }
        // A fifth check from the address waits for one of the four (429, Retry-After 1).
        #expect { try throttle.reserve(user: "other", address: "10.0.0.1") } throws: {
            ($0 as? Problem)?.status == .tooManyRequests && ($0 as? Problem)?.headers[.retryAfter] == "1"
        }
        held.append(try throttle.reserve(user: "x", address: "10.0.0.2"))
        held.append(try throttle.reserve(user: "y", address: "10.0.0.3"))
        // The server has six checks running: the seventh is 503.
        #expect { try throttle.reserve(user: "z", address: "10.0.0.4") } throws: { ($0 as? Problem)?.status == .serviceUnavailable }
        // A success gives its attempt back; failures stay counted.
        held[0].finish(failed: false)
        for reservation in held.dropFirst() { reservation.finish(failed: true) }
        #expect(throttle.running == 0)
        for _ in 0..<9 { try throttle.reserve(user: "bob", address: "10.0.0.5").finish(failed: true) }
        try throttle.reserve(user: "bob", address: "10.0.0.6").finish(failed: true)
        #expect { try throttle.reserve(user: "bob", address: "10.0.0.7") } throws: { ($0 as? Problem)?.status == .tooManyRequests }
        // An IPv6 client is counted by its /64, however it rotates the rest.
        let v6 = LoginThrottle(perUser: 2)
        for i in 0..<10 { try v6.reserve(user: "guess\(i)", address: "2001:db8:1:2::\(String(i, radix: 16))").finish(failed: true) }
        #expect { try v6.reserve(user: "other", address: "2001:db8:1:2:ffff::1") } throws: { ($0 as? Problem)?.status == .tooManyRequests }
        #expect(throws: Never.self) { try v6.reserve(user: "other", address: "2001:db8:1:3::1").finish(failed: false) }
        #expect(LoginThrottle.addressKey("10.1.2.3") == "10.1.2.3" && LoginThrottle.addressKey("::ffff:10.1.2.3") == "::ffff:10.1.2.3")
    }

    @Test("bcrypt runs on threads of its own: an image read is served while every bcrypt thread is busy")
    func bcryptHasItsOwnPool() async throws {
        // A pool of this server's own: holding it must not hold the other tests' servers.
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        do {
            try await Self.readWhileBcryptIsHeld(pool)
        } catch {
            try? await pool.shutdownGracefully()
            throw error
        }
        try await pool.shutdownGracefully()
    }

    static func readWhileBcryptIsHeld(_ pool: NIOThreadPool) async throws {
        try await TestServer.run({ $0.blobCacheBytes = 0; $0.bcryptPool = pool }) { s in
            #expect(try await s.request(.get, "/api/notifications", as: "alice").status == .ok) // alice's credentials are cached now
            let upload = try await s.request(.post, "/api/media?name=shield", as: "root", body: Array(try Data(contentsOf: Fixtures.media.appendingPathComponent("coupon.png"))))
            #expect(upload.status == .created || upload.status == .ok)
            let id = try #require(try JSONSerialization.jsonObject(with: Data(upload.body.readableBytesView)) as? [String: Any])["sha256"] as? String
            // Hold every bcrypt thread until the image has been read.
            let gate = NIOLockedValueBox(false)
            let holders = (0..<4).map { _ in
                pool.runIfActive(eventLoop: MultiThreadedEventLoopGroup.singleton.next()) {
                    while !gate.withLockedValue({ $0 }) { usleep(10_000) }
                }
            }
            defer { gate.withLockedValue { $0 = true } }
            // Were bcrypt on the shared pool, the read below would wait for the gate: open it after 20 s, so the test fails instead of hanging.
            let opener = Task { try await Task.sleep(for: .seconds(20)); gate.withLockedValue { $0 = true } }
            defer { opener.cancel() }
            // No memory cache (0 bytes): the blob is read from its file, on the shared thread pool.
            let fetched = try await s.request(.get, "/media/\(try #require(id))", as: "alice")
            #expect(fetched.status == .ok)
            #expect(!gate.withLockedValue { $0 }, "the read finished while bcrypt's threads were all held")
            gate.withLockedValue { $0 = true }
            for holder in holders { try await holder.get() }
        }
    }

    @Test("POST /api/notifications is limited per user: past a minute's worth, 429 with Retry-After; another user is unaffected")
    func notificationRate() async throws {
        // Two a minute: a token comes back every 30 s, longer than a loaded suite takes for the three requests.
        try await TestServer.run({ $0.notificationsPerMinute = 2 }) { s in
            for _ in 0..<2 { #expect(try await s.request(.post, "/api/notifications", as: "alice").status == .created) }
            let limited = try await s.request(.post, "/api/notifications", as: "alice")
            #expect(limited.status == .tooManyRequests)
            let wait = try #require(limited.headers[.retryAfter].flatMap(Int.init))
            #expect((1...60).contains(wait))
            #expect(try await s.request(.post, "/api/notifications", as: "bob").status == .created)
            // Nothing was made by the refused request.
            let (_, list) = try await s.json(.get, "/api/notifications", as: "alice")
            #expect((list as? [Any])?.count == 2)
        }
    }

    @Test("the token bucket refills at its rate and holds a minute's worth at most")
    func tokenBucket() {
        let limiter = RateLimiter(perMinute: 60)
        for _ in 0..<60 { #expect(limiter.take("a", now: 1000) == nil) }
        #expect(limiter.take("a", now: 1000) == 1)
        #expect(limiter.take("a", now: 1001) == nil)      // one a second
        #expect(limiter.take("a", now: 1001) != nil)
        #expect(limiter.take("b", now: 1001) == nil)      // per key
        #expect(RateLimiter(perMinute: 0).take("a") == nil)
    }

    @Test("a tag that starts with username: in any case is the server's alone", arguments: StoreEngine.all)
    func usernameTagInAnyCase(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let (created, object) = try await s.json(.post, "/api/register", as: "alice")
            #expect(created.status == .ok || created.status == .created)
            let id = try #require((object as? [String: Any])?["registrationId"] as? String)
            for tag in ["username:bob", "USERNAME:bob", "UserName:bob"] {
                let (response, _) = try await s.json(.put, "/api/register/\(id)", as: "alice",
                                                     body: #"{"platform":"apns","handle":"\#(String(repeating: "ab", count: 32))","tags":["\#(tag)"]}"#)
                #expect(response.status == .forbidden, "\(tag)")
            }
        }
    }

    @Test("a new account starts empty: --demo-auth devices of its name stop receiving and their demo credentials stop working", arguments: StoreEngine.all)
    func demoDevicesDoNotOutliveANewAccount(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine, { $0.demoAuth = true }) { s in
            let demo = TestServer.basic("carol", "carol")
            let registered = try await s.request(.post, "/api/register", as: nil, headers: demo)
            let id = try #require((try JSONSerialization.jsonObject(with: Data(registered.body.readableBytesView)) as? [String: Any])?["registrationId"] as? String)
            var headers = demo
            headers[.contentType] = "application/json"
            let put = try await s.request(.put, "/api/register/\(id)", as: nil, headers: headers,
                                          body: Array(#"{"platform":"apns","handle":"\#(String(repeating: "cd", count: 32))","tags":[]}"#.utf8))
            #expect(put.status == .ok)
            #expect(try await s.request(.post, "/api/notifications", as: nil, headers: demo).status == .created)
            // A session made with the demo rule must not become a session of the real account.
            let session = try await s.request(.post, "/api/sessions", as: nil, headers: demo)
            #expect(session.status == .created)
            let token = try #require((try JSONSerialization.jsonObject(with: Data(session.body.readableBytesView)) as? [String: Any])?["token"] as? String)
            _ = try await UserStore(database: s.database, cost: 4).add(name: "carol", password: "a real password")
            let rows = try await s.database.read { db in
                try db.fetchOne(sql: "SELECT (SELECT COUNT(*) FROM registrations WHERE username = 'carol') + (SELECT COUNT(*) FROM notifications WHERE recipient = 'carol') AS n")
            }
            #expect((rows?["n"] as Int?) == 0)
            #expect(try await eventually(within: 10) { try await s.get("/api/notifications", headers: demo).status == .unauthorized })
            #expect(try await s.get("/api/notifications", headers: [.authorization: "Bearer \(token)"]).status == .unauthorized)
        }
    }

    @Test("users import refuses a bcrypt cost above 14 (each sign-in would hold a thread for minutes or days)")
    func importCost() throws {
        let salt = String(repeating: "a", count: 53)
        #expect(throws: Never.self) { try UserStore.validateBcrypt("$2b$12$" + salt) }
        #expect(throws: Never.self) { try UserStore.validateBcrypt("$2b$14$" + salt) }
        for cost in ["15", "20", "31"] {
            #expect(throws: CoreError.self) { try UserStore.validateBcrypt("$2b$\(cost)$" + salt) }
        }
    }
}

/// A push service that answers at once.
struct AnsweringProvider: PushProvider {
    let sent = NIOLockedValueBox<[String]>([])
    var addressing: DeliveryAddressing { .perDevice }
    func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?) {
        sent.withLockedValue { $0.append(job.target) }
        return (.sent(id: nil), nil)
    }
    func shutdown() async {}
}

/// A push service that takes every push and answers none until released, as an endpoint that
/// accepts and never answers; pushes to tokens starting `hole` are one host's (a concurrency group).
final class HoldingProvider: PushProvider {
    private let held = NIOLockedValueBox<[@Sendable (DeliveryOutcome, Date?) -> Void]>([])
    let started = NIOLockedValueBox<[String]>([])
    var addressing: DeliveryAddressing { .perDevice }
    func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?) { (.sent(id: nil), nil) }
    func start(_ job: DeliveryJob, completion: @escaping @Sendable (DeliveryOutcome, Date?) -> Void) {
        started.withLockedValue { $0.append(job.target) }
        if job.target.hasPrefix("hole") {
            held.withLockedValue { $0.append(completion) }
        } else {
            completion(.sent(id: nil), nil)
        }
    }
    func concurrencyGroup(of job: DeliveryJob) -> String? { job.target.hasPrefix("hole") ? "fcm:hole.example" : nil }
    func release() {
        for completion in held.withLockedValue({ held in defer { held = [] }; return held }) { completion(.sent(id: nil), nil) }
    }
    func shutdown() async { release() }
}

extension SecurityTests {
    /// Registers a device of `platform` with `handle` for `user`.
    static func register(_ s: TestServer, _ user: String, platform: String, handle: String) async throws {
        let (_, object) = try await s.json(.post, "/api/register", as: user)
        let id = try #require((object as? [String: Any])?["registrationId"] as? String)
        let (response, _) = try await s.json(.put, "/api/register/\(id)", as: user, body: #"{"platform":"\#(platform)","handle":"\#(handle)","tags":[]}"#)
        #expect(response.status == .ok)
    }

    @Test("one account's pushes to a service that never answers hold neither another platform's pushes nor another host's")
    func outboxFairness() async throws {
        let apns = AnsweringProvider()
        let fcm = HoldingProvider()
        try await TestServer.run(provider: PlatformRouter(["apns": apns, "fcm": fcm])) { s in
            // bob: 100 devices whose service takes pushes and never answers, more than the test window of 64.
            for i in 0..<100 {
                try await Self.register(s, "bob", platform: "fcm", handle: "hole" + String(repeating: "x", count: 20) + String(i))
            }
            #expect(try await s.request(.post, "/api/notifications", as: "bob").status == .created)
            #expect(try await eventually(within: 30) { fcm.started.withLockedValue { $0.count } >= 50 })
            // alice: one APNs device and one FCM device on another host.
            let token = String(repeating: "ef", count: 32)
            try await Self.register(s, "alice", platform: "apns", handle: token)
            try await Self.register(s, "alice", platform: "fcm", handle: "good" + String(repeating: "y", count: 20))
            #expect(try await s.request(.post, "/api/notifications", as: "alice").status == .created)
            // Both of alice's pushes go out while every one of bob's is still unanswered.
            #expect(try await eventually(within: 30) { apns.sent.withLockedValue { $0.contains(token) } })
            #expect(try await eventually(within: 30) { fcm.started.withLockedValue { $0.contains { $0.hasPrefix("good") } } })
            // One host holds at most its group's share of the lane.
            #expect(fcm.started.withLockedValue { $0.filter { $0.hasPrefix("hole") }.count } == 50)
            fcm.release()
            #expect(try await eventually(within: 30) {
                fcm.release()
                return fcm.started.withLockedValue { $0.filter { $0.hasPrefix("hole") }.count } == 100
            })
        }
    }
}

extension SecurityTests {
    @Test("a JSON route refuses a body a cross-site form could send (text/plain, form types, no type): 415, and nothing is made")
    func jsonRoutesTakeJSONOnly() async throws {
        try await TestServer.run { s in
            let port = try #require(s.client.port)
            let credentials = Data("alice:wonderland".utf8).base64EncodedString()
            let body = #"{"message":"from another site"}"#
            for type in ["Content-Type: text/plain\r\n", "Content-Type: application/x-www-form-urlencoded\r\n",
                         "Content-Type: multipart/form-data; boundary=x\r\n", "Content-Type: text/plain;charset=UTF-8\r\n", ""] {
                let status = try await Self.status(port: port, "POST /api/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(credentials)\r\n\(type)Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
                #expect(status == 415, "\(type.debugDescription): \(status)")
            }
            let (_, list) = try await s.json(.get, "/api/notifications", as: "alice")
            #expect((list as? [Any])?.count == 0)
            for type in ["application/json", "application/json; charset=utf-8", "application/merge-patch+json"] {
                let status = try await Self.status(port: port, "POST /api/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(credentials)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
                #expect(status == 201, "\(type): \(status)")
            }
            // The tutorial's empty "send push" needs no type.
            #expect(try await Self.status(port: port, "POST /api/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(credentials)\r\nContent-Length: 0\r\n\r\n") == 201)
        }
    }
}

extension SecurityTests {
    @Test("a store that cannot write answers 500 without naming a server path, and the log has the words")
    func noServerPathsInAnswers() async throws {
        try await TestServer.run { s in
            let tmp = URL(fileURLWithPath: s.configuration.dataPath).appendingPathComponent("tmp")
            try FileManager.default.removeItem(at: tmp)
            try Data("not a directory".utf8).write(to: tmp) // every write under tmp/ now fails (ENOTDIR)
            let coupon = Array(try Data(contentsOf: Fixtures.media.appendingPathComponent("coupon.png")))
            let response = try await s.request(.post, "/api/media", as: "alice", body: coupon)
            #expect(response.status == .internalServerError)
            #expect(!response.detail.contains(s.configuration.dataPath) && !response.detail.contains("/tmp"), "\(response.detail)")
            #expect(response.detail.contains("request id"))
        }
    }
}
