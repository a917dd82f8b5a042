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
    // MARK: Verify

    /// One inconsistency found by `verify`.
    public struct Problem: Sendable, CustomStringConvertible {
        /// The blob's path.
        public var path: String
        /// What is wrong with it.
        public var what: String
        public var description: String { "\(path): \(what)" }
    }

    /// Re-hashes every blob and checks rows against files; returns how many blobs were checked and every problem.
    public func verify() async throws -> (checked: Int, problems: [Problem]) {
        if let remote { return try await verifyRemote(remote) }
        let items = try await list()
        let directory = self.directory
        var problems: [Problem] = []
        var known = Set<String>()
        let found = NIOLockedValueBox<[Problem]>([])
        let threadPool = self.threadPool
        await Concurrently.forEach(count: items.count, width: max(2, ProcessInfo.processInfo.activeProcessorCount)) { index in
            let problem: Problem?
            do {
                problem = try await threadPool.runIfActive { Self.check(items[index], directory) }
            } catch {
                problem = Problem(path: directory.blobPath(items[index].id), what: "not checked: \(error)")
            }
            if let problem { found.withLockedValue { $0.append(problem) } }
        }
        problems = found.withLockedValue { $0 }
        for item in items { known.insert(item.id.hex) }
        // Files without rows, and files that are not named like blobs.
        let shards = (try? FileManager.default.contentsOfDirectory(atPath: directory.blobsPath)) ?? []
        for shard in shards.sorted() {
            let shardPath = "\(directory.blobsPath)/\(shard)"
            let files = (try? FileManager.default.contentsOfDirectory(atPath: shardPath)) ?? []
            for file in files.sorted() {
                let path = "\(shardPath)/\(file)"
                if let id = MediaID(file), id.hex == file, file.hasPrefix(shard) {
                    if !known.contains(file) { problems.append(Problem(path: path, what: "file has no row in the index (orphan; `media gc` removes it)")) }
                } else {
                    problems.append(Problem(path: path, what: "not a blob name"))
                }
            }
        }
        problems.sort { $0.path < $1.path }
        return (items.count, problems)
    }

    /// `verify` on a bucket: every object re-hashed by a GET, and every object without a row.
    private func verifyRemote(_ remote: RemoteBlobs) async throws -> (checked: Int, problems: [Problem]) {
        let items = try await list()
        let found = NIOLockedValueBox<[Problem]>([])
        await Concurrently.forEach(count: items.count, width: 8) { index in
            if let what = await remote.check(items[index]) {
                found.withLockedValue { $0.append(Problem(path: remote.location(items[index].id), what: what)) }
            }
        }
        let marked = Set(try await database.read { db in try String.fetchAll(db, sql: "SELECT sha256 FROM media_pending") })
        var problems = found.withLockedValue { $0 }
        for stray in try await remote.strays(known: Set(items.map(\.id.hex)), marked: marked) {
            problems.append(Problem(path: stray.location, what: stray.what))
        }
        problems.sort { $0.path < $1.path }
        return (items.count, problems)
    }

    private static func check(_ item: MediaItem, _ directory: DataDirectory) -> Problem? {
        let path = directory.blobPath(item.id)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return Problem(path: path, what: "missing: the index has a row for it but the file cannot be opened (\(String(cString: strerror(errno))))") }
        defer { close(fd) }
        var hasher = SHA256()
        var size = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return Problem(path: path, what: "read error: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            size += n
            buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        let actual = MediaID(digest: hasher.finalize())
        if size != item.size { return Problem(path: path, what: "size is \(size) bytes, the index says \(item.size)") }
        if actual != item.id { return Problem(path: path, what: "content hashes to \(actual.hex): the blob is damaged") }
        return nil
    }
}
