import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension RichPushClient {
    /// Registers the device's push-to-start token for the ActivityKit attributes type `type` (SPEC §25):
    /// `PUT /api/register/{registration}/live-activities/{type}` `{"pushToStartToken":"<hex>"}` with the
    /// client's credentials, which must be the registration owner's.
    ///
    /// Pass each token `Activity<Attributes>.pushToStartTokenUpdates` yields, as it comes: it is sent
    /// as lowercase hex, and replaces the one registered before for that type. `type` is the name the
    /// server's senders use for the attributes type (`"start"` pushes carry it as `attributes-type`,
    /// so it is the Swift type's name, e.g. `"DeliveryAttributes"`). `registration` is the id
    /// `POST /api/register` gave the app; nil is the client's own (`registration`).
    /// - Throws: `RichPushClientError` (`.http(status:)` with the server's detail when it refuses: a
    ///   malformed token or type, a registration that is not this user's or is gone; `.noRegistration`
    ///   when there is no registration id), or `CancellationError`.
    public func registerPushToStartToken(type: String, token: Data, registration: String? = nil, timeout: TimeInterval = 25) async throws {
        try await registerPushToStartToken(type: type, token: Self.hex(token), registration: registration, timeout: timeout)
    }

    /// Registers a push-to-start token given as hex text, as `registerPushToStartToken(type:token:registration:timeout:)`
    /// with `Data` does; the text is sent lowercased, without surrounding white space.
    ///
    /// Anything else that is not hex is the server's to refuse (`.http(status: 400)`).
    public func registerPushToStartToken(type: String, token: String, registration: String? = nil, timeout: TimeInterval = 25) async throws {
        let url = endpoint(segments: ["api", "register", try device(registration), "live-activities", type])
        try await sendJSON("PUT", url, ["pushToStartToken": Self.normalizedHex(token)], timeout: timeout)
    }

    /// Removes the device's push-to-start token for `type`: `DELETE /api/register/{registration}/live-activities/{type}`.
    ///
    /// Call it when the app no longer wants activities of that type started from the server.
    /// - Throws: `RichPushClientError` (`.http(status:)` with the server's detail when it refuses: a
    ///   registration that is not this user's or is gone; `.noRegistration`), or `CancellationError`.
    public func removePushToStartToken(type: String, registration: String? = nil, timeout: TimeInterval = 25) async throws {
        let url = endpoint(segments: ["api", "register", try device(registration), "live-activities", type])
        let request = Self.request("DELETE", url, credentials: credentials, accept: "application/json", timeout: timeout)
        _ = try await exchange(request, .json(accepting: 200...299), timeout: timeout)
    }

    /// Reports the update token of a running Live Activity (SPEC §25): `PUT /api/live-activities/{activity}/tokens`
    /// `{"registration","token"}` with the client's credentials, which must be the registration owner's.
    ///
    /// `activity` is the server's id of the activity (`la_…`), `token` each value the activity's
    /// `pushTokenUpdates` yields: a rotated token replaces the one reported before, so report every
    /// one. Updates and the end reach this device through the token reported last. `registration`:
    /// nil is the client's own.
    /// - Throws: `RichPushClientError` (`.http(status:)` with the server's detail when it refuses: an
    ///   unknown activity, a registration that is not this user's, a malformed token; `.noRegistration`),
    ///   or `CancellationError`.
    public func reportActivityToken(activity: String, token: Data, registration: String? = nil, timeout: TimeInterval = 25) async throws {
        try await reportActivityToken(activity: activity, token: Self.hex(token), registration: registration, timeout: timeout)
    }

    /// Reports an activity's update token given as hex text, as `reportActivityToken(activity:token:registration:timeout:)`
    /// with `Data` does; the text is sent lowercased, without surrounding white space.
    public func reportActivityToken(activity: String, token: String, registration: String? = nil, timeout: TimeInterval = 25) async throws {
        let url = endpoint(segments: ["api", "live-activities", activity, "tokens"])
        try await sendJSON("PUT", url, ["registration": try device(registration), "token": Self.normalizedHex(token)], timeout: timeout)
    }

    /// `registration`, or the client's own; `.noRegistration` without either.
    private func device(_ registration: String?) throws -> String {
        guard let id = registration ?? self.registration else { throw RichPushClientError.noRegistration }
        return id
    }

    /// Sends `fields` as a JSON object with the client's credentials; any 2xx is success.
    private func sendJSON(_ method: String, _ url: URL, _ fields: [String: String], timeout: TimeInterval) async throws {
        var request = Self.request(method, url, credentials: credentials, accept: "application/json", timeout: timeout)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONEncoder().encode(fields)
        _ = try await exchange(request, .json(accepting: 200...299), timeout: timeout)
    }

    /// The API URL made of `segments`, each percent-encoded as one path segment: a registration id,
    /// a type or an activity id the caller passes cannot add a segment or a query of its own.
    func endpoint(segments: [String]) -> URL {
        let path = segments.map(Self.pathSegment).joined(separator: "/")
        guard var parts = URLComponents(url: baseURL, resolvingAgainstBaseURL: true) else { return endpoint(path) }
        var base = parts.percentEncodedPath
        if !base.hasSuffix("/") { base += "/" }
        parts.percentEncodedPath = base + path
        return parts.url ?? endpoint(path)
    }

    /// `value` with every byte but RFC 3986's unreserved characters percent-encoded.
    static func pathSegment(_ value: String) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var encoded: [UInt8] = []
        encoded.reserveCapacity(value.utf8.count)
        for byte in value.utf8 {
            if Wire.isUnreserved(byte) {
                encoded.append(byte)
            } else {
                encoded.append(contentsOf: [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// `bytes` as lowercase hex, two digits a byte: how the API takes device and activity tokens.
    static func hex(_ bytes: Data) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Hex text as the API takes it: lowercase, without the white space around it.
    static func normalizedHex(_ text: String) -> String {
        text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    }
}
