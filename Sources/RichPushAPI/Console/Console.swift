import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Mustache
import RichPushCore

/// `/console` (docs/api.md#console): a page for admins, server-rendered with a little script, no build
/// step and nothing fetched from elsewhere. The pages are files (`ConsolePages`); this type
/// serves them and guards the session.
///
/// Signing in makes a session (§9) whose token lives only in an `HttpOnly`, `SameSite=Strict`
/// cookie scoped to `/console`; no password is kept. Every state-changing request must carry the
/// session's CSRF token (an HMAC of the session token the page is given, sent back in
/// `X-CSRF-Token` or a form field) and, when the browser names one, an `Origin` of this server.
enum Console {
    static let cookieName = "richpush_console"

    /// The session token in the request's cookie.
    static func sessionToken(_ request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0] == cookieName, !parts[1].isEmpty { return String(parts[1]) }
            }
        }
        return nil
    }

    /// The CSRF token of a session: only a page this server rendered for the session has it.
    static func csrfToken(for session: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data("richpush console csrf".utf8), using: SymmetricKey(data: Data(session.utf8)))
        return Base64URL.encode(Array(mac))
    }

    /// Refuses (403) a request another site made: an `Origin` (or, without one, a `Referer`)
    /// that is not this server's. With `required`, also one that names neither (the sign-in
    /// form: a browser always sends `Origin` with a form's POST).
    static func checkSameOrigin(_ request: Request, required: Bool = false) throws {
        let refused = Problem(.forbidden, "this request did not come from this server's console page; the console only takes its own")
        guard let claimed = request.headers[.origin] ?? request.headers[.referer] else {
            if required { throw refused }
            return
        }
        guard let url = URL(string: claimed), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { throw refused }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        // The Host this request was sent to, with the scheme's port when it names none.
        var authority = (request.head.authority ?? "").lowercased()
        let namesPort = authority.hasPrefix("[") ? authority.contains("]:") : authority.contains(":")
        if !namesPort { authority += ":\(scheme == "https" ? 443 : 80)" }
        let claimedHost = host.hasPrefix("[") || !host.contains(":") ? host : "[\(host)]" // IPv6 as Host writes it
        guard authority == "\(claimedHost):\(port)" else { throw refused }
    }

    /// Compares two tokens in time that does not depend on where they differ.
    static func sameToken(_ a: String?, _ b: String) -> Bool {
        guard let a else { return false }
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<x.count { difference |= x[i] ^ y[i] }
        return difference == 0
    }

    /// Fields of an `application/x-www-form-urlencoded` body.
    static func form(_ body: ByteBuffer) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(buffer: body).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                .map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }

    static func html(_ body: String, status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) -> Response {
        var headers: HTTPFields = [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"]
        headers[HTTPField.Name("Content-Security-Policy")!] = "default-src 'self'; img-src 'self' blob:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers.append(contentsOf: extra)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    /// The sign-in form, with why the last try was refused when it was.
    static func signInPage(error: String?) -> String {
        var values: [String: String] = ["css": ConsolePages.css]
        values["error"] = error // absent, not empty, when there is none: the template leaves its line blank
        return ConsolePages.signIn.render(values)
    }

    /// The page for a signed-in user who is not an admin.
    static func forbiddenPage(user: String) -> String {
        let values: [String: String] = ["css": ConsolePages.css, "user": user]
        return ConsolePages.forbidden.render(values)
    }

    /// The console itself, for an admin's session: the CSRF token goes in the page's
    /// `csrf-token` meta tag (the script sends it as `X-CSRF-Token`) and in the sign-out form.
    /// The server's default image (`--default-image`, by name) goes in `default-image`: the
    /// image picker starts on it.
    /// A trace viewer's URL (`--trace-url`) goes in `trace-url`, empty without one.
    static func appPage(user: String, csrf: String, defaultImage: String, traceURL: String? = nil) -> String {
        let values: [String: String] = ["css": ConsolePages.css, "script": ConsolePages.script, "user": user, "csrf": csrf, "defaultImage": defaultImage,
                                        "traceURL": traceURL ?? ""]
        return ConsolePages.app.render(values)
    }
}
