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

/// Temp files are named `<pid>.<instance>.<counter>…`: the random instance tag tells this
/// process's files from those of an earlier process that had the same pid (in a container,
/// `serve` is pid 1 on every start).
enum TmpName {
    /// This process's random tag.
    static let instance = String(format: "%08x", UInt32.random(in: .min ... .max))
    /// The start of every temp name this process makes.
    static let prefix = "\(getpid()).\(instance)."
}
