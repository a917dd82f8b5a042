import Crypto

/// HMAC-SHA-256 (RFC 2104) keyed once and fed a fixed prefix once, then copied for each
/// message: the same codes as swift-crypto's `HMAC<SHA256>` over the prefix and the message.
///
/// It is built on `SHA256.update(bufferPointer:)`, which is concrete. swift-crypto's
/// `HMAC.update(data:)` is generic over `DataProtocol` and not inlinable, so every call from
/// here ran unspecialized (its regions, iterators and metadata look-ups), on the event loop,
/// once per payload URL a phone fetches.
struct PrefixedHMAC: Sendable {
    private var inner = SHA256()
    private var outer = SHA256()

    init(key: SymmetricKey, prefix: [UInt8]) {
        let blockSize = 64 // SHA-256's
        var block = [UInt8](repeating: 0, count: blockSize)
        key.withUnsafeBytes { bytes in
            if bytes.count > blockSize { // a long key is hashed first
                SHA256.hash(data: bytes).withUnsafeBytes { block.replaceSubrange(0..<$0.count, with: $0) }
            } else {
                block.replaceSubrange(0..<bytes.count, with: bytes)
            }
        }
        block.map { $0 ^ 0x36 }.withUnsafeBytes { inner.update(bufferPointer: $0) }
        prefix.withUnsafeBytes { inner.update(bufferPointer: $0) }
        block.map { $0 ^ 0x5C }.withUnsafeBytes { outer.update(bufferPointer: $0) }
    }

    /// The code of the prefix followed by `message`.
    func code(_ message: UnsafeRawBufferPointer) -> SHA256.Digest {
        var inner = inner
        inner.update(bufferPointer: message)
        var outer = outer
        inner.finalize().withUnsafeBytes { outer.update(bufferPointer: $0) }
        return outer.finalize()
    }
}
