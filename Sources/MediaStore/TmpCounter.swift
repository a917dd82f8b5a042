import Crypto
import Foundation
import Resilience
import SQLEngine
import NIOCore
import NIOPosix
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A process-wide counter for unique temp-file names.
final class TmpCounter: Sendable {
    private let value = NIOLockedValueBox(0)
    func next() -> Int { value.withLockedValue { $0 += 1; return $0 } }
}
