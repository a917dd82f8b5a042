extension CampaignTemplates {
    /// The most bytes a template text may have: twice the largest push any platform takes
    /// (Apple's and Google's 4 KB), room for sections that render nothing.
    static let maxTemplateBytes = 8192
    /// The most characters `#`, `^`, `$` and `<` in one template text: each may open a section
    /// (`{{#…}}`, `{{^…}}`, and inheritance's `{{$…}}` and `{{<…}}`), and swift-mustache's parser
    /// recurses once per level of sections. 4,000 nested ones overflowed a release build's stack
    /// and killed the server.
    static let maxSectionMarks = 100
    /// The most `(` in one template text: each may open a transform (`{{uppercased(user.name)}}`),
    /// and the parser recurses once per bracket, copying the list of transforms at each step:
    /// 20,000 of them in one tag held a core for 12 s.
    static let maxBrackets = 100
    /// Transforms that make a list of a user's fields (`enumerated`, `sorted` of a dictionary): a
    /// section over one renders once per field, and nested ones multiply (3^30 renders in 1.3 KB).
    /// Nothing else in a recipient's context is a list, so without them every section renders once.
    static let listTransforms = ["enumerated(", "sorted("]

    /// Why `text` is more than the parser and renderer are given, or nil when it is within the
    /// bounds above.
    ///
    /// The characters are counted in the whole text, not only in what looks like a tag: the
    /// parser reads grapheme clusters and a set-delimiter tag may make anything a tag, so a
    /// count of tags by any scanner but the parser's own could be led astray; every section and
    /// every transform needs one of these ASCII characters, so the whole text's count bounds them.
    static func tooComplex(_ text: String) -> String? {
        let bytes = text.utf8
        guard bytes.count <= maxTemplateBytes else {
            return "the template is \(bytes.count) bytes; at most \(maxTemplateBytes)"
        }
        var (marks, brackets) = (0, 0)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "#"), UInt8(ascii: "^"), UInt8(ascii: "$"), UInt8(ascii: "<"): marks += 1
            case UInt8(ascii: "("): brackets += 1
            default: break
            }
        }
        if marks > maxSectionMarks {
            return "the template has \(marks) section marks (#, ^, $ or <, each of which may open a section); at most \(maxSectionMarks)"
        }
        if brackets > maxBrackets {
            return "the template has \(brackets) opening brackets (each may begin a transform such as {{uppercased(user.name)}}); at most \(maxBrackets)"
        }
        if let transform = listTransforms.first(where: { text.contains($0) }) {
            return "the template uses \(transform)…), which lists a user's fields to repeat a section over; only single values are offered"
        }
        return nil
    }
}
