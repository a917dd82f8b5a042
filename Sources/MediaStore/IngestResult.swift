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

/// Whether an ingest wrote a new blob or found the same bytes already stored.
public enum IngestStatus: String, Sendable, Codable {
    case stored
    case exists
}

/// The outcome of a successful ingest.
public struct IngestResult: Sendable {
    /// The stored item, with its names.
    public var item: MediaItem
    /// `stored` when this call wrote the blob, `exists` when it was already there.
    public var status: IngestStatus
    /// What was stripped from the upload before it was stored (docs/configuration.md#the-media-store), sorted.
    public var stripped: [StrippedMetadata] = []
}
