import Foundation
import MediaStore
import RichPushTestSupport
import Testing

/// The fuzzer's findings, replayed on every run: its minimised corpus (inputs that reach new
/// code in the decoders) and every input that ever crashed or overran a bound
/// (`scripts/fuzz.sh`). Any verdict is fine; each must be settled within a second of CPU.
@Suite("Fuzzer corpus and crashes, replayed")
struct FuzzReplayTests {
    static func inputs(_ folder: String) -> [URL] {
        let dir = Fixtures.packageRoot.appendingPathComponent("fuzz/\(folder)")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { dir.appendingPathComponent($0) }
    }

    @Test("the fuzzer's corpus is there to replay")
    func corpusPresent() {
        #expect(Self.inputs("corpus").count > 20)
    }

    @Test("every corpus input and every crash found so far is settled within a second")
    func replay() throws {
        let files = Self.inputs("corpus") + Self.inputs("crashes")
        for file in files {
            let bytes = try Fixtures.bytes(file)
            let seconds = cpuSeconds { _ = try? ImageInspector.inspect(bytes, limits: .default) }
            #expect(seconds < 1, "\(file.lastPathComponent): \(seconds) s")
        }
    }
}
