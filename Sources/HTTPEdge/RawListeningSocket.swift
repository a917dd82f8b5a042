import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// The plain listener's socket, made here rather than by NIO so that `RawFront`'s threads can
/// accept from it: non-blocking, close-on-exec, `SO_REUSEADDR`, bound and listening.
struct RawListeningSocket {
    /// The socket.
    let descriptor: CInt
    let host: String
    let port: Int
    let backlog: Int

    /// A socket listening on `host:port` (the first address `host` resolves to, as NIO's
    /// `bind(host:port:)` takes) with a queue of `backlog`.
    init(host: String, port: Int, backlog: Int) throws {
        func failure(_ call: String) -> ListenError { .system(call, host: host, port: port) }
        let address: SocketAddress
        do {
            address = try SocketAddress.makeAddressResolvingHost(host, port: port)
        } catch {
            throw ListenError(host: host, port: port, reason: "\(error)")
        }
        let fd = socket(address.protocol.rawValue, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure("socket") }
        var one: CInt = 1
        guard setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<CInt>.size)) == 0 else {
            let error = failure("setsockopt")
            Glibc.close(fd)
            throw error
        }
        let bound = address.withSockAddr { bind(fd, $0, socklen_t($1)) }
        guard bound == 0 else {
            let error = failure("bind")
            Glibc.close(fd)
            throw error
        }
        descriptor = fd
        self.host = host
        self.port = port
        self.backlog = backlog
        do {
            try listen()
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// Listens (again) with the socket's backlog.
    func listen() throws {
        guard Glibc.listen(descriptor, CInt(clamping: backlog)) == 0 else { throw ListenError.system("listen", host: host, port: port) }
    }

    /// A second descriptor of the same socket (for NIO's server channel).
    func copy() throws -> CInt {
        let copy = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { throw ListenError.system("fcntl", host: host, port: port) }
        return copy
    }

    /// Closes this descriptor (a copy stays open until it is closed too).
    func close() {
        _ = Glibc.close(descriptor)
    }
}
