import Glibc

/// A resolved server address.
struct SocketAddress: Sendable {
    let family: Int32
    private let storage: sockaddr_storage
    private let length: socklen_t

    private init(_ info: addrinfo) {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(start: info.ai_addr, count: Int(info.ai_addrlen)))
        }
        self.storage = storage
        self.length = info.ai_addrlen
        self.family = info.ai_family
    }

    /// Resolves `host` and `port` to the first of its addresses that accepts a connection within
    /// a second (`localhost` may name `::1` and `127.0.0.1`, and a server may listen on one), or
    /// to the first address when none does (the run then counts connect errors).
    static func resolve(host: String, port: Int) throws(LoadError) -> SocketAddress {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw LoadError("cannot resolve '\(host)': \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var next: UnsafeMutablePointer<addrinfo>? = list
        while let info = next {
            addresses.append(SocketAddress(info.pointee))
            next = info.pointee.ai_next
        }
        return addresses.first { $0.accepts() } ?? addresses[0]
    }

    /// Whether a connection to this address succeeds within a second.
    private func accepts() -> Bool {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if withSockaddr({ Glibc.connect(fd, $0, $1) }) == 0 { return true }
        guard errno == EINPROGRESS else { return false }
        var poll = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard Glibc.poll(&poll, 1, 1000) == 1 else { return false }
        var error: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0
    }

    func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        withUnsafeBytes(of: storage) { body($0.baseAddress!.assumingMemoryBound(to: sockaddr.self), length) }
    }
}
