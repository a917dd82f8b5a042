import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The layout of a RichPush data directory (docs/configuration.md#the-data-directory).
public struct DataDirectory: Sendable {
    /// The directory itself.
    public let root: URL

    /// Uses `path` (created on first use by `prepare()`).
    /// The SQLite file, when `--database sqlite:PATH` puts it elsewhere than the directory.
    private let databaseOverride: String?

    /// Uses `path` (created on first use by `prepare()`); the database is `path/richpush.sqlite`
    /// unless `databasePath` names another file.
    public init(path: String, databasePath: String? = nil) {
        self.root = URL(fileURLWithPath: path, isDirectory: true).standardizedFileURL
        self.databaseOverride = databasePath.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
    }

    /// `richpush.sqlite`.
    public var databasePath: String { databaseOverride ?? root.appendingPathComponent("richpush.sqlite").path }
    /// `blobs/sha256`.
    public var blobsPath: String { root.appendingPathComponent("blobs/sha256").path }
    /// `tmp`.
    public var tmpPath: String { root.appendingPathComponent("tmp").path }

    /// `blobs/sha256/<first 2 hex>/<64 hex>` for a validated id.
    public func blobPath(_ id: MediaID) -> String {
        "\(blobsPath)/\(id.hex.prefix(2))/\(id.hex)"
    }

    /// Creates the directories and removes temp files left by processes that are gone.
    ///
    /// Other live processes (a `serve` next to a CLI) may be writing to `tmp/`, so only files
    /// whose owner pid is dead, or that carry no pid, are removed.
    public func prepare() throws {
        // A new data directory is the owner's alone (it holds password hashes and keys); an
        // existing one keeps the permissions its operator gave it.
        if !FileManager.default.fileExists(atPath: root.path) {
            try FileOps.makeDirectories(root.path)
            chmod(root.path, 0o700)
        }
        for path in [root.path, blobsPath, tmpPath] {
            try FileOps.makeDirectories(path)
        }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: tmpPath)) ?? []
        for entry in entries {
            let parts = entry.split(separator: ".")
            let pid = parts.first.flatMap { pid_t($0) }
            if let pid, pid == getpid() {
                // Ours only if it carries this process's tag; else an earlier process with our pid left it.
                if parts.count > 1 && parts[1] == TmpName.instance { continue }
            } else if let pid, kill(pid, 0) == 0 || errno == EPERM {
                continue
            }
            unlink("\(tmpPath)/\(entry)")
        }
    }
}

/// Small POSIX helpers: durable writes, renames and directory syncs.
enum FileOps {
    /// `length` bytes of the file at `path` from `offset`, read straight into a buffer (one
    /// copy, from the kernel); nil when the file cannot be read that far.
    static func readRange(_ path: String, offset: Int, length: Int) -> ByteBuffer? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = ByteBufferAllocator().buffer(capacity: length)
        var done = 0
        while done < length {
            let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 0) { raw in
                pread(fd, raw.baseAddress, min(raw.count, length - done), off_t(offset + done))
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            done += n
        }
        return buffer
    }

    static func makeDirectories(_ path: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw MediaStoreError.io("cannot create directory", path: path, errno: errno)
        }
    }

    /// Writes `bytes` to a new file at `path` and fsyncs it.
    static func writeDurably(_ bytes: UnsafeRawBufferPointer, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o444)
        guard fd >= 0 else { throw MediaStoreError.io("cannot create", path: path, errno: errno) }
        defer { close(fd) }
        var offset = 0
        while offset < bytes.count {
            let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                let e = errno
                unlink(path)
                throw MediaStoreError.io("cannot write", path: path, errno: e)
            }
            offset += n
        }
        if fsync(fd) != 0 {
            let e = errno
            unlink(path)
            throw MediaStoreError.io("cannot fsync", path: path, errno: e)
        }
    }

    /// fsyncs a directory so that a rename or unlink in it survives a crash.
    static func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw MediaStoreError.io("cannot open directory", path: path, errno: errno) }
        defer { close(fd) }
        if fsync(fd) != 0 { throw MediaStoreError.io("cannot fsync directory", path: path, errno: errno) }
    }

    static func rename(_ from: String, _ to: String) throws {
        if Glibc.rename(from, to) != 0 { throw MediaStoreError.io("cannot rename to", path: to, errno: errno) }
    }

    /// Size of a regular file, or nil when it does not exist.
    static func fileSize(_ path: String) -> Int? {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int(st.st_size)
    }

    /// Modification time of a file, or nil.
    static func modificationDate(_ path: String) -> Date? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(st.st_mtim.tv_sec))
    }

    /// Reads a whole file, refusing it without reading when it is larger than `limit`.
    static func readFile(_ path: String, limit: Int) throws -> ReadResult {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw MediaStoreError.io("cannot open", path: path, errno: errno) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw MediaStoreError.io("cannot stat", path: path, errno: errno) }
        let size = Int(st.st_size)
        if size > limit { return .tooLarge(size) }
        var bytes = [UInt8](repeating: 0, count: size)
        var offset = 0
        try bytes.withUnsafeMutableBytes { raw in
            while offset < size {
                let n = read(fd, raw.baseAddress! + offset, size - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw MediaStoreError.io("cannot read", path: path, errno: errno)
                }
                if n == 0 { break }
                offset += n
            }
        }
        if offset < size { bytes.removeLast(size - offset) }
        return .bytes(bytes)
    }

    enum ReadResult {
        case bytes([UInt8])
        case tooLarge(Int)
    }
}
