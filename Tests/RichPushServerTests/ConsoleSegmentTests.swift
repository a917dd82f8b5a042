import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RichPushTestSupport
import Testing

/// The console's segment and preview calls (issue #46), through the running server with a
/// console session: its cookie, and for writes the page's CSRF token.
@Suite("The console's segments, filters and per-user preview")
struct ConsoleSegmentTests {
    static let csrfHeader = HTTPField.Name("X-CSRF-Token")!

    /// A signed-in console: root's session cookie and the CSRF token its page carries.
    struct Session {
        let s: TestServer
        let cookie: String
        let csrf: String

        /// A console call; with `token`, the page's CSRF token goes with it.
        func call(_ method: HTTPRequest.Method, _ uri: String, body: String? = nil, token: Bool = true) async throws -> (TestResponse, [String: Any]?) {
            var headers: HTTPFields = [.cookie: cookie]
            if token { headers[ConsoleSegmentTests.csrfHeader] = csrf }
            if body != nil { headers[.contentType] = "application/json" }
            let response = try await s.client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
            let object = try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
            return (response, object)
        }
    }

    static func signIn(_ s: TestServer) async throws -> Session {
        let signedIn = try await s.client.execute(uri: "/console/session", method: .post,
                                                  headers: [.origin: "http://localhost", .contentType: "application/x-www-form-urlencoded"],
                                                  body: ByteBuffer(string: "name=root&password=rootpw"))
        #expect(signedIn.status == .seeOther)
        let setCookie = try #require(signedIn.headers[.setCookie])
        let cookie = String(try #require(setCookie.split(separator: ";").first))
        let page = try await s.get("/console", headers: [.cookie: cookie])
        #expect(page.status == .ok)
        let html = String(decoding: page.bytes, as: UTF8.self)
        let start = try #require(html.range(of: #"name="csrf-token" content=""#))
        let end = try #require(html[start.upperBound...].firstIndex(of: "\""))
        return Session(s: s, cookie: cookie, csrf: String(html[start.upperBound..<end]))
    }

    static func query(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
    }

    @Test("the audience check counts a saved segment and a filter; a bad filter is a 400 whose detail starts with its JSON path; an unknown segment is a 400")
    func audience() async throws {
        try await TestServer.run { s in
            _ = try await SegmentRouteTests.people(s) // alice: gold, 34, two devices; bob: free, 17, one device
            #expect(try await s.json(.put, "/api/admin/segments/gold", as: "root", body: #"{"filter":{"attribute":"plan","op":"eq","value":"gold"}}"#).0.status == .ok)
            let console = try await Self.signIn(s)

            let (segment, reach) = try await console.call(.get, "/console/api/audience?segment=gold", token: false)
            #expect(segment.status == .ok)
            #expect(reach?["users"] as? Int == 1 && reach?["devices"] as? Int == 2 && (reach?["unknown"] as? [String])?.isEmpty == true, "\(String(describing: reach))")

            let filter = #"{"attribute":"age","op":"gte","value":17}"#
            let (filtered, both) = try await console.call(.get, "/console/api/audience?filter=" + Self.query(filter), token: false)
            #expect(filtered.status == .ok)
            #expect(both?["users"] as? Int == 2 && both?["devices"] as? Int == 3, "\(String(describing: both))")
            let (adults, grown) = try await console.call(.get, "/console/api/audience?filter=" + Self.query(#"{"attribute":"age","op":"gte","value":18}"#), token: false)
            #expect(adults.status == .ok && grown?["users"] as? Int == 1 && grown?["devices"] as? Int == 2, "\(String(describing: grown))")

            let bad = #"{"all":[{"topic":"news"},{"attribute":"plan","op":"eqq","value":"gold"}]}"#
            let (refused, _) = try await console.call(.get, "/console/api/audience?filter=" + Self.query(bad), token: false)
            #expect(refused.status == .badRequest)
            #expect(refused.detail.hasPrefix("filter.all[1].op: "), "\(refused.detail)")
            let (notJSON, _) = try await console.call(.get, "/console/api/audience?filter=" + Self.query("{plan"), token: false)
            #expect(notJSON.status == .badRequest && notJSON.detail.hasPrefix("filter: "), "\(notJSON.detail)")
            let (unknown, _) = try await console.call(.get, "/console/api/audience?segment=nope", token: false)
            #expect(unknown.status == .badRequest && unknown.detail.contains("nope"), "\(unknown.detail)")

            // Without a session: 401, as the console's other calls.
            #expect(try await s.get("/console/api/audience?segment=gold", headers: [:]).status == .unauthorized)
        }
    }

    @Test("the console lists segments and saves one with the page's CSRF token (403 without, nothing saved)")
    func saveSegment() async throws {
        try await TestServer.run { s in
            _ = try await SegmentRouteTests.people(s)
            let console = try await Self.signIn(s)
            let (empty, none) = try await console.call(.get, "/console/api/segments", token: false)
            #expect(empty.status == .ok && (none?["segments"] as? [Any])?.isEmpty == true)

            let body = #"{"filter":{"attribute":"age","op":"lt","value":18}}"#
            let (forged, _) = try await console.call(.put, "/console/api/segments/minors", body: body, token: false)
            #expect(forged.status == .forbidden)
            #expect(try await s.request(.get, "/api/admin/segments/minors", as: "root").status == .notFound)

            let (saved, segment) = try await console.call(.put, "/console/api/segments/minors", body: body)
            #expect(saved.status == .ok && segment?["name"] as? String == "minors" && segment?["createdBy"] as? String == "root", "\(String(describing: segment))")
            let (list, listed) = try await console.call(.get, "/console/api/segments", token: false)
            #expect(list.status == .ok)
            #expect(((listed?["segments"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String } == ["minors"])
            let (_, reach) = try await console.call(.get, "/console/api/audience?segment=minors", token: false)
            #expect(reach?["users"] as? Int == 1 && reach?["devices"] as? Int == 1, "\(String(describing: reach))")

            // A bad filter is refused as the API refuses it, by its path.
            let (refused, _) = try await console.call(.put, "/console/api/segments/odd", body: #"{"filter":{"any":[{"platform":"ios"}]}}"#)
            #expect(refused.status == .badRequest && refused.detail.hasPrefix("filter.any[0].platform: "), "\(refused.detail)")
        }
    }

    @Test("the console previews a campaign's words for one user, their attributes filled in; 404 for no such user, 422 naming the field for a template that does not parse, 403 without the CSRF token")
    func preview() async throws {
        try await TestServer.run { s in
            _ = try await SegmentRouteTests.people(s)
            let console = try await Self.signIn(s)
            let body = #"{"user":"alice","title":"Hi {{user.name}}","message":"Your plan: {{attributes.plan}}{{#attributes.vip}} (vip){{/attributes.vip}}","options":{"subtitle":"<{{attributes.plan}}>"}}"#
            let (shown, words) = try await console.call(.post, "/console/api/preview", body: body)
            #expect(shown.status == .ok)
            // No HTML escaping, as a campaign renders it; a missing value renders empty.
            #expect(words?["title"] as? String == "Hi alice" && words?["message"] as? String == "Your plan: gold" && words?["subtitle"] as? String == "<gold>",
                    "\(String(describing: words))")
            let (bob, hers) = try await console.call(.post, "/console/api/preview", body: body.replacingOccurrences(of: #""user":"alice""#, with: #""user":"bob""#))
            #expect(bob.status == .ok && hers?["message"] as? String == "Your plan: free")

            let (nobody, _) = try await console.call(.post, "/console/api/preview", body: #"{"user":"nobody","message":"Hi {{user.name}}"}"#)
            #expect(nobody.status == .notFound)
            let (broken, _) = try await console.call(.post, "/console/api/preview", body: #"{"user":"alice","title":"{{#first}}x","message":"ok"}"#)
            #expect(broken.status == .unprocessableContent)
            #expect(broken.detail.hasPrefix("title: the template does not parse at line 1, column "), "\(broken.detail)")
            // 4,000 nested sections overflowed the parser's stack and killed the server: refused before it parses.
            let nested = String(repeating: "{{#a}}", count: 600) + "x" + String(repeating: "{{/a}}", count: 600)
            let (deep, _) = try await console.call(.post, "/console/api/preview", body: #"{"user":"alice","message":"\#(nested)"}"#)
            #expect(deep.status == .unprocessableContent && deep.detail.contains("600 section marks"), "\(deep.detail)")
            #expect(try await s.request(.get, "/health").status == .ok)
            let (forged, _) = try await console.call(.post, "/console/api/preview", body: body, token: false)
            #expect(forged.status == .forbidden)
        }
    }
}
