import NIOCore

/// A connection the raw front gives to NIO: its descriptor, the bytes read from it (for
/// `FastPathFront`, as if NIO had read them), and the rest of an answer the socket took only in
/// part. With a rest, `thenServe` says whether the connection stays open after it (a keep-alive
/// answer: NIO serves what the client sends next) or closes (an answer that closes).
struct RawAdoption: Sendable {
    let fd: CInt
    let read: ByteBuffer?
    let rest: ByteBuffer?
    var thenServe = false
}
