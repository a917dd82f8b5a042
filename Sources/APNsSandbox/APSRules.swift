import Foundation

/// What Apple refuses in a payload's `aps` dictionary (its "Generating a remote notification"
/// reference), for the APNs stand-in and for FCM's `apns.payload`: an `alert` that is neither a
/// string nor a dictionary of strings (its `…-loc-args` arrays of strings), a `badge` that is not a non-negative integer, a `sound`
/// that is neither a name nor a `{critical, name, volume}` dictionary, a `thread-id` or
/// `category` that is not a string, an `interruption-level` other than `passive`, `active`,
/// `time-sensitive` or `critical`, a `relevance-score` outside 0…1.
///
/// A Live Activity's push (`apns-push-type: liveactivity`, ActivityKit's "Starting and updating
/// Live Activities with ActivityKit push notifications") carries keys of its own (`liveActivityKeys`):
/// `refusal(_:liveActivity:)` lets its alert's title and body be localized dictionaries and its
/// `relevance-score` be any number (it orders a person's activities), and `liveActivityRefusal`
/// checks what such a push must carry.
///
/// The names here are Apple's, written out independently of RichPushCore's `APS` (the writer,
/// which this module does not import): a stand-in that borrowed the writer's spelling could not
/// notice it was wrong. Apple ignores a key it does not know, so a misspelt key is lost without a
/// refusal; `keys` and `alertKeys` let a test check every key `APS` writes is one Apple names.
public enum APSRules {
    /// The levels iOS knows.
    public static let interruptionLevels: Set<String> = ["passive", "active", "time-sensitive", "critical"]

    /// The keys of `aps` in Apple's "Generating a remote notification" reference (Live Activities'
    /// keys are in `liveActivityKeys`).
    public static let keys: Set<String> = [
        "alert", "badge", "sound", "thread-id", "category", "content-available", "mutable-content",
        "target-content-id", "interruption-level", "relevance-score", "filter-criteria",
    ]

    /// The keys of an `aps.alert` dictionary in the same reference.
    public static let alertKeys: Set<String> = [
        "title", "subtitle", "body", "launch-image", "title-loc-key", "title-loc-args",
        "subtitle-loc-key", "subtitle-loc-args", "loc-key", "loc-args",
    ]

    /// The keys of `aps` in a Live Activity's push (ActivityKit's "Starting and updating Live
    /// Activities with ActivityKit push notifications").
    public static let liveActivityKeys: Set<String> = [
        "timestamp", "event", "content-state", "attributes-type", "attributes", "stale-date", "dismissal-date",
        "relevance-score", "input-push-channel", "alert",
    ]

    /// The events of a Live Activity's push.
    public static let liveActivityEvents: Set<String> = ["start", "update", "end"]

    /// nil when `aps` is acceptable, else what is wrong. With `liveActivity` (a push of type
    /// `liveactivity`), the alert's `title` and `body` may be `{loc-key, loc-args}` dictionaries and
    /// `relevance-score` any number, as ActivityKit's pushes have them.
    public static func refusal(_ aps: [String: Any], liveActivity: Bool = false) -> String? {
        if let alert = aps["alert"], !(alert is String) {
            guard let fields = alert as? [String: Any] else { return "alert must be a string or a dictionary" }
            for key in ["title", "subtitle", "body", "launch-image", "title-loc-key", "subtitle-loc-key", "loc-key"] {
                guard let value = fields[key], !(value is String) else { continue }
                if liveActivity, key == "title" || key == "body", let localized = value as? [String: Any],
                   localized["loc-key"] is String, localized["loc-args"].map({ $0 is [String] }) ?? true {
                    continue
                }
                return "alert.\(key) must be a string"
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
            guard let number = score as? NSNumber, !isBool(number), liveActivity || (0...1).contains(number.doubleValue) else {
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

    /// nil when `aps` has what a Live Activity's push must carry, else what is wrong: `timestamp`
    /// (whole seconds) and an `event` of `start`, `update` or `end`; a start also carries
    /// `attributes-type` (a string), `attributes` and `content-state` (dictionaries), an update its
    /// `content-state`; an end's `content-state`, when it has one, is a dictionary too.
    /// `stale-date` and `dismissal-date` are whole seconds, `input-push-channel` a string.
    public static func liveActivityRefusal(_ aps: [String: Any]) -> String? {
        guard isWholeNumber(aps["timestamp"]) else { return "timestamp must be an integer (seconds since 1970)" }
        guard let event = aps["event"] as? String, liveActivityEvents.contains(event) else {
            return "event must be start, update or end"
        }
        if event == "start" {
            guard aps["attributes-type"] is String else { return "a start must carry attributes-type (a string)" }
            guard aps["attributes"] is [String: Any] else { return "a start must carry attributes (a dictionary)" }
        }
        if event != "end" || aps["content-state"] != nil {
            guard aps["content-state"] is [String: Any] else { return "content-state must be a dictionary" }
        }
        for key in ["stale-date", "dismissal-date"] where aps[key] != nil {
            guard isWholeNumber(aps[key]) else { return "\(key) must be an integer (seconds since 1970)" }
        }
        if let channel = aps["input-push-channel"], !(channel is String) { return "input-push-channel must be a string" }
        return nil
    }

    /// Whether `value` is a number without a fraction (and not `true`/`false`).
    static func isWholeNumber(_ value: Any?) -> Bool {
        guard let number = value as? NSNumber, !isBool(number) else { return false }
        return number.doubleValue == number.doubleValue.rounded() && abs(number.doubleValue) < 1e15
    }

    /// Whether JSONSerialization read `true`/`false` (Apple wants numbers).
    static func isBool(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c"
    }
}
