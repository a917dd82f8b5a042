import Foundation
import HTTPTypes
@testable import RichPushCore
@testable import RichPushAPI
@testable import RichPushServer
import RichPushTestSupport
import Testing

/// Issue #49: the mistakes a new user makes in the first hour, each answered with its fix.
@Suite("The first hour: every mistake names its fix")
struct FirstHourTests {
    @Test("a misspelt field is named as itself, with the field it was meant to be; a misspelt option lists the options")
    func misspeltFields() async throws {
        try await TestServer.run { s in
            let (_, created) = try await s.json(.post, "/api/register")
            let id = try #require((created as? [String: Any])?["registrationId"] as? String)
            let typo = try await s.json(.put, "/api/register/\(id)", body: #"{"platfrom":"apns","handle":"\#(tokenA)"}"#).0
            #expect(typo.status == .badRequest)
            #expect(typo.detail.contains(#"unknown field "platfrom" (did you mean "platform"?)"#), "\(typo.detail)")
            let option = try await s.json(.post, "/api/notifications", body: #"{"mode":"alert","title":"Hi","options":{"sounds":"default"}}"#).0
            #expect(option.status == .badRequest)
            #expect(option.detail.contains(#"unknown field "options.sounds" (did you mean "options.sound"?)"#) && option.detail.contains("options takes")
                    && option.detail.contains("threadId"), "\(option.detail)")
        }
    }

    @Test("a key bound to an app this server does not have is refused at use, saying why, instead of reaching no device")
    func keyForUnknownApp() async throws {
        try await TestServer.run { s in
            let key = try await APIKeyStore(database: s.database).add(name: "shop-backend", scope: .send, app: "shop-ios")
            let sent = try await s.request(.post, "/api/notifications", as: nil,
                                           headers: [.authorization: "Bearer \(key)", .contentType: "application/json"],
                                           body: Array(#"{"to":"alice"}"#.utf8))
            #expect(sent.status == .forbidden)
            #expect(sent.detail.contains("bound to app shop-ios, which this server does not have"), "\(sent.detail)")
        }
    }

    @Test("GET / leads to the console")
    func rootRedirects() async throws {
        try await TestServer.run { s in
            let root = try await s.request(.get, "/", as: nil)
            #expect(root.status == .found && root.headers[.location] == "/console")
        }
    }
}
