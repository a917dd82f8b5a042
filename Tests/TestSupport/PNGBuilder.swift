import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Builds PNG files byte by byte, so tests can damage them in precise ways.
public enum PNGBuilder {
    public static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    public static func crc32(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
        }
        return ~crc
    }

    public static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return (b << 16) | a
    }

    public static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

    /// One chunk with a correct CRC (or the given length field, for lying lengths).
    public static func chunk(_ type: String, _ data: [UInt8], declaredLength: UInt32? = nil) -> [UInt8] {
        let typeBytes = Array(type.utf8)
        return be32(declaredLength ?? UInt32(data.count)) + typeBytes + data + be32(crc32(typeBytes + data))
    }

    public static func ihdr(width: UInt32, height: UInt32, bitDepth: UInt8 = 8, colorType: UInt8 = 2, interlace: UInt8 = 0) -> [UInt8] {
        chunk("IHDR", be32(width) + be32(height) + [bitDepth, colorType, 0, 0, interlace])
    }

    /// A zlib stream of stored (uncompressed) deflate blocks.
    public static func zlibStored(_ raw: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let n = min(65535, raw.count - offset)
            let final: UInt8 = offset + n == raw.count ? 1 : 0
            out += [final, UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8((~n >> 8) & 0xFF)]
            out += raw[offset..<offset + n]
            offset += n
        } while offset < raw.count
        return out + be32(adler32(raw))
    }

    /// The start of a zlib stream that inflates to `count` zero bytes (fixed-Huffman runs of 258):
    /// a few KB that expand ~160:1, the shape of a decompression bomb.
    public static func zlibZeros(count: Int) -> [UInt8] {
        var bits = BitWriter()
        bits.write(1, 1)             // BFINAL
        bits.write(1, 2)             // BTYPE = fixed Huffman
        bits.writeHuffman(0x30, 8)   // literal 0
        var produced = 1
        while produced + 258 <= count {
            bits.writeHuffman(0xC5, 8) // length code 285 (258)
            bits.write(0, 5)         // distance code 0 (1)
            produced += 258
        }
        while produced < count {
            bits.writeHuffman(0x30, 8)
            produced += 1
        }
        bits.write(0, 7)             // end of block (code 256)
        return [0x78, 0x01] + bits.bytes()
    }

    /// A valid 8-bit RGB PNG of `width`×`height` with pseudo-random pixels (incompressible).
    public static func rgb(width: Int, height: Int, seed: UInt64 = 1) -> [UInt8] {
        var raw = [UInt8]()
        raw.reserveCapacity((width * 3 + 1) * height)
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        for _ in 0..<height {
            raw.append(0)
            for _ in 0..<(width * 3) {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17
                raw.append(UInt8(truncatingIfNeeded: state))
            }
        }
        return signature + ihdr(width: UInt32(width), height: UInt32(height)) + chunk("IDAT", zlibStored(raw)) + chunk("IEND", [])
    }

    /// Splits a PNG into (type, data) chunks after the signature.
    public static func chunks(_ png: [UInt8]) -> [(type: String, data: [UInt8])] {
        var out: [(String, [UInt8])] = []
        var i = 8
        while i + 12 <= png.count {
            let length = Int(UInt32(png[i]) << 24 | UInt32(png[i + 1]) << 16 | UInt32(png[i + 2]) << 8 | UInt32(png[i + 3]))
            let type = String(decoding: png[i + 4..<i + 8], as: UTF8.self)
            out.append((type, Array(png[i + 8..<i + 8 + length])))
            i += 12 + length
        }
        return out
    }

    public static func assemble(_ chunks: [(type: String, data: [UInt8])]) -> [UInt8] {
        signature + chunks.flatMap { chunk($0.type, $0.data) }
    }
}

struct BitWriter {
    private var out: [UInt8] = []
    private var current: UInt32 = 0
    private var count = 0

    /// Writes `n` bits of `value`, least significant first (deflate's order for non-Huffman fields).
    mutating func write(_ value: UInt32, _ n: Int) {
        for i in 0..<n { push((value >> UInt32(i)) & 1) }
    }

    /// Writes a Huffman code most significant bit first.
    mutating func writeHuffman(_ code: UInt32, _ n: Int) {
        for i in stride(from: n - 1, through: 0, by: -1) { push((code >> UInt32(i)) & 1) }
    }

    private mutating func push(_ bit: UInt32) {
        current |= bit << UInt32(count)
        count += 1
        if count == 8 { out.append(UInt8(current)); current = 0; count = 0 }
    }

    func bytes() -> [UInt8] { count > 0 ? out + [UInt8(current)] : out }
}

/// Paths of the repository and of the image corpus it keeps (`Tests/Corpus`: PngSuite and
/// libjpeg's test images with their expected verdicts, docs/design/layout.md).
public enum Fixtures {
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    public static let corpus = packageRoot.appendingPathComponent("Tests/Corpus")
    public static let media = packageRoot.appendingPathComponent("media")

    public static func bytes(_ url: URL) throws -> [UInt8] { [UInt8](try Data(contentsOf: url)) }

    /// A fresh temporary directory, inside this test process's scratch directory. A caller's
    /// `defer` may remove it early; whatever is left (a test that failed before its `defer`, a
    /// server's files) goes with the scratch directory when the process ends.
    public static func tempDirectory() throws -> URL {
        let url = try scratch.get().appendingPathComponent("richpush-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A fresh temporary directory for an engine (PostgreSQL, SeaweedFS) outside the scratch
    /// directory: the engine's own watchdog stops it and then removes the directory, in that order.
    static func engineDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("richpush-engine-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// `/tmp/richpush-tests-PID-…`, made on first use and removed by a watchdog when this test
    /// process ends, however it ends: a suite run leaves nothing in `/tmp`.
    private static let scratch = Result<URL, any Error> {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("richpush-tests-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        try startWatched(nil, stop: "rm -rf '\(url.path)'")
        return url
    }
}
