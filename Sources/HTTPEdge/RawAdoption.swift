import NIOCore

/// A connection the raw front gives to NIO: its descriptor, and either the bytes read from it
/// (for `FastPathFront`, as if NIO had read them) or the rest of an answer to write before
/// closing it.
struct RawAdoption: Sendable {
    let fd: CInt
    let read: ByteBuffer?
    let rest: ByteBuffer?
}
