import Foundation

/// What Apple refuses in a payload's `aps` dictionary (its "Generating a remote notification"
/// reference), for the APNs stand-in and for FCM's `apns.payload`: an `alert` that is neither a
/// string nor a dictionary of strings (its `…-loc-args` arrays of strings), a `badge` that is not a non-negative integer, a `sound`
/// that is neither a name nor a `{critical, name, volume}` dictionary, a `thread-id` or
/// `category` that is not a string, an `interruption-level` other than `passive`, `active`,
/// `time-sensitive` or `critical`, a `relevance-score` outside 0…1.
///
/// The names here are Apple's, written out independently of RichPushCore's `APS` (the writer,
/// which this module does not import): a stand-in that borrowed the writer's spelling could not
/// notice it was wrong. Apple ignores a key it does not know, so a misspelt key is lost without a
/// refusal; `keys` and `alertKeys` let a test check every key `APS` writes is one Apple names.
public enum APSRules {
    /// The levels iOS knows.
    public static let interruptionLevels: Set<String> = ["passive", "active", "time-sensitive", "critical"]

    /// The keys of `aps` in Apple's "Generating a remote notification" reference (Live Activities'
    /// keys are not among them yet).
    public static let keys: Set<String> = [
        "alert", "badge", "sound", "thread-id", "category", "content-available", "mutable-content",
        "target-content-id", "interruption-level", "relevance-score", "filter-criteria",
    ]

    /// The keys of an `aps.alert` dictionary in the same reference.
    public static let alertKeys: Set<String> = [
        "title", "subtitle", "body", "launch-image", "title-loc-key", "title-loc-args",
        "subtitle-loc-key", "subtitle-loc-args", "loc-key", "loc-args",
    ]

    /// nil when `aps` is acceptable, else what is wrong.
    public static func refusal(_ aps: [String: Any]) -> String? {
        if let alert = aps["alert"], !(alert is String) {
            guard let fields = alert as? [String: Any] else { return "alert must be a string or a dictionary" }
            for key in ["title", "subtitle", "body", "launch-image", "title-loc-key", "subtitle-loc-key", "loc-key"] {
                if let value = fields[key], !(value is String) { return "alert.\(key) must be a string" }
            }
            for key in ["title-loc-args", "subtitle-loc-args", "loc-args"] {
                if let value = fields[key], !(value is [String]) { return "alert.\(key) must be an array of strings" }
            }
        }
        if let badge = aps["badge"] {
            guard let number = badge as? NSNumber, !isBool(number), number.doubleValue == number.doubleValue.rounded(), number.int64Value >= 0 else {
                return "badge must be a non-negative integer"
            }
        }
        if let sound = aps["sound"], !(sound is String) {
            guard let fields = sound as? [String: Any], fields["name"] is String else { return "sound must be a name or {critical, name, volume}" }
            if let volume = fields["volume"] {
                guard let number = volume as? NSNumber, (0...1).contains(number.doubleValue) else { return "sound.volume must be between 0 and 1" }
            }
        }
        for key in ["thread-id", "category", "target-content-id"] {
            if let value = aps[key], !(value is String) { return "\(key) must be a string" }
        }
        if let level = aps["interruption-level"] {
            guard let text = level as? String, interruptionLevels.contains(text) else {
                return "interruption-level must be passive, active, time-sensitive or critical (got \(level))"
            }
        }
        if let score = aps["relevance-score"] {
            guard let number = score as? NSNumber, !isBool(number), (0...1).contains(number.doubleValue) else {
                return "relevance-score must be a number between 0 and 1 (got \(score))"
            }
        }
        for key in ["content-available", "mutable-content"] {
            if let value = aps[key] {
                guard let number = value as? NSNumber, !isBool(number), number.intValue == 1 || number.intValue == 0 else { return "\(key) must be 1" }
            }
        }
        return nil
    }

    /// Whether JSONSerialization read `true`/`false` (Apple wants numbers).
    static func isBool(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c"
    }
}
