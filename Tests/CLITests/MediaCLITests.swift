import Foundation
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Writes `count` distinct, valid, incompressible PNGs of about `side`² × 3 bytes into a new folder.
/// `makeImageFolder` on a thread of its own: encoding many images would hold a pool thread.
func makeImageFolderOffPool(in dir: URL, count: Int, side: Int) async throws -> URL {
    try await onOwnThread { try makeImageFolder(in: dir, count: count, side: side) }
}

func makeImageFolder(in dir: URL, count: Int, side: Int) throws -> URL {
    let folder = dir.appendingPathComponent("images")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    for i in 0..<count {
        let png = PNGBuilder.rgb(width: side, height: side, seed: UInt64(i + 1))
        try Data(png).write(to: folder.appendingPathComponent(String(format: "img%03d.png", i)))
    }
    return folder
}

@Suite("richpush media CLI")
struct MediaCLITests {
    @Test("add prints SPEC's line per stored file, an error line per rejection, and exits 1 when any was rejected")
    func addLines() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let good = Fixtures.corpus.appendingPathComponent("jpeg/testorig.jpg").path
        let bad = Fixtures.corpus.appendingPathComponent("pngsuite/xcsn0g01.png").path
        let r = try await CLI.run(["media", "add", "--data", data, good, bad])
        #expect(r.status == 1)
        #expect(r.lines == ["acc6ec555d41d15b368320edaa3b20958ee6fa97cb6e4a18d1213d5ae8bec73b image/jpeg 227x149 5770 \(good)"])
        #expect(r.stderr == "note: created a new data directory at \(data)\nerror: \(bad): corrupt: PNG: IDAT: CRC error\n", "\(r.stderr)")
        let again = try await CLI.run(["media", "add", "--data", data, good])
        #expect(again.status == 0)
        #expect(again.lines.count == 1)
    }

    @Test("add --json gives one object per file with status stored/exists or an error")
    func addJSON() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let logo = Fixtures.media.appendingPathComponent("logo.png").path
        let gif = dir.appendingPathComponent("scan.png")
        try Data("%PDF-1.4\n".utf8).write(to: gif)
        let r = try await CLI.run(["media", "add", "--data", data, "--json", logo, logo, gif.path])
        #expect(r.status == 1)
        let objects = try r.lines.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
        #expect(objects.count == 3)
        #expect(Set(objects[0].keys) == ["path", "sha256", "contentType", "width", "height", "size", "status", "stripped"])
        #expect(objects[0]["contentType"] as? String == "image/png")
        #expect(Set([objects[0]["status"] as? String, objects[1]["status"] as? String]) == ["stored", "exists"])
        let error = objects[2]["error"] as? [String: Any]
        #expect(error?["class"] as? String == "unsupported")
        #expect(error?["reason"] as? String == "application/pdf is not accepted; send PNG, JPEG or GIF")
        #expect(r.stderr == "note: created a new data directory at \(data)\n", "\(r.stderr)") // and nothing else
    }

    @Test("usage errors exit 2", arguments: [
        ["media", "add"],
        ["media", "add", "--name", "x", "a.png", "b.png"],
        ["media", "add", "--bogus", "a.png"],
        ["media", "gc", "--grace", "soon"],
    ])
    func usage(_ args: [String]) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try await CLI.run(args + ["--data", dir.path])
        #expect(r.status == 2, "\(args): \(r.stderr)")
        #expect(!r.stderr.isEmpty)
    }

    @Test("list, show, rm, verify and gc work from the command line")
    func manage() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let logo = Fixtures.media.appendingPathComponent("logo.png").path
        let added = try await CLI.run(["media", "add", "--data", data, "--name", "logo.png", logo])
        let id = String(added.stdout.prefix(64))
        #expect(try await CLI.run(["media", "list", "--data", data]).stdout.contains("\(id)\timage/png"))
        let show = try await CLI.run(["media", "show", "--data", data, "--json", "logo.png"])
        let object = try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any]
        #expect(object?["sha256"] as? String == id)
        #expect(object?["names"] as? [String] == ["logo.png"])
        #expect(try await CLI.run(["media", "show", "--data", data, "nope"]).status == 1)
        #expect(try await CLI.run(["media", "verify", "--data", data]).status == 0)
        #expect(try await CLI.run(["media", "gc", "--data", data, "--grace", "0s"]).stdout.contains("0 blobs"))
        let rm = try await CLI.run(["media", "rm", "--data", data, "logo.png"])
        #expect(rm.stdout == "removed name logo.png\nremoved \(id)\n")
        #expect(try await CLI.run(["media", "list", "--data", data]).stdout.isEmpty)
    }

    @Test("verify reports a blob with one flipped byte and exits 1")
    func verifyFlippedByte() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data")
        let added = try await CLI.run(["media", "add", "--data", data.path, Fixtures.media.appendingPathComponent("logo.png").path])
        let id = String(added.stdout.prefix(64))
        let blob = data.appendingPathComponent("blobs/sha256/\(id.prefix(2))/\(id)")
        var bytes = try Data(contentsOf: blob)
        bytes[1000] ^= 0x04
        chmod(blob.path, 0o644)
        try bytes.write(to: blob)
        let r = try await CLI.run(["media", "verify", "--data", data.path])
        #expect(r.status == 1)
        #expect(r.stderr.contains("problem: \(blob.path): content hashes to"))
        #expect(r.stdout == "1 blob checked, 1 problem\n")
    }

    @Test("two processes adding the same files at once store each blob once")
    func twoProcesses() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let folder = try await makeImageFolderOffPool(in: dir, count: 16, side: 200)
        let data = dir.appendingPathComponent("data").path
        async let first = CLI.run(["media", "add", "--data", data, "--json", folder.path])
        async let second = CLI.run(["media", "add", "--data", data, "--json", folder.path])
        let results: [CLI.Result?] = [try? await first, try? await second]
        var stored: [String: Int] = [:], seen: [String: Int] = [:]
        for result in results {
            let r = try #require(result)
            #expect(r.status == 0, "\(r.stderr)")
            for line in r.lines {
                let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
                let id = object["sha256"] as! String
                seen[id, default: 0] += 1
                if object["status"] as? String == "stored" { stored[id, default: 0] += 1 }
            }
        }
        #expect(seen.count == 16 && seen.values.allSatisfy { $0 == 2 })
        #expect(stored.count == 16 && stored.values.allSatisfy { $0 == 1 })
        #expect(try await CLI.run(["media", "verify", "--data", data]).stdout == "16 blobs checked, 0 problems\n")
    }

    @Test("kill -9 during a large add: every file reported stored is whole, a re-run completes, verify passes")
    func killDuringAdd() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let folder = try await makeImageFolderOffPool(in: dir, count: 48, side: 700) // ~1.5 MB each
        let data = dir.appendingPathComponent("data")
        // The child runs and is killed on a thread of its own; its output comes back whole.
        let (output, killedBySignal) = try await onOwnThread { () throws -> (Data, Bool) in
            let process = Process()
            process.executableURL = CLI.executable
            process.arguments = ["media", "add", "--data", data.path, "--json", folder.path]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Read lines as they arrive; kill once a handful are reported.
            var buffer = Data()
            while buffer.filter({ $0 == 0x0A }).count < 5 {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            // Anything it managed to write before dying counts as reported too.
            buffer.append(out.fileHandleForReading.readDataToEndOfFile())
            return (buffer, process.terminationReason == .uncaughtSignal)
        }
        var reported: [[String: Any]] = []
        for line in output.split(separator: 0x0A) where !line.isEmpty {
            if let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] { reported.append(object) }
        }
        #expect(killedBySignal)
        #expect(reported.count >= 5 && reported.count < 48, "the kill should land mid-way (\(reported.count) reported)")
        for object in reported {
            let id = object["sha256"] as! String
            let blob = data.appendingPathComponent("blobs/sha256/\(id.prefix(2))/\(id)")
            let original = try Data(contentsOf: URL(fileURLWithPath: object["path"] as! String))
            #expect(try Data(contentsOf: blob) == original, "reported stored but not whole: \(id)")
        }
        let rerun = try await CLI.run(["media", "add", "--data", data.path, "--json", folder.path])
        #expect(rerun.status == 0)
        #expect(rerun.lines.count == 48)
        let verify = try await CLI.run(["media", "verify", "--data", data.path])
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(verify.stdout == "48 blobs checked, 0 problems\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: data.appendingPathComponent("tmp").path).isEmpty)
    }
}
