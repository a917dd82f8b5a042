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

/// A credential's cache key: a SHA-256, as four words (hashed without an allocation).
struct CredentialKey: Hashable, Sendable {
    private let a: UInt64, b: UInt64, c: UInt64, d: UInt64

    init(bytes: some Sequence<UInt8>) {
        var (a, b, c, d) = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        for (i, byte) in bytes.enumerated() {
            switch i {
            case 0..<8: a = a << 8 | UInt64(byte)
            case 8..<16: b = b << 8 | UInt64(byte)
            case 16..<24: c = c << 8 | UInt64(byte)
            case 24..<32: d = d << 8 | UInt64(byte)
            default: break
            }
        }
        (self.a, self.b, self.c, self.d) = (a, b, c, d)
    }

    init(_ digest: SHA256.Digest) {
        self = digest.withUnsafeBytes { CredentialKey(bytes: $0) }
    }
}
