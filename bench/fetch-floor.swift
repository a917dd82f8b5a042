// The first-fetch floor (bench/fetch-cpu.sh, issue #51): the least a Swift process spends to
// answer an HTTP/1.1 GET over a new connection that closes. One thread and one epoll: accept,
// one read, the whole answer (head, `Connection: close`, body) in one sendfile(2) of a memory
// file made at start, close. It checks only that a whole head of a GET arrived in that read
// (anything else is closed unanswered); no routing, no metrics, no access log, a fixed Date.
// What `serve` spends a fetch beyond this is its own and NIO's work.
//
// Build: swiftc -O -import-objc-header bench/fetch-floor.h bench/fetch-floor.swift -o fetch-floor
// Run:   fetch-floor PORT FILE   (FILE served as image/png to every GET, on 127.0.0.1:PORT)
import Glibc

let arguments = CommandLine.arguments
guard arguments.count == 3, let port = UInt16(arguments[1]), let file = fopen(arguments[2], "rb") else {
    fputs("usage: fetch-floor PORT FILE\n", stderr)
    exit(2)
}
var body = [UInt8]()
var chunk = [UInt8](repeating: 0, count: 65_536)
while case let count = fread(&chunk, 1, chunk.count, file), count > 0 { body += chunk[0..<count] }
fclose(file)
let answer = Array("""
    HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: \(body.count)\r\nServer: fetch-floor\r\n\
    Connection: close\r\nDate: Sun, 29 Nov 2026 12:00:00 GMT\r\n\r\n
    """.utf8) + body
let memory = floor_memfd("fetch-floor")
guard memory >= 0, answer.withUnsafeBytes({ write(memory, $0.baseAddress, $0.count) }) == answer.count else {
    fputs("fetch-floor: no memory file\n", stderr)
    exit(1)
}

let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
var on: Int32 = 1
setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
var address = sockaddr_in()
address.sin_family = sa_family_t(AF_INET)
address.sin_port = port.bigEndian
address.sin_addr.s_addr = inet_addr("127.0.0.1")
let bound = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
}
guard bound == 0, listen(listener, 1024) == 0 else {
    fputs("fetch-floor: cannot listen on 127.0.0.1:\(port)\n", stderr)
    exit(1)
}
let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
_ = floor_epoll_add(epoll, listener, UInt32(EPOLLIN.rawValue))

var ready = [Int32](repeating: 0, count: 64)
var request = [UInt8](repeating: 0, count: 8_192)
let headEnd: [UInt8] = [13, 10, 13, 10]
while true {
    let count = floor_epoll_wait(epoll, &ready)
    for index in 0..<max(0, Int(count)) {
        let fd = ready[index]
        if fd == listener {
            while case let connection = floor_accept(listener), connection >= 0 {
                setsockopt(connection, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
                _ = floor_epoll_add(epoll, connection, UInt32(EPOLLIN.rawValue) | UInt32(EPOLLONESHOT.rawValue))
            }
            continue
        }
        let read = Glibc.read(fd, &request, request.count)
        if read >= 18, request[0] == UInt8(ascii: "G"), request[read - 4..<read].elementsEqual(headEnd) {
            var offset = 0
            _ = sendfile(fd, memory, &offset, answer.count)
        }
        close(fd)
    }
}
