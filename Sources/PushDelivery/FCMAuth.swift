import AsyncHTTPClient
import CryptoExtras
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import RichPushCore

/// A Google service account, as the JSON key file Firebase hands out (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push): what FCM HTTP v1
/// needs to get an OAuth 2 access token by a JWT-bearer grant (RFC 7523).
public struct FCMServiceAccount: Sendable {
    /// The Firebase project the messages are sent for.
    public let projectID: String
    /// The account's e-mail: the assertion's issuer.
    public let clientEmail: String
    /// Where assertions are exchanged for access tokens (the assertion's audience).
    public let tokenURI: String
    /// The key's id, sent as the assertion's `kid`.
    public let keyID: String?
    let key: _RSA.Signing.PrivateKey
    /// The public half, which Google (or a stand-in) checks assertions with.
    public var publicKey: _RSA.Signing.PublicKey { key.publicKey }

    /// The scope of FCM's send API.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    /// Reads the key file's JSON; every field it needs is checked and named when missing.
    public init(json data: Data) throws {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw PushError.configuration("the FCM service account is not a JSON object (Firebase console → Project settings → Service accounts → Generate new private key)")
        }
        func field(_ name: String) throws -> String {
            guard let value = object[name] as? String, !value.isEmpty else {
                throw PushError.configuration("the FCM service account has no \"\(name)\"")
            }
            return value
        }
        if let type = object["type"] as? String, type != "service_account" {
            throw PushError.configuration("the FCM credentials are of type \"\(type)\", not a service_account key")
        }
        projectID = try field("project_id")
        clientEmail = try field("client_email")
        tokenURI = (object["token_uri"] as? String) ?? "https://oauth2.googleapis.com/token"
        guard Loopback.isSecureOrLoopback(tokenURI) else {
            throw PushError.configuration("the FCM service account's token_uri must be https, got '\(tokenURI.prefix(80))'")
        }
        keyID = object["private_key_id"] as? String
        do {
            key = try _RSA.Signing.PrivateKey(pemRepresentation: try field("private_key"))
        } catch let error as PushError {
            throw error
        } catch {
            throw PushError.configuration("the FCM service account's private_key is not an RSA key in PEM: \(error)")
        }
        guard key.keySizeInBits >= 2048 else {
            throw PushError.configuration("the FCM service account's key has \(key.keySizeInBits) bits; Google issues 2048")
        }
    }

    /// Reads the key file.
    public init(file path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw PushError.configuration("cannot read the FCM service account file \(path)")
        }
        try self.init(json: data)
    }

    /// The RS256 assertion of the JWT-bearer grant, valid for an hour from `now`.
    public func assertion(now: Date) throws -> String {
        let issued = Int(now.timeIntervalSince1970)
        var header: [String: Any] = ["alg": "RS256", "typ": "JWT"]
        if let keyID { header["kid"] = keyID }
        let claims: [String: Any] = ["iss": clientEmail, "scope": Self.scope, "aud": tokenURI, "iat": issued, "exp": issued + 3600]
        return try CompactJWT.make(header: header, claims: claims) { try key.signature(for: $0, padding: .insecurePKCS1v1_5).rawRepresentation }
    }
}

/// Gets FCM access tokens and reuses each until 5 minutes before it expires; concurrent callers
/// wait for one exchange instead of each making their own.
public actor FCMTokenManager {
    private let account: FCMServiceAccount
    private let http: HTTPClient
    private var current: (token: String, expires: Date)?
    private var exchanging: Task<(token: String, expires: Date), any Error>?

    /// `http` is the client the pushes use (its TLS trusts `--push-ca`).
    public init(account: FCMServiceAccount, http: HTTPClient) {
        self.account = account
        self.http = http
    }

    /// A valid access token.
    public func token(now: Date = Date()) async throws -> String {
        if let current, current.expires.timeIntervalSince(now) > 300 { return current.token }
        if let exchanging { return try await exchanging.value.token }
        let task = Task { try await exchange(now: now) }
        exchanging = task
        defer { exchanging = nil }
        let fresh = try await task.value
        current = fresh
        return fresh.token
    }

    /// Forgets `token` (FCM answered 401 with it) unless it was already replaced: of many pushes
    /// refused with the same token, only the first makes a new one.
    public func invalidate(_ token: String) {
        if current?.token == token { current = nil }
    }

    private func exchange(now: Date) async throws -> (token: String, expires: Date) {
        var request = HTTPClientRequest(url: account.tokenURI)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(try account.assertion(now: now))"
        request.body = .bytes(ByteBuffer(string: form))
        let response = try await http.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 64 * 1024)
        guard response.status == .ok else {
            // OAuth's error body, {"error":"invalid_grant","error_description":"…"}, said as `400 invalid_grant (…)`.
            let answer = (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any]
            let detail: String
            if let code = answer?["error"] as? String {
                detail = code + ((answer?["error_description"] as? String).map { " (\($0.prefix(200)))" } ?? "")
            } else {
                detail = String(String(buffer: body).prefix(300))
            }
            throw PushError.configuration("\(account.tokenURI) refused the service account's assertion: \(response.status.code) \(detail)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
              let token = object["access_token"] as? String, !token.isEmpty else {
            throw PushError.configuration("\(account.tokenURI) answered without an access_token")
        }
        let lifetime = (object["expires_in"] as? Double) ?? (object["expires_in"] as? Int).map(Double.init) ?? 3600
        return (token, now.addingTimeInterval(lifetime))
    }
}
