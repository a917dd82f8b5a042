import Foundation

/// JSON values compared as a reader sees them, for tests that hold two encodings of one thing.
public enum JSONValues {
    /// Whether two values parsed from JSON read the same: objects key by key, arrays item by item, strings exactly,
    /// numbers by value (a parsed `1` and a `Double` 1.0 agree).
    public static func same(_ a: Any, _ b: Any) -> Bool {
        if let a = a as? [String: Any] {
            guard let b = b as? [String: Any], a.count == b.count else { return false }
            for (key, value) in a {
                guard let other = b[key], same(value, other) else { return false }
            }
            return true
        }
        if let a = a as? [Any] {
            guard let b = b as? [Any], a.count == b.count else { return false }
            return zip(a, b).allSatisfy { same($0, $1) }
        }
        if let a = a as? String { return (b as? String) == a }
        if let a = number(a) { return number(b) == a }
        return false
    }

    /// A JSON number as a `Double`; nil for anything else.
    public static func number(_ value: Any) -> Double? {
        if value is String { return nil }
        if let double = value as? Double { return double }
        if let int = value as? Int { return Double(int) }
        return nil
    }
}
