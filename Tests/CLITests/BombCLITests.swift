import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Decoder bombs through media add, in a process of their own")
struct BombCLITests {
    @Test("each bomb is settled by richpush media add within 256 MB of memory (its process's peak, by GNU time)")
    func memory() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, bytes) in try Bombs.all() {
            let file = dir.appendingPathComponent(name)
            try Data(bytes).write(to: file)
            // GNU time reports this child's own peak resident set, in kB, as the last line of stderr.
            // (time writes after the child has exited, so its line comes last even with stdout mixed in.)
            let output = try await onOwnThread {
                try runCapturing("/usr/bin/time", ["-f", "%M", CLI.executable.path, "media", "add", file.path,
                                                   "--data", dir.appendingPathComponent("data").path])
            }
            #expect([0, 1].contains(output.0), "\(name): \(output.1)")
            let peak = Int(output.1.split(separator: "\n").last ?? "") ?? -1
            #expect(peak > 0 && peak < 256 * 1024, "\(name): \(peak) kB; \(output.1.suffix(200))")
        }
    }
}
