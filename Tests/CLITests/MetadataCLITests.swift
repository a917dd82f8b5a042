import Foundation
import RichPushTestSupport
import Testing

/// Photos as phones make them, with GPS in their EXIF, through `richpush media add` (docs/configuration.md#the-media-store).
/// Pillow, which nobody here wrote, makes them and reads back what was stored.
@Suite("Metadata stripped on ingest (SPEC §16)")
struct MetadataCLITests {
    /// Writes `photo.jpg` (EXIF with GPS, serial and Orientation 6, an ICC profile, a comment
    /// and an XMP packet) and `photo.png` (eXIf with GPS and Orientation 6, tEXt, iTXt, tIME, an
    /// ICC profile) into `dir`.
    static let makePhotos = #"""
    import io, sys
    from PIL import Image, ImageCms, PngImagePlugin
    dir = sys.argv[1]
    im = Image.effect_noise((96, 64), 64).convert("RGB")
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    exif = Image.Exif()
    exif[0x0112] = 6
    exif[0x010F] = "Phone Maker"
    exif[0xA431] = "SERIAL-0042"
    gps = exif.get_ifd(0x8825)
    gps.update({1: "N", 2: (48.0, 51.0, 29.0), 3: "E", 4: (2.0, 17.0, 40.0)})
    jpeg = io.BytesIO()
    im.save(jpeg, "JPEG", quality=90, exif=exif, icc_profile=icc, comment=b"taken at home")
    data = jpeg.getvalue()
    xmp = b"http://ns.adobe.com/xap/1.0/\x00<x:xmpmeta><rdf:Description exif:GPSLatitude='48,51N'/></x:xmpmeta>"
    data = data[:2] + b"\xff\xe1" + (len(xmp) + 2).to_bytes(2, "big") + xmp + data[2:]
    open(dir + "/photo.jpg", "wb").write(data)
    info = PngImagePlugin.PngInfo()
    info.add_text("Location", "48.85N 2.29E")
    info.add_itxt("Author", "someone", zip=True)
    im.save(dir + "/photo.png", "PNG", exif=exif, icc_profile=icc, pnginfo=info)
    png = open(dir + "/photo.png", "rb").read()
    # Pillow writes no tIME: add one before IEND (CRC over type and data).
    import zlib, struct
    body = b"tIME" + struct.pack(">HBBBBB", 2026, 11, 23, 6, 0, 0)
    chunk = struct.pack(">I", 7) + body + struct.pack(">I", zlib.crc32(body))
    open(dir + "/photo.png", "wb").write(png[:-12] + chunk + png[-12:])
    """#

    /// Compares a stored blob with its original: same pixels, Orientation 6 alone, no GPS, no
    /// text, ICC kept; prints "ok" or what differs.
    static let compare = #"""
    import sys
    from PIL import Image
    original, stored = sys.argv[1], sys.argv[2]
    a, b = Image.open(original), Image.open(stored)
    raw = open(stored, "rb").read()
    problems = []
    if a.tobytes() != b.tobytes(): problems.append("pixels differ")
    exif = b.getexif()
    if dict(exif) != {0x0112: 6}: problems.append("exif is %r" % dict(exif))
    if exif.get_ifd(0x8825): problems.append("GPS kept")
    if b.info.get("icc_profile") != a.info.get("icc_profile"): problems.append("ICC profile changed")
    for needle in (b"SERIAL-0042", b"Phone Maker", b"taken at home", b"GPSLatitude", b"48.85N", b"someone", b"tIME", b"tEXt", b"iTXt", b"zTXt"):
        if needle in raw: problems.append("%r kept" % needle)
    print("ok" if not problems else "; ".join(problems))
    """#

    @Test("media add strips GPS, serials, XMP, comments and text losslessly, keeps Orientation and ICC, and says what it removed; --keep-metadata stores the bytes as they came")
    func stripsPhotos() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let made = try await python(Self.makePhotos.replacingOccurrences(of: "sys.argv[1]", with: "'\(dir.path)'"))
        try #require(made.status == 0, "\(made.output)")
        let data = dir.appendingPathComponent("data").path
        let jpeg = dir.appendingPathComponent("photo.jpg").path, png = dir.appendingPathComponent("photo.png").path

        let r = try await CLI.run(["media", "add", "--data", data, "--json", jpeg, png])
        #expect(r.status == 0, "\(r.stderr)")
        let objects = try r.lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        try #require(objects.count == 2)
        #expect(objects[0]["stripped"] as? [String] == ["exif-gps", "exif", "xmp", "comment"], "\(objects[0])")
        #expect(objects[1]["stripped"] as? [String] == ["exif-gps", "exif", "png-text", "png-time"], "\(objects[1])")
        for (object, original) in zip(objects, [jpeg, png]) {
            let sha = try #require(object["sha256"] as? String)
            let blob = "\(data)/blobs/sha256/\(sha.prefix(2))/\(sha)"
            let script = Self.compare.replacingOccurrences(of: "sys.argv[1]", with: "'\(original)'").replacingOccurrences(of: "sys.argv[2]", with: "'\(blob)'")
            let compared = try await python(script)
            #expect(compared.output.trimmingCharacters(in: .whitespacesAndNewlines) == "ok", "\(original): \(compared.output)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: blob)).count < (try Data(contentsOf: URL(fileURLWithPath: original)).count))
        }

        // The same upload again: the same id, already stored. The stored bytes again: nothing to strip.
        let again = try await CLI.run(["media", "add", "--data", data, "--json", jpeg])
        let second = try #require(try JSONSerialization.jsonObject(with: Data(again.lines.first!.utf8)) as? [String: Any])
        #expect(second["sha256"] as? String == objects[0]["sha256"] as? String && second["status"] as? String == "exists")
        let sha = try #require(objects[0]["sha256"] as? String)
        let stored = try await CLI.run(["media", "add", "--data", data, "--json", "\(data)/blobs/sha256/\(sha.prefix(2))/\(sha)"])
        let third = try #require(try JSONSerialization.jsonObject(with: Data(stored.lines.first!.utf8)) as? [String: Any])
        #expect(third["sha256"] as? String == sha && third["stripped"] as? [String] == [])

        // --keep-metadata: the file's own SHA-256, nothing stripped.
        let kept = try await CLI.run(["media", "add", "--data", dir.appendingPathComponent("kept").path, "--json", "--keep-metadata", jpeg])
        let keptObject = try #require(try JSONSerialization.jsonObject(with: Data(kept.lines.first!.utf8)) as? [String: Any])
        let fileHash = try await python("import hashlib; print(hashlib.sha256(open('\(jpeg)', 'rb').read()).hexdigest())")
        #expect(keptObject["sha256"] as? String == fileHash.output.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(keptObject["stripped"] as? [String] == [])
    }

    /// Walks each stored file: no text, time or EXIF beyond Orientation in a PNG, no XMP, IPTC,
    /// comment or full EXIF in a JPEG; and Pillow decodes it to the same pixels as its original.
    static let compareCorpus = #"""
    import json, struct, sys
    from PIL import Image
    pairs = json.load(open(sys.argv[1]))
    compared, problems = 0, []
    for original, stored in pairs:
        raw = open(stored, "rb").read()
        if raw.startswith(b"\x89PNG"):
            i = 8
            while i + 8 <= len(raw):
                n, kind = struct.unpack(">I4s", raw[i:i + 8])
                if kind in (b"tEXt", b"zTXt", b"iTXt", b"tIME") or (kind == b"eXIf" and n > 26): problems.append("%s: %s kept" % (original, kind))
                i += 12 + n
        else:
            i = 2
            while i + 4 <= len(raw) and raw[i] == 0xFF and raw[i + 1] != 0xDA:
                marker, n = raw[i + 1], struct.unpack(">H", raw[i + 2:i + 4])[0]
                body = raw[i + 4:i + 2 + n]
                if marker in (0xFE, 0xED) or (marker == 0xE1 and (body.startswith(b"http://ns.adobe.com") or (body.startswith(b"Exif") and n > 2 + 6 + 26))):
                    problems.append("%s: marker %02x kept" % (original, marker))
                i += 2 + n
        try:
            a, b = Image.open(original), Image.open(stored)
            a.load()
        except Exception:
            continue  # a format Pillow does not read; libpng/libjpeg validated it
        if a.tobytes() != b.tobytes(): problems.append("%s: pixels differ" % original)
        compared += 1
    print(json.dumps({"compared": compared, "problems": problems}))
    """#

    @Test("every accepted corpus file is stored without text, time, comments or EXIF beyond Orientation, and decodes to the same pixels")
    func corpus() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let expected = try String(contentsOf: Fixtures.corpus.appendingPathComponent("EXPECTED.tsv"), encoding: .utf8)
        let files = expected.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
            .filter { !$0[0].hasPrefix("#") && $0.count > 1 && $0[1] == "accept" }.map { Fixtures.corpus.appendingPathComponent($0[0]).path }
        let r = try await CLI.run(["media", "add", "--data", data, "--json"] + files)
        #expect(r.status == 0, "\(r.stderr)")
        var pairs: [[String]] = []
        var stripped = 0
        for line in r.lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let sha = try #require(object["sha256"] as? String, "\(object)")
            pairs.append([try #require(object["path"] as? String), "\(data)/blobs/sha256/\(sha.prefix(2))/\(sha)"])
            if (object["stripped"] as? [String])?.isEmpty == false { stripped += 1 }
        }
        #expect(pairs.count == files.count)
        #expect(stripped >= 10) // PngSuite's text (ct*) and time (cm*) files at least
        let list = dir.appendingPathComponent("pairs.json")
        try JSONSerialization.data(withJSONObject: pairs).write(to: list)
        let checked = try await python(Self.compareCorpus.replacingOccurrences(of: "sys.argv[1]", with: "'\(list.path)'"))
        let result = try #require(try JSONSerialization.jsonObject(with: Data(checked.output.utf8)) as? [String: Any], "\(checked.output)")
        #expect(result["problems"] as? [String] == [])
        #expect((result["compared"] as? Int ?? 0) >= files.count * 9 / 10, "\(result)")
    }
}
