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

/// An `Authorization` header and its cache key (`Authenticator.key`), kept by a connection.
package struct CredentialMemo {
    var header: String
    var key: CredentialKey
}
