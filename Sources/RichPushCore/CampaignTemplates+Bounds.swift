extension CampaignTemplates {
    /// The most bytes a template text may have: twice the largest push any platform takes
    /// (Apple's and Google's 4 KB), room for sections that render nothing.
    static let maxTemplateBytes = 8192
    /// The most sections (`{{#…}}`, `{{^…}}`, and inheritance's `{{$…}}` and `{{<…}}`) in one text.
    /// swift-mustache's parser recurses once per level of sections: 4,000 nested ones overflowed
    /// a release build's stack and killed the server, from one `POST /api/notifications`.
    static let maxSections = 100
    /// The most opening brackets of transforms (`{{uppercase(user.name)}}`) in one text's tags. The
    /// parser recurses once per bracket and copies the list of transforms at each step: 20,000 of
    /// them in one tag held a core for 12 s.
    static let maxTransformBrackets = 100

    /// Why `text` is more than the parser is given, or nil when it is within the bounds above.
    ///
    /// Sections and brackets are counted in the tags between `{{` and `}}` (a section's sigil is
    /// the byte after `{{`, or after white space, counted too though the parser would refuse it).
    /// A set-delimiter tag (`{{=<% %>=}}`) makes any text a possible tag, so then every `#`, `^`,
    /// `$`, `<` and `(` of the text counts: an upper bound however the delimiters change.
    static func tooComplex(_ text: String) -> String? {
        let bytes = text.utf8
        guard bytes.count <= maxTemplateBytes else {
            return "the template is \(bytes.count) bytes; at most \(maxTemplateBytes)"
        }
        func isSigil(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: "#") || byte == UInt8(ascii: "^") || byte == UInt8(ascii: "$") || byte == UInt8(ascii: "<")
        }
        func isSpace(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")
        }
        var (sections, brackets, delimitersChange, inTag) = (0, 0, false, false)
        var previous: UInt8 = 0
        var afterOpening = false // the bytes since `{{` have been white space
        for byte in bytes {
            if byte == UInt8(ascii: "{") && previous == UInt8(ascii: "{") && !inTag {
                (inTag, afterOpening) = (true, true)
            } else if inTag {
                if afterOpening && !isSpace(byte) && byte != UInt8(ascii: "{") {
                    afterOpening = false
                    if isSigil(byte) { sections += 1 }
                    if byte == UInt8(ascii: "=") { delimitersChange = true }
                }
                if byte == UInt8(ascii: "(") { brackets += 1 }
                if byte == UInt8(ascii: "}") && previous == UInt8(ascii: "}") { inTag = false }
            }
            previous = byte
        }
        if delimitersChange {
            sections = bytes.count(where: isSigil)
            brackets = bytes.count(where: { $0 == UInt8(ascii: "(") })
        }
        if sections > maxSections {
            return "the template has \(sections) sections ({{#…}}, {{^…}}, {{$…}}, {{<…}}\(delimitersChange ? ", or characters that may open one once the delimiters change" : "")); at most \(maxSections)"
        }
        if brackets > maxTransformBrackets {
            return "the template's tags have \(brackets) opening brackets (transforms such as {{uppercase(user.name)}}); at most \(maxTransformBrackets)"
        }
        return nil
    }
}
