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

/// Decoding has threads of its own, one per core: a hostile image keeps at most those busy,
/// and password checks, blob reads and fsyncs on the shared pool go on meanwhile. Uploads
/// beyond its width wait their turn.
enum DecodePool {
    static let shared: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: max(1, System.coreCount))
        pool.start()
        return pool
    }()

    /// Variants are made one at a time: a 40-megapixel source takes some 300 MB while it is
    /// decoded and resampled, and hostile requests for many of them must not add that up.
    static let variants: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        return pool
    }()
}
