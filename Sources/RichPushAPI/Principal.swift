import Crypto
import Foundation
import Hummingbird
import HummingbirdBcrypt
import Logging
import PushDelivery
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RichPushCore
import ServiceLifecycle

/// Who a request is from, once its credentials were verified.
public struct Principal: Sendable, Equatable {
    /// The user name.
    public var user: String
    /// Whether the account is an admin (docs/api.md#admins-imported-accounts-and-device-sessions).
    public var admin: Bool
    /// The bearer token the request carried, when it used a session rather than a password.
    public var sessionToken: String?
    /// The API key the request carried (docs/api.md#apps-and-api-keys); then `user` is `key:<name>`, which no account
    /// can be named, and `admin` says whether its scope is `admin`.
    public var apiKey: APIKey?

    /// Creates a principal.
    public init(user: String, admin: Bool, sessionToken: String? = nil, apiKey: APIKey? = nil) {
        self.user = user
        self.admin = admin
        self.sessionToken = sessionToken
        self.apiKey = apiKey
    }

    /// The principal of an API key.
    init(key: APIKey) {
        self.init(user: "key:\(key.name)", admin: key.scope == .admin, apiKey: key)
    }
}

extension Principal {
    /// Whether this principal passes the router's key check for a route needing `scope`
    /// (`Endpoint.keyScope`): an account always (its group decides), a key only with a scope
    /// that covers it. The hot routes ask the same question the router does.
    func keyAllows(_ scope: APIKeyScope?) -> Bool {
        guard let key = apiKey else { return true }
        guard let scope else { return false }
        return key.scope.covers(scope)
    }
}
