import Foundation
import SQLEngine
@testable import MediaStore
import NIOCore
import RichPushTestSupport
import Testing

/// One line of `Tests/Corpus/EXPECTED.tsv`.
struct CorpusCase: CustomTestStringConvertible, Sendable {
    var file: String
    var accept: Bool
    var contentType: String?
    var width: Int?
    var height: Int?
    var testDescription: String { file }

    static func load() throws -> [CorpusCase] {
        let text = try String(contentsOf: Fixtures.corpus.appendingPathComponent("EXPECTED.tsv"), encoding: .utf8)
        return text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { line in
            let f = line.split(separator: "\t").map(String.init)
            return CorpusCase(file: f[0], accept: f[1] == "accept",
                              contentType: f[2] == "-" ? nil : f[2], width: Int(f[3]), height: Int(f[4]))
        }
    }
}

@Suite("Conformance corpus")
struct CorpusTests {
    /// A media store on `engine`: files and SQLite, or PostgreSQL and a bucket.
    static func store(_ engine: StoreEngine, in dir: URL) async throws -> MediaStore {
        let directory = DataDirectory(path: dir.path)
        guard engine == .shared else { return try MediaStore(path: dir.path) }
        let locations = try await engine.locations()
        let database = try await onOwnThread {
            try StoreDatabase.open(directory, migrations: StoreDatabase.mediaMigrations, postgres: locations.database)
        }
        let bucket = S3Client(location: try S3Location(try #require(locations.blobs)),
                              credentials: try S3Credentials.fromEnvironment(locations.environment))
        return MediaStore(directory: directory, database: database, bucket: bucket)
    }

    @Test("every file of EXPECTED.tsv gets its verdict, type and size", arguments: StoreEngine.all)
    func wholeCorpus(engine: StoreEngine) async throws {
        let cases = try CorpusCase.load()
        #expect(cases.count == 179)
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await Self.store(engine, in: dir)
        var accepted = 0
        for c in cases {
            let path = Fixtures.corpus.appendingPathComponent(c.file).path
            do {
                let result = try await store.ingest(file: path)
                #expect(c.accept, "\(c.file) was accepted but must be rejected")
                #expect(result.item.info.contentType == c.contentType, "\(c.file)")
                #expect(result.item.info.width == c.width && result.item.info.height == c.height, "\(c.file)")
                let stored = try #require(try await store.read(result.item.id, offset: 0, length: result.item.size))
                // What is stored is the file with its metadata stripped (docs/configuration.md#the-media-store), nothing else changed.
                let original = try Fixtures.bytes(URL(fileURLWithPath: path))
                #expect(Array(stored.readableBytesView) == MetadataStripper.strip(original).bytes, "\(c.file): stored bytes differ")
                #expect(result.stripped == MetadataStripper.strip(original).removed, "\(c.file)")
                accepted += 1
            } catch let rejection as MediaRejection {
                #expect(!c.accept, "\(c.file) was rejected: \(rejection)")
                #expect(!rejection.reason.isEmpty)
            }
        }
        #expect(accepted == cases.filter(\.accept).count)
        // Rejections left nothing behind: one blob per row, no upload marks, no temp files.
        let rows = try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM media") }
        if let remote = store.remote {
            let objects = try await remote.client.listAll(prefix: "sha256/")
            #expect(rows == objects.count)
            #expect(try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM media_pending") } == 0)
        } else {
            let files = try FileManager.default.subpathsOfDirectory(atPath: store.directory.blobsPath).filter { $0.count > 3 }
            #expect(rows == files.count)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory.tmpPath).isEmpty)
    }

    @Test("the 12-bit JPEG is unsupported and names its precision")
    func twelveBitJPEG() throws {
        let bytes = try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("jpeg/monkey12.jpg"))
        #expect(throws: MediaRejection(.unsupported, "12-bit JPEG is not supported; send an 8-bit JPEG")) {
            try ImageInspector.inspect(bytes, limits: .default)
        }
    }

    @Test("broken PngSuite files are corrupt with libpng's reason")
    func brokenPNGReasons() throws {
        let expectations = [
            "xcsn0g01.png": "IDAT: CRC error",
            "xhdn0g08.png": "IHDR: CRC error",
            "xd0n2c08.png": "Invalid bit depth in IHDR",
            "xc1n0g08.png": "Invalid color type in IHDR",
            "xdtn0g01.png": "IEND",
        ]
        for (file, fragment) in expectations {
            let bytes = try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("pngsuite/\(file)"))
            do {
                _ = try ImageInspector.inspect(bytes, limits: .default)
                Issue.record("\(file) was accepted")
            } catch {
                #expect(error.kind == .corrupt, "\(file)")
                #expect(error.reason.contains(fragment), "\(file): \(error.reason)")
            }
        }
    }

    @Test("interlaced PNG and progressive/arithmetic JPEG report their mode")
    func modes() throws {
        let interlaced = try ImageInspector.inspect(try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("pngsuite/basi6a16.png")), limits: .default)
        #expect(interlaced.interlaced && interlaced.bitDepth == 16 && interlaced.colorModel == "rgba")
        let palette = try ImageInspector.inspect(try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("pngsuite/basn3p04.png")), limits: .default)
        #expect(!palette.interlaced && palette.bitDepth == 4 && palette.colorModel == "palette")
        let jpeg = try ImageInspector.inspect(try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("jpeg/testimgint.jpg")), limits: .default)
        #expect(jpeg.contentType == "image/jpeg" && jpeg.colorModel == "ycbcr" && jpeg.bitDepth == 8)
    }
}
