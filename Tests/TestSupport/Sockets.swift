import Foundation

#if canImport(Glibc)
import Glibc
#endif

// Blocking loopback socket helpers for tests that must speak raw HTTP/1.1 (lying headers,
// pipelining, a request cut in half). Call them off the cooperative pool.

/// A free TCP port on loopback (bound and released).
public func freePort() -> Int {
    let (fd, port) = boundLoopbackSocket()
    close(fd)
    return port
}

/// A TCP socket bound to loopback `port` (0: a free one), listening when `listening`, and that
/// port; the caller closes it (a listening one holds the port as another process would).
public func boundLoopbackSocket(listening: Bool = false, port: Int = 0) -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    if listening { _ = listen(fd, 8) }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A connected loopback socket; `receiveBuffer` sets `SO_RCVBUF` before connecting (a small one
/// makes a slow reader: the server's writes back up into its own buffers).
public func connectTo(port: Int, timeout: Int = 10, receiveBuffer: Int32? = nil) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var result: Int32
    repeat {
        result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    } while result != 0 && errno == EINTR
    // The error connect gave, not always "refused": a test that fails here says why.
    if result != 0 { let code = errno; close(fd); throw POSIXError(POSIXErrorCode(rawValue: code) ?? .ECONNREFUSED) }
    var tv = timeval(tv_sec: timeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    return fd
}

/// Whether process `pid` itself holds a socket listening on loopback TCP `port` (Linux's
/// `/proc`): a port that answers may belong to another test's process that took it first.
public func listens(pid: Int32, port: Int) -> Bool {
    let hex = String(format: ":%04X", port)
    var inodes = Set<String>()
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = (try? String(contentsOfFile: table, encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            // sl, local address, remote address, state (0A is LISTEN), …, inode is the tenth.
            if fields.count > 9, fields[1].hasSuffix(hex), fields[3] == "0A" { inodes.insert(String(fields[9])) }
        }
    }
    guard !inodes.isEmpty, let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return false }
    return fds.contains { fd in
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
              target.hasPrefix("socket:[") else { return false }
        return inodes.contains(String(target.dropFirst(8).dropLast()))
    }
}

public func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { return }
        offset += n
    }
}

/// One request on a keep-alive connection; reads exactly one response (Content-Length framed).
public func exchange(_ fd: Int32, _ request: String) -> (head: String, body: [UInt8]) {
    sendAll(fd, Array(request.utf8))
    var received = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        if let end = received.firstRange(of: Array("\r\n\r\n".utf8)) {
            let head = String(decoding: received[..<end.lowerBound], as: UTF8.self)
            let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            if received.count >= end.upperBound + length { return (head, Array(received[end.upperBound..<end.upperBound + length])) }
        }
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { return (String(decoding: received, as: UTF8.self), []) }
        received += buffer[0..<n]
    }
}

/// Everything until the peer closes or the receive timeout passes.
public func receiveAll(_ fd: Int32) -> String {
    String(decoding: receiveAllBytes(fd), as: UTF8.self)
}

/// Everything until the peer closes or the receive timeout passes, as bytes.
public func receiveAllBytes(_ fd: Int32) -> [UInt8] {
    var received = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        received += buffer[0..<n]
    }
    return received
}

/// Splits a stream of Content-Length framed HTTP/1.1 responses; a cut-off last response is dropped.
public func splitResponses(_ stream: [UInt8]) -> [(head: String, body: [UInt8])] {
    var responses: [(head: String, body: [UInt8])] = []
    var rest = stream[...]
    while let end = rest.firstRange(of: Array("\r\n\r\n".utf8)) {
        let head = String(decoding: rest[..<end.lowerBound], as: UTF8.self)
        let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        guard rest.distance(from: end.upperBound, to: rest.endIndex) >= length else { break }
        let bodyEnd = rest.index(end.upperBound, offsetBy: length)
        responses.append((head, Array(rest[end.upperBound..<bodyEnd])))
        rest = rest[bodyEnd...]
    }
    return responses
}


/// Runs blocking work (a child process, a blocking socket, a burst of image encoding) on a thread
/// of its own. Swift Testing runs tests on the cooperative pool, which has one thread per core
/// (two here): blocking it stalls every other test's servers and timeouts.
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// Starts something once per test process, on a thread of its own (it waits on processes, which
/// must not hold up the test pool); every caller gets the same result.
public actor StartedOnce<Value: Sendable> {
    private var started: Task<Value, any Error>?
    private let start: @Sendable () throws -> Value

    public init(_ start: @escaping @Sendable () throws -> Value) {
        self.start = start
    }

    public func value() async throws -> Value {
        if let started { return try await started.value }
        let start = self.start
        let task = Task { try await onOwnThread(start) }
        started = task
        return try await task.value
    }
}

/// The path of `name` on `PATH`, as the shell would find it; nil when it is not installed.
public func which(_ name: String) -> String? {
    (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":")
        .map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// Runs a Python script (the peers nobody here wrote: boto3, http_ece, py_vapid, cryptography)
/// on a thread of its own; its status, stdout and stderr.
public func python(_ script: String) async throws -> (status: Int32, output: String) {
    try await onOwnThread { try runCapturing("/usr/bin/env", ["python3", "-c", script]) }
}

/// Runs `executable arguments…` to completion on the calling thread; its status and its stdout
/// and stderr together.
public func runCapturing(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Starts `command` (a shell command that runs an engine in the background as `$!`-able job)
/// under a watchdog: the engine runs as long as this test process does, then `stop` (shell, with
/// the engine's pid in `$p`) ends it, so a crashed test run leaves nothing behind. The watchdog
/// ignores SIGINT and SIGHUP: a Ctrl-C on `swift test` ends the test process, and the watchdog
/// stays to clean up after it. With no `command` it only waits for the test process, then runs
/// `stop`.
func startWatched(_ command: String?, stop: String) throws {
    let script = """
        trap '' INT HUP
        alive() { s=$(cut -d' ' -f3 /proc/$1/stat 2>/dev/null) && [ "$s" != Z ]; }
        \(command.map { "\($0) &\np=$!" } ?? "p=\(getpid())")
        while alive \(getpid()) && alive $p; do sleep 1; done
        \(stop)
        """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", script]
    // Not the test process's pipes: `swift test` waits for them to close before it reaps the
    // test process, and the watchdog waits for that process to go.
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
}

/// Polls `condition` every 20 ms until it holds or `seconds` pass; its last answer.
public func eventually(within seconds: Double = 10, _ condition: @Sendable () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}
