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

/// An upload's temp file: written from the thread pool, removed on every path.
final class UploadFile: Sendable {
    let fd: Int32
    let path: String

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    func write(_ buffer: ByteBuffer) throws {
        try buffer.withUnsafeReadableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw MediaStoreError.io("cannot write", path: path, errno: errno)
                }
                offset += n
            }
        }
    }

    func sync() throws {
        if fsync(fd) != 0 { throw MediaStoreError.io("cannot fsync", path: path, errno: errno) }
    }

    /// Closes the file and removes it unless a commit already renamed it into place.
    func closeAndRemove() {
        close(fd)
        unlink(path)
    }
}
