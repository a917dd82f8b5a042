import Foundation
@testable import MediaStore
import RichPushTestSupport
import Testing

/// Builds the metadata a phone writes, byte by byte, in either TIFF byte order.
struct ExifBuilder {
    var bigEndian: Bool

    /// A camera serial the stripped file must not contain.
    static let make = Array("SecretCam SN-0042\0".utf8)
    /// GPSLatitude 52° 31' 12.34" as three RATIONALs: the bytes that say where the photo was taken.
    var latitude: [UInt8] { u32(52) + u32(1) + u32(31) + u32(1) + u32(1234) + u32(100) }

    func u16(_ v: Int) -> [UInt8] {
        bigEndian ? [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] : [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)]
    }

    func u32(_ v: Int) -> [UInt8] { bigEndian ? u16(v >> 16) + u16(v & 0xFFFF) : u16(v & 0xFFFF) + u16(v >> 16) }

    /// A TIFF whose IFD0 holds Make, Orientation and a GPS IFD pointer, each only when asked for.
    func tiff(orientation: Int?, make: Bool = false, gps: Bool = false, orientationType: Int = 3) -> [UInt8] {
        let count = (make ? 1 : 0) + (orientation == nil ? 0 : 1) + (gps ? 1 : 0)
        let dataStart = 8 + 2 + count * 12 + 4
        var ifd = u16(count)
        var data: [UInt8] = []
        if make {
            ifd += u16(0x010F) + u16(2) + u32(Self.make.count) + u32(dataStart + data.count)
            data += Self.make
        }
        if let orientation {
            ifd += u16(0x0112) + u16(orientationType) + u32(1) + u16(orientation) + [0, 0]
        }
        if gps {
            let gpsIFD = dataStart + data.count
            ifd += u16(0x8825) + u16(4) + u32(1) + u32(gpsIFD)
            let values = gpsIFD + 2 + 12 + 4
            data += u16(1) + u16(0x0002) + u16(5) + u32(3) + u32(values) + u32(0) + latitude
        }
        ifd += u32(0)
        return (bigEndian ? [0x4D, 0x4D] : [0x49, 0x49]) + u16(42) + u32(8) + ifd + data
    }
}

/// JPEG segments and a JPEG from the corpus to put them in.
enum JPEGParts {
    static func segment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
        [0xFF, marker, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
    }

    static func exif(_ tiff: [UInt8]) -> [UInt8] { segment(0xE1, Array("Exif".utf8) + [0, 0] + tiff) }

    static let xmp = segment(0xE1, Array("http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><rdf:Description photoshop:City=\"Berlin\"/></x:xmpmeta>".utf8))
    static let extendedXMP = segment(0xE1, Array("http://ns.adobe.com/xmp/extension/\0".utf8) + [UInt8](repeating: 0x41, count: 40))
    static let iptc = segment(0xED, Array("Photoshop 3.0\08BIM\u{04}\u{04}\0\0\0\0\0\u{0B}\u{1C}\u{02}\u{50}\0\u{06}Jane D".utf8))
    static let comment = segment(0xFE, Array("shot at 12 Elm Street".utf8))
    static let icc1 = segment(0xE2, Array("ICC_PROFILE\0".utf8) + [1, 2] + (0..<300).map { UInt8($0 & 0xFF) })
    static let icc2 = segment(0xE2, Array("ICC_PROFILE\0".utf8) + [2, 2] + (0..<120).map { UInt8(($0 * 7) & 0xFF) })
    static let adobe = segment(0xEE, Array("Adobe".utf8) + [0, 100, 0, 0, 0, 0, 1])
    static let mpf = segment(0xE2, Array("MPF\0".utf8) + [UInt8](repeating: 0, count: 30))
    static let jumbf = segment(0xEB, Array("JP".utf8) + [UInt8](repeating: 7, count: 30))
    static let otherAPP1 = segment(0xE1, Array("FLIR\0".utf8) + [1, 2, 3])

    /// The libjpeg test image (JFIF, baseline, 227×149), no metadata.
    static func base() throws -> [UInt8] { try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("jpeg/testorig.jpg")) }

    /// `base` with `segments` right after its JFIF APP0.
    static func with(_ segments: [[UInt8]]) throws -> [UInt8] {
        let b = try base()
        let afterAPP0 = 4 + (Int(b[4]) << 8 | Int(b[5]))
        return Array(b[..<afterAPP0]) + segments.flatMap { $0 } + Array(b[afterAPP0...])
    }
}

func containsBytes(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return needle.isEmpty }
    return (0...(haystack.count - needle.count)).contains { haystack[$0..<$0 + needle.count].elementsEqual(needle) }
}

/// The chunks of a PNG, each with whether its stored CRC is right.
func pngChunksCheckingCRC(_ png: [UInt8]) -> [(type: String, data: [UInt8], crcOK: Bool)] {
    func be32(_ i: Int) -> Int { Int(png[i]) << 24 | Int(png[i + 1]) << 16 | Int(png[i + 2]) << 8 | Int(png[i + 3]) }
    var out: [(type: String, data: [UInt8], crcOK: Bool)] = []
    var i = 8
    while i + 12 <= png.count {
        let length = be32(i)
        let body = Array(png[i + 4..<i + 8 + length])
        out.append((String(decoding: body.prefix(4), as: UTF8.self), Array(body.dropFirst(4)), UInt32(be32(i + 8 + length)) == PNGBuilder.crc32(body)))
        i += 12 + length
    }
    return out
}

@Suite("Metadata stripping")
struct MetadataStripperTests {
    /// Strips `input`, then checks that stripping again changes nothing.
    func stripped(_ input: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> (bytes: [UInt8], removed: [StrippedMetadata]) {
        let once = MetadataStripper.strip(input)
        let twice = MetadataStripper.strip(once.bytes)
        #expect(twice.removed.isEmpty, "stripping twice removed \(twice.removed)", sourceLocation: sourceLocation)
        #expect(twice.bytes == once.bytes, "stripping twice changed the bytes", sourceLocation: sourceLocation)
        #expect(once.removed == Array(Set(once.removed)).sorted(), sourceLocation: sourceLocation)
        return once
    }

    // MARK: JPEG

    @Test("GPS and camera EXIF go, Orientation stays, the JPEG still decodes", arguments: [false, true])
    func exifWithGPS(bigEndian: Bool) throws {
        let exif = ExifBuilder(bigEndian: bigEndian)
        let input = try JPEGParts.with([JPEGParts.exif(exif.tiff(orientation: 6, make: true, gps: true))])
        #expect(MetadataStripper.orientation(input) == 6)

        let result = stripped(input)
        #expect(result.removed == [.exifGPS, .exif])
        #expect(!containsBytes(result.bytes, ExifBuilder.make))
        #expect(!containsBytes(result.bytes, exif.latitude))
        #expect(MetadataStripper.orientation(result.bytes) == 6)
        #expect(result.bytes == (try JPEGParts.with([JPEGParts.exif(exif.tiff(orientation: 6))])))

        let info = try ImageInspector.inspect(result.bytes, limits: .default)
        #expect(info.width == 227 && info.height == 149)
    }

    @Test("EXIF with GPS beside Orientation reports exif-gps alone")
    func gpsOnly() throws {
        let exif = ExifBuilder(bigEndian: false)
        let result = stripped(try JPEGParts.with([JPEGParts.exif(exif.tiff(orientation: 3, gps: true))]))
        #expect(result.removed == [.exifGPS])
        #expect(MetadataStripper.orientation(result.bytes) == 3)
    }

    @Test("EXIF without Orientation is dropped whole")
    func exifWithoutOrientation() throws {
        let result = stripped(try JPEGParts.with([JPEGParts.exif(ExifBuilder(bigEndian: true).tiff(orientation: nil, make: true))]))
        #expect(result.removed == [.exif])
        #expect(result.bytes == (try JPEGParts.base()))
        #expect(MetadataStripper.orientation(result.bytes) == nil)
    }

    @Test("a minimal Orientation-only EXIF is left as it is", arguments: 1...8)
    func minimalExifUntouched(orientation: Int) throws {
        let input = try JPEGParts.with([JPEGParts.exif(ExifBuilder(bigEndian: orientation.isMultiple(of: 2)).tiff(orientation: orientation))])
        let result = MetadataStripper.strip(input)
        #expect(result.removed.isEmpty)
        #expect(result.bytes == input)
        #expect(MetadataStripper.orientation(input) == orientation)
    }

    @Test("a second EXIF segment goes; the first Orientation wins")
    func twoExifSegments() throws {
        let exif = ExifBuilder(bigEndian: false)
        let input = try JPEGParts.with([JPEGParts.exif(exif.tiff(orientation: 8)), JPEGParts.exif(exif.tiff(orientation: 6, make: true))])
        #expect(MetadataStripper.orientation(input) == 8)
        let result = stripped(input)
        #expect(result.removed == [.exif])
        #expect(result.bytes == (try JPEGParts.with([JPEGParts.exif(exif.tiff(orientation: 8))])))
    }

    @Test("XMP, extended XMP, IPTC and comments go")
    func xmpIPTCComment() throws {
        let result = stripped(try JPEGParts.with([JPEGParts.xmp, JPEGParts.extendedXMP, JPEGParts.iptc, JPEGParts.comment]))
        #expect(result.removed == [.xmp, .iptc, .comment])
        #expect(result.bytes == (try JPEGParts.base()))
    }

    @Test("ICC profile chunks and Adobe APP14 are kept byte for byte")
    func iccKept() throws {
        let input = try JPEGParts.with([JPEGParts.icc1, JPEGParts.xmp, JPEGParts.icc2, JPEGParts.adobe])
        let result = stripped(input)
        #expect(result.removed == [.xmp])
        #expect(result.bytes == (try JPEGParts.with([JPEGParts.icc1, JPEGParts.icc2, JPEGParts.adobe])))
    }

    @Test("other application segments (MPF, JUMBF, unknown APP1, non-JFIF APP0) go")
    func otherApplicationSegments() throws {
        let avi1 = JPEGParts.segment(0xE0, Array("AVI1\0".utf8) + [0, 0])
        let result = stripped(try JPEGParts.with([JPEGParts.mpf, JPEGParts.jumbf, JPEGParts.otherAPP1, avi1]))
        #expect(result.removed == [.applicationSegment])
        #expect(result.bytes == (try JPEGParts.base()))
    }

    @Test("a JFIF thumbnail is cut to 0×0 (version and density kept) and a JFXX thumbnail goes")
    func embeddedThumbnails() throws {
        let base = try JPEGParts.base()
        let app0Length = Int(base[4]) << 8 | Int(base[5])
        let header = Array(base[6..<(6 + 12)]) // "JFIF\0", version, units, densities as the file has them
        let withThumbnail = JPEGParts.segment(0xE0, header + [2, 1] + [UInt8](repeating: 0x7F, count: 6))
        let jfxx = JPEGParts.segment(0xE0, Array("JFXX\0".utf8) + [0x13, 2, 1] + [UInt8](repeating: 0x55, count: 6))
        let input = Array(base[0..<2]) + withThumbnail + jfxx + Array(base[(4 + app0Length)...])
        let result = stripped(input)
        #expect(result.removed == [.thumbnail])
        #expect(result.bytes == base, "the JFIF segment is back to its 16 bytes, the JFXX one gone")
    }

    @Test("bytes after EOI go (a second image with its own EXIF)")
    func trailingJPEG() throws {
        let base = try JPEGParts.base()
        let second = try JPEGParts.with([JPEGParts.exif(ExifBuilder(bigEndian: false).tiff(orientation: 1, make: true, gps: true))])
        let result = stripped(base + second)
        #expect(result.removed == [.trailingData])
        #expect(result.bytes == base)
    }

    @Test("a comment between the scan and EOI goes; the scan data is copied")
    func commentAfterScan() throws {
        let base = try JPEGParts.base()
        #expect(Array(base.suffix(2)) == [0xFF, 0xD9])
        let input = Array(base.dropLast(2)) + JPEGParts.comment + [0xFF, 0xD9]
        let result = stripped(input)
        #expect(result.removed == [.comment])
        #expect(result.bytes == base)
    }

    @Test("JPEGs without metadata come back as they were", arguments: ["jpeg/testorig.jpg", "jpeg/testimgint.jpg", "jpeg/testimgari.jpg", "jpeg/monkey12.jpg"])
    func corpusJPEGUnchanged(file: String) throws {
        let input = try Fixtures.bytes(Fixtures.corpus.appendingPathComponent(file))
        let result = MetadataStripper.strip(input)
        #expect(result.removed.isEmpty)
        #expect(result.bytes == input)
        #expect(MetadataStripper.orientation(input) == nil)
    }

    @Test("the media samples come back as they were", arguments: ["landscape.jpg", "logo.png", "coupon.png"])
    func mediaUnchanged(file: String) throws {
        let input = try Fixtures.bytes(Fixtures.media.appendingPathComponent(file))
        let result = MetadataStripper.strip(input)
        #expect(result.removed.isEmpty)
        #expect(result.bytes == input)
    }

    // MARK: PNG

    let png = PNGBuilder.chunks(PNGBuilder.rgb(width: 4, height: 4, seed: 5))

    func pngWith(_ extra: [(type: String, data: [UInt8])]) -> [UInt8] {
        PNGBuilder.assemble([png[0]] + extra + png.dropFirst())
    }

    static let iccp: (type: String, data: [UInt8]) = ("iCCP", Array("sRGB\0\0".utf8) + PNGBuilder.zlibStored([1, 2, 3, 4]))
    static let text: (type: String, data: [UInt8]) = ("tEXt", Array("Author\0Jane Doe".utf8))
    static let ztxt: (type: String, data: [UInt8]) = ("zTXt", Array("Comment\0\0".utf8) + PNGBuilder.zlibStored(Array("12 Elm Street".utf8)))
    static let itxt: (type: String, data: [UInt8]) = ("iTXt", Array("XML:com.adobe.xmp\0\0\0\0\0<x:xmpmeta/>".utf8))
    static let time: (type: String, data: [UInt8]) = ("tIME", [0x07, 0xE9, 6, 1, 12, 0, 0])

    @Test("PNG text and time chunks go, iCCP stays, eXIf keeps Orientation with a valid CRC", arguments: [false, true])
    func pngMetadata(bigEndian: Bool) {
        let exif = ExifBuilder(bigEndian: bigEndian)
        let input = pngWith([Self.iccp, Self.text, ("eXIf", exif.tiff(orientation: 5, make: true, gps: true)), Self.ztxt, Self.itxt, Self.time])
        #expect(MetadataStripper.orientation(input) == 5)

        let result = stripped(input)
        #expect(result.removed == [.exifGPS, .exif, .pngText, .pngTime])
        #expect(result.bytes == pngWith([Self.iccp, ("eXIf", exif.tiff(orientation: 5))]))
        #expect(MetadataStripper.orientation(result.bytes) == 5)
        let chunks = pngChunksCheckingCRC(result.bytes)
        #expect(chunks.map { $0.type } == ["IHDR", "iCCP", "eXIf", "IDAT", "IEND"])
        #expect(chunks.allSatisfy { $0.crcOK })
        #expect(chunks[1].data == Self.iccp.data)
    }

    @Test("a PNG eXIf without Orientation is dropped; bytes after IEND go")
    func pngExifWithoutOrientationAndTrailer() {
        let clean = pngWith([Self.iccp])
        let input = pngWith([Self.iccp, ("eXIf", ExifBuilder(bigEndian: false).tiff(orientation: nil, make: true))]) + Array("PK\u{03}\u{04}appended".utf8)
        let result = stripped(input)
        #expect(result.removed == [.exif, .trailingData])
        #expect(result.bytes == clean)
    }

    @Test("PngSuite: text and time chunks are found, other files come back as they were")
    func pngSuite() throws {
        let dir = Fixtures.corpus.appendingPathComponent("pngsuite")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".png") }.sorted()
        #expect(files.count > 100)
        for file in files {
            let input = try Fixtures.bytes(dir.appendingPathComponent(file))
            let result = stripped(input)
            let expected: [StrippedMetadata] = switch file.prefix(4) {
            case "cm0n", "cm7n", "cm9n": [.pngTime]
            case "ct1n", "cten", "ctfn", "ctgn", "cthn", "ctjn", "ctzn": [.pngText]
            default: []
            }
            #expect(result.removed == expected, "\(file)")
            if expected.isEmpty { #expect(result.bytes == input, "\(file)") }
        }
    }

    // MARK: Malformed and hostile input

    @Test("a segment length past the end leaves the JPEG as it is")
    func jpegLengthPastEnd() throws {
        let base = try JPEGParts.base()
        let input = Array(base.prefix(20)) + [0xFF, 0xE1, 0xFF, 0xF0] + Array("Exif\0\0".utf8) + [0x49, 0x49]
        let result = MetadataStripper.strip(input)
        #expect(result.removed.isEmpty && result.bytes == input)
        #expect(MetadataStripper.orientation(input) == nil)
        // A marker where a segment must start, and a lone 0xFF at the end.
        for bad in [Array(base.prefix(20)) + [0x12, 0x34] + JPEGParts.comment, Array(base.prefix(20)) + JPEGParts.comment + [0xFF]] {
            let r = MetadataStripper.strip(bad)
            #expect(r.removed.isEmpty && r.bytes == bad)
        }
    }

    @Test("EXIF that cannot be read is dropped whole", arguments: 0..<6)
    func unreadableExif(kind: Int) throws {
        let exif = ExifBuilder(bigEndian: kind.isMultiple(of: 2))
        var tiff = exif.tiff(orientation: 6, make: true)
        switch kind {
        case 0: tiff.replaceSubrange(8..<10, with: exif.u16(0xFFFF))              // IFD0 count far past the block
        case 1: tiff.replaceSubrange(4..<8, with: exif.u32(0x7FFF_FFF0))           // IFD0 offset out of range
        case 2: tiff.replaceSubrange(0..<2, with: [0x58, 0x58])                     // no byte order
        case 3: tiff = Array(tiff.prefix(5))                                         // truncated header
        case 4: tiff = exif.tiff(orientation: 9)                                     // Orientation out of 1...8
        default: tiff = exif.tiff(orientation: 6, orientationType: 4)               // Orientation as a LONG
        }
        let input = try JPEGParts.with([JPEGParts.exif(tiff)])
        #expect(MetadataStripper.orientation(input) == nil)
        let result = stripped(input)
        #expect(result.removed == [.exif])
        #expect(result.bytes == (try JPEGParts.base()))
    }

    @Test("an IFD0 count over the limit inside a large PNG eXIf is dropped without reading it")
    func hugeIFDInPNG() {
        let exif = ExifBuilder(bigEndian: true)
        var tiff = exif.tiff(orientation: 6) + [UInt8](repeating: 0, count: 12 * 5_000)
        tiff.replaceSubrange(8..<10, with: exif.u16(5_000))
        let result = stripped(pngWith([("eXIf", tiff)]))
        #expect(result.removed == [.exif])
        #expect(result.bytes == pngWith([]))
    }

    @Test("a PNG whose chunk length runs past the end, or whose type is not letters, is left as it is")
    func pngMalformed() {
        let good = pngWith([Self.text])
        var long = good
        long[8 + 25 + 3] = 0xFF // tEXt's length (after the signature and IHDR) becomes huge
        long[8 + 25 + 0] = 0x7F
        var badType = good
        badType[8 + 25 + 4] = 0x31
        let cut = Array(good.prefix(good.count - 20))
        for input in [long, badType, cut] {
            let result = MetadataStripper.strip(input)
            #expect(result.removed.isEmpty && result.bytes == input)
        }
        #expect(MetadataStripper.orientation(long) == nil)
    }

    @Test("every truncation of a JPEG or PNG full of metadata is handled")
    func truncations() throws {
        let exif = ExifBuilder(bigEndian: false)
        let jpeg = try JPEGParts.with([JPEGParts.exif(exif.tiff(orientation: 6, make: true, gps: true)), JPEGParts.xmp, JPEGParts.icc1, JPEGParts.comment])
        let png = pngWith([Self.iccp, Self.text, ("eXIf", exif.tiff(orientation: 2, make: true, gps: true)), Self.time])
        for input in [jpeg, png] {
            for length in stride(from: 0, through: input.count, by: 3) {
                let cut = Array(input.prefix(length))
                let result = MetadataStripper.strip(cut)
                #expect(result.bytes.count <= cut.count)
                _ = MetadataStripper.orientation(cut)
            }
        }
    }

    @Test("long runs of fill bytes, stuffed bytes and non-images are handled")
    func hostileRuns() throws {
        let fill: [UInt8] = [0xFF, 0xD8] + [UInt8](repeating: 0xFF, count: 1 << 20) + [0xD9]
        let fillResult = MetadataStripper.strip(fill)
        #expect(fillResult.removed.isEmpty && fillResult.bytes == fill)

        let base = try JPEGParts.base()
        let sos = try #require(base.indices.first { base[$0] == 0xFF && base[$0 + 1] == 0xDA })
        let headerEnd = sos + 2 + (Int(base[sos + 2]) << 8 | Int(base[sos + 3]))
        var stuffed = Array(base[..<headerEnd])
        stuffed.reserveCapacity(stuffed.count + (1 << 20) + 3)
        for _ in 0..<(1 << 19) {
            stuffed.append(0xFF)
            stuffed.append(0x00)
        }
        stuffed += [0xFF, 0xD9, 0x00]
        let stuffedResult = MetadataStripper.strip(stuffed)
        #expect(stuffedResult.removed == [.trailingData])
        #expect(stuffedResult.bytes == Array(stuffed.dropLast()))

        for other in [[], [0xFF], [0xFF, 0xD8], Array("GIF89a".utf8), PNGBuilder.signature] as [[UInt8]] {
            let result = MetadataStripper.strip(other)
            #expect(result.removed.isEmpty && result.bytes == other)
            #expect(MetadataStripper.orientation(other) == nil)
        }
    }

    @Test("categories are spelled as the upload response spells them")
    func names() throws {
        let json = try JSONEncoder().encode(StrippedMetadata.allCases)
        #expect(String(decoding: json, as: UTF8.self) == #"["exif-gps","exif","xmp","iptc","comment","png-text","png-time","app-other","thumbnail","trailing-data"]"#)
    }
}
