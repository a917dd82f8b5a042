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

extension MediaStore {
    // MARK: Variants

    /// Variants of different sources made (or waiting to be made) at once; past it `variant`
    /// throws `busy` (503 with `Retry-After`), so that waiting makers hold a bounded memory.
    public static let maxVariantsInFlight = 8

    /// Variants being made (or waiting to be) now.
    var variantsBeingMade: Int { variantsInFlight.withLockedValue { $0.count } }

    /// The `kind` variant of image `id` (docs/configuration.md#the-media-store): made on its first request, stored
    /// content-addressed and recorded against its source; the source itself when it already is
    /// that variant. Concurrent first requests in this process make it once; two processes may
    /// both make it, and, the bytes being the same, store one blob.
    public func variant(_ kind: MediaVariant, of id: MediaID) async throws -> MediaItem {
        if let known = try await recordedVariant(kind, of: id) { return known }
        let key = "\(id.hex):\(kind.rawValue)"
        let task = variantsInFlight.withLockedValue { flights -> Task<MediaItem, any Error>? in
            if let running = flights[key] { return running }
            // Each maker holds its source (up to the upload limit) while it waits for the one
            // variant thread: past a few, refuse instead of queueing without bound.
            guard flights.count < Self.maxVariantsInFlight else { return nil }
            let task = Task { try await self.makeVariant(kind, of: id) }
            flights[key] = task
            return task
        }
        guard let task else {
            throw MediaStoreError.busy("\(Self.maxVariantsInFlight) variants are being made; try again in a second")
        }
        defer {
            variantsInFlight.withLockedValue { flights in
                if flights[key] == task { flights[key] = nil } // not a newer maker's
            }
        }
        return try await task.value
    }

    private func recordedVariant(_ kind: MediaVariant, of id: MediaID) async throws -> MediaItem? {
        try await database.read { db in
            guard let hex = try String.fetchOne(db, sql: "SELECT variant FROM media_variants WHERE source = ? AND kind = ?",
                                                arguments: [id.hex, kind.rawValue]),
                  let variant = MediaID(hex) else { return nil }
            return try MediaIndex.item(db, id: variant)
        }
    }

    private func makeVariant(_ kind: MediaVariant, of id: MediaID) async throws -> MediaItem {
        if let known = try await recordedVariant(kind, of: id) { return known }
        guard let source = try await item(id) else { throw MediaStoreError.notFound(id.hex) }
        guard let buffer = try await read(id, length: source.size) else { throw MediaStoreError.notFound(id.hex) }
        let bytes = Array(buffer.readableBytesView)
        let limits = self.limits
        let made = try await DecodePool.variants.runIfActive { () throws -> ([UInt8], MediaID, ImageInfo)? in
            guard let variant = try VariantMaker.make(kind, of: bytes, info: source.info) else { return nil }
            return (variant, MediaID(hashing: variant), try ImageInspector.inspect(variant, limits: limits))
        }
        let record = { @Sendable (db: SQLConnection, variant: MediaID) throws in
            guard try MediaIndex.item(db, id: id) != nil else { throw MediaStoreError.notFound(id.hex) } // removed meanwhile
            if variant != id { try MediaIndex.addReference(db, id: variant, owner: "variant:\(id.hex)") }
            try db.execute(sql: """
                INSERT INTO media_variants (source, kind, variant, createdAt) VALUES (?, ?, ?, ?)
                ON CONFLICT (source, kind) DO UPDATE SET variant = excluded.variant
                """, arguments: [id.hex, kind.rawValue, variant.hex, db.now])
        }
        guard let (variant, variantID, info) = made else {
            // The source is its own variant: recorded too, so it is not read again to find out.
            try await database.write { db in try record(db, id) }
            return source
        }
        // The variant's row, its reference and the record in one transaction: gc never sees it unreferenced.
        return try await store(variant, id: variantID, info: info, name: nil) { db in try record(db, variantID) }.item
    }
}
