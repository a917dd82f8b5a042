import Foundation

/// JSON Web Tokens in compact form (RFC 7519), as the push services use them: a JSON header and
/// claims, each base64url, and a signature over `header.claims`. The algorithm is the caller's:
/// ES256 for APNs and VAPID, RS256 for Google's JWT-bearer grant.
public enum CompactJWT {
    /// `header.claims.signature`, `sign` making the signature over the first two parts. Keys are
    /// sorted, so the same claims give the same token.
    public static func make(header: [String: Any], claims: [String: Any], sign: (Data) throws -> Data) throws -> String {
        func part(_ object: [String: Any]) throws -> String {
            Base64URL.encode(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
        }
        let input = try part(header) + "." + part(claims)
        return input + "." + Base64URL.encode(try sign(Data(input.utf8)))
    }

    /// A token taken apart, not yet verified.
    public struct Parts {
        public var header: [String: Any]
        public var claims: [String: Any]
        /// What the signature covers: `header.claims` as sent.
        public var signingInput: Data
        public var signature: Data
        /// `header.alg`.
        public var algorithm: String? { header["alg"] as? String }
    }

    /// The parts of `token`; nil unless it is three base64url parts, the first two JSON objects.
    public static func parse(_ token: some StringProtocol) -> Parts? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]), let claimsData = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
              let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any] else { return nil }
        return Parts(header: header, claims: claims, signingInput: Data("\(parts[0]).\(parts[1])".utf8), signature: Data(signature))
    }
}
