/// The sortable form of an app version (docs/api.md#segments), kept beside each device's
/// `appVersion` (`registrations.appVersionKey`) so that both engines compare versions as text:
/// `2.10` after `2.9`, `2.1` equal to `2.1.0`.
///
/// A version is read as the numbers separated by dots at its start, after an optional `v`:
/// `2.4.1`, `v10.0`, `3.2-beta` (as `3.2`), `1.0 (45)` (as `1.0`). Each number becomes 9 digits
/// (leading zeros added), joined with `.`, and zeros at the end are dropped (missing components are
/// 0), keeping at least one: `2.10` → `000000002.000000010`, `2.1.0` → `000000002.000000001`, `0`
/// → `000000000`. Byte order of keys is then version order: components have one width, and a key
/// that is another's prefix is the smaller version (what follows it in the longer one is not all
/// zeros). A version that does not start with a number, or has a component of more than 9
/// digits, has no key: no version comparison matches it.
public enum AppVersionKey {
    /// Digits per component.
    static let width = 9

    /// The key of a version a device reported; nil when it is not comparable.
    public static func of(_ version: String) -> String? {
        var text = Substring(version)
        if text.first == "v" || text.first == "V" { text = text.dropFirst() }
        var components: [Substring] = []
        var rest = text
        while true {
            let digits = rest.prefix { $0.isASCII && $0.isNumber }
            guard !digits.isEmpty else { break }
            components.append(digits)
            rest = rest.dropFirst(digits.count)
            // Another component only when a digit follows the dot: "2.1." and "2.1.x" are 2.1.
            guard rest.first == ".", let next = rest.dropFirst().first, next.isASCII, next.isNumber else { break }
            rest = rest.dropFirst()
        }
        guard !components.isEmpty else { return nil }
        var padded: [String] = []
        for component in components {
            let significant = component.drop { $0 == "0" }
            guard significant.count <= width else { return nil }
            padded.append(String(repeating: "0", count: width - significant.count) + significant)
        }
        let zero = String(repeating: "0", count: width)
        while padded.count > 1, padded.last == zero { padded.removeLast() }
        return padded.joined(separator: ".")
    }

    /// The key of a version a filter names, which must be only numbers separated by dots (an
    /// optional `v` first); nil otherwise.
    public static func ofFilterValue(_ version: String) -> String? {
        var text = Substring(version)
        if text.first == "v" || text.first == "V" { text = text.dropFirst() }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }) else { return nil }
        return of(version)
    }
}
