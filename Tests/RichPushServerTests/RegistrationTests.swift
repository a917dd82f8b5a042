import Foundation
import SQLEngine
import HTTPTypes
import HummingbirdTesting
@testable import RichPushCore
@testable import RichPushAPI
import RichPushServer
import RichPushTestSupport
import Testing

let tokenA = String(repeating: "ab", count: 32)
let tokenB = String(repeating: "cd", count: 32)

extension TestServer {
    /// POST /api/register then PUT the token, as the tutorial's app does; returns the id.
    func registerDevice(_ token: String, as user: String = "alice", tags: [String] = []) async throws -> String {
        let (_, created) = try await json(.post, "/api/register", as: user)
        let id = try #require((created as? [String: Any])?["registrationId"] as? String)
        let tagList = tags.map { "\"\($0)\"" }.joined(separator: ",")
        let (response, _) = try await json(.put, "/api/register/\(id)", as: user, body: "{\"Platform\":\"apns\",\"Handle\":\"\(token)\",\"Tags\":[\(tagList)]}")
        #expect(response.status == .ok)
        return id
    }
}

@Suite("Registrations")
struct RegistrationTests {
    @Test("POST gives an id; PUT with the tutorial's capitalised keys forces username:<user>; DELETE removes", arguments: StoreEngine.all)
    func lifecycle(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let (created, object) = try await s.json(.post, "/api/register")
            #expect(created.status == .ok)
            let id = try #require((object as? [String: Any])?["registrationId"] as? String)
            let (put, body) = try await s.json(.put, "/api/register/\(id)", body: "{\"Platform\":\"apns\",\"Handle\":\"\(tokenA.uppercased())\",\"Tags\":[\"sports\"]}")
            #expect(put.status == .ok)
            let registration = try #require(body as? [String: Any])
            #expect(registration["tags"] as? [String] == ["username:alice", "sports"])
            #expect(registration["handle"] as? String == tokenA)
            let stored = try await RegistrationStore(database: s.database).list(for: "alice")
            #expect(stored.map(\.handle) == [tokenA])
            let (lower, _) = try await s.json(.put, "/api/register/\(id)", body: "{\"platform\":\"apns\",\"handle\":\"\(tokenB)\",\"tags\":[]}")
            #expect(lower.status == .ok)
            #expect(try await s.request(.delete, "/api/register/\(id)").status == .ok)
            #expect(try await s.request(.delete, "/api/register/\(id)").status == .notFound)
            #expect(try await RegistrationStore(database: s.database).list(for: "alice").isEmpty)
        }
    }

    @Test("refusals: another user's tag 403, bad handle 400, other platform 422, unknown id 410, someone else's id 410", arguments: StoreEngine.all)
    func refusals(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let (_, object) = try await s.json(.post, "/api/register")
            let id = try #require((object as? [String: Any])?["registrationId"] as? String)
            let cases: [(String, String, HTTPResponse.Status)] = [
                (id, "{\"platform\":\"apns\",\"handle\":\"\(tokenA)\",\"tags\":[\"username:bob\"]}", .forbidden),
                (id, "{\"platform\":\"apns\",\"handle\":\"not-hex\",\"tags\":[]}", .badRequest),
                (id, "{\"platform\":\"apns\",\"handle\":\"abc\",\"tags\":[]}", .badRequest),
                (id, "{\"platform\":\"gcm\",\"handle\":\"\(tokenA)\",\"tags\":[]}", .unprocessableContent),
                (id, "{\"platform\":\"apns\",\"tags\":[]}", .badRequest),
                (id, "[1,2]", .badRequest),
                (id, "{\"platform\":\"apns\",\"handle\":\"\(tokenA)\",\"tags\":[\"bad tag!\"]}", .badRequest),
                ("nope", "{\"platform\":\"apns\",\"handle\":\"\(tokenA)\",\"tags\":[]}", .gone),
            ]
            for (target, body, status) in cases {
                let (response, _) = try await s.json(.put, "/api/register/\(target)", body: body)
                #expect(response.status == status, "\(body)")
                #expect(!response.detail.isEmpty)
            }
            let (other, _) = try await s.json(.put, "/api/register/\(id)", as: "bob", body: "{\"platform\":\"apns\",\"handle\":\"\(tokenA)\",\"tags\":[]}")
            #expect(other.status == .gone)
            #expect(try await s.request(.delete, "/api/register/\(id)", as: "bob").status == .notFound)
            #expect(try await s.request(.post, "/api/register", as: nil).status == .unauthorized)
        }
    }

    @Test("a user has at most 100 registrations: the 101st is 409 and says what to do; a deleted one makes room", arguments: StoreEngine.all)
    func cap(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            var last = ""
            for _ in 0..<RegistrationStore.maxPerUser {
                let (response, object) = try await s.json(.post, "/api/register", as: "bob")
                #expect(response.status == .ok)
                last = (object as? [String: Any])?["registrationId"] as? String ?? ""
            }
            let (refused, _) = try await s.json(.post, "/api/register", as: "bob")
            #expect(refused.status == .conflict)
            #expect(refused.detail.contains("DELETE /api/register"))
            #expect(try await s.json(.post, "/api/register", as: "alice").0.status == .ok) // per user, not global
            #expect(try await s.request(.delete, "/api/register/\(last)", as: "bob").status == .ok)
            #expect(try await s.json(.post, "/api/register", as: "bob").0.status == .ok)
        }
    }

    @Test("a device token moves to another account only with the registration id the device held; within an account it moves freely", arguments: StoreEngine.all)
    func tokenMoves(engine: StoreEngine) async throws {
        try await TestServer.run(engine: engine) { s in
            let bobs = try await s.registerDevice(tokenA, as: "bob")
            // alice names bob's token: refused, bob keeps it.
            let (_, created) = try await s.json(.post, "/api/register?handle=\(tokenA)", as: "alice")
            let alices = try #require((created as? [String: Any])?["registrationId"] as? String)
            let (taken, _) = try await s.json(.put, "/api/register/\(alices)", as: "alice", body: #"{"platform":"apns","handle":"\#(tokenA)","tags":[]}"#)
            #expect(taken.status == .conflict)
            #expect(taken.detail.contains("replaces"))
            #expect(try await RegistrationStore(database: s.database).list(for: "bob").compactMap(\.handle) == [tokenA])
            // The device itself, which knows the registration it held, moves it.
            let (moved, _) = try await s.json(.put, "/api/register/\(alices)", as: "alice",
                                              body: #"{"platform":"apns","handle":"\#(tokenA)","tags":[],"replaces":"\#(bobs)"}"#)
            #expect(moved.status == .ok)
            #expect(try await RegistrationStore(database: s.database).list(for: "bob").isEmpty)
            // Within one account a new registration of the same device replaces the old one.
            _ = try await s.registerDevice(tokenA, as: "alice")
            #expect(try await RegistrationStore(database: s.database).list(for: "alice").compactMap(\.handle) == [tokenA])
        }
    }
}
