import Foundation

/// An app's frequency cap (docs/api.md#frequency-caps-and-quiet-hours): at most `max` campaign
/// pushes to a user over any rolling `per` seconds. A campaign counts once per user, however
/// many of their devices it reaches.
public struct FrequencyCap: Sendable, Equatable {
    public var max: Int
    /// The window, in seconds.
    public var per: Int

    /// The most pushes a cap may allow (each counted send is kept until it leaves the window).
    public static let maxCount = 1_000
    /// The longest window: 30 days.
    public static let maxPeriod = 30 * 86_400

    /// A cap of `max` per `per` seconds; 400 for a count outside 1…1000 or a window outside 1 minute…30 days.
    public init(max: Int, per: Int) throws {
        guard (1...Self.maxCount).contains(max) else {
            throw CoreError(.invalid, "frequencyCap.max must be 1 to \(Self.maxCount), got \(max); leave frequencyCap out for no cap")
        }
        guard (60...Self.maxPeriod).contains(per) else {
            throw CoreError(.invalid, "frequencyCap.per must be 1m to 30d, got \(per) s")
        }
        self.max = max
        self.per = per
    }

    /// Parses `N/PERIOD` (`3/24h`, `serve --frequency-cap`).
    public init(_ text: String) throws {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let max = Int(parts[0]) else {
            throw CoreError(.invalid, "a frequency cap is N/PERIOD such as 3/24h or 10/7d, got '\(text.prefix(40))'")
        }
        try self.init(max: max, per: try Self.period(String(parts[1]), field: "frequencyCap.per"))
    }

    /// Seconds in a period written `90s`, `30m`, `24h` or `7d`; 400 naming `field` otherwise.
    public static func period(_ text: String, field: String) throws -> Int {
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        guard let unit = text.last.flatMap({ units[$0] }), text.count <= 8, let count = Int(text.dropLast()), count > 0,
              text.dropLast().allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw CoreError(.invalid, "\(field) must be a period such as 90s, 30m, 24h or 7d, got '\(text.prefix(20))'")
        }
        return count * unit
    }

    /// `3/24h`, as it was given (in the largest unit that divides it).
    public var description: String {
        let unit = [(86_400, "d"), (3_600, "h"), (60, "m")].first { per % $0.0 == 0 } ?? (1, "s")
        return "\(max)/\(per / unit.0)\(unit.1)"
    }
}

/// Quiet hours (docs/api.md#frequency-caps-and-quiet-hours): a daily window of wall-clock time in
/// the user's time zone in which campaign pushes are held to its end (`delay`) or not sent (`drop`).
public struct QuietHours: Sendable, Equatable {
    public enum Mode: String, Sendable, Codable, CaseIterable { case delay, drop }

    public var from: LocalTime
    public var to: LocalTime
    public var mode: Mode

    /// A window from `from` to `to` (past midnight when `to` is earlier); 400 when they are equal.
    public init(from: LocalTime, to: LocalTime, mode: Mode = .delay) throws {
        guard from != to else { throw CoreError(.invalid, "quietHours.from and quietHours.to are both \(from): give a window such as 22:00 to 08:00") }
        self.from = from
        self.to = to
        self.mode = mode
    }

    /// Reads `{"from":"22:00","to":"08:00","mode":"delay"}`; 400 naming `field.from`, `.to` or `.mode`.
    public init(json object: [String: Any], field: String) throws {
        if let extra = Set(object.keys).subtracting(["from", "to", "mode"]).sorted().first {
            throw CoreError(.invalid, "unknown field \"\(field).\(extra)\"; quiet hours are {\"from\":\"22:00\",\"to\":\"08:00\",\"mode\":\"delay\"|\"drop\"}")
        }
        func time(_ key: String) throws -> LocalTime {
            guard let text = object[key] as? String else { throw CoreError(.invalid, "\(field).\(key) must be a time HH:MM") }
            do { return try LocalTime(text) } catch { throw CoreError(.invalid, "\(field).\(key) must be HH:MM (00:00 to 23:59), got '\(text.prefix(20))'") }
        }
        var mode = Mode.delay
        if let raw = object["mode"] {
            guard let text = raw as? String, let known = Mode(rawValue: text) else { throw CoreError(.invalid, "\(field).mode must be \"delay\" or \"drop\"") }
            mode = known
        }
        do { try self.init(from: try time("from"), to: try time("to"), mode: mode) } catch let error as CoreError {
            throw CoreError(.invalid, error.message.replacingOccurrences(of: "quietHours", with: field))
        }
    }

    /// Parses `FROM-TO` or `FROM-TO/MODE` (`22:00-08:00/drop`, `serve --quiet-hours`).
    public init(_ text: String) throws {
        let (window, mode) = text.split(separator: "/").count == 2
            ? (String(text.split(separator: "/")[0]), String(text.split(separator: "/")[1])) : (text, "delay")
        let times = window.split(separator: "-", omittingEmptySubsequences: false)
        guard times.count == 2, let known = Mode(rawValue: mode) else {
            throw CoreError(.invalid, "quiet hours are FROM-TO[/delay|drop] such as 22:00-08:00 or 21:30-07:00/drop, got '\(text.prefix(40))'")
        }
        try self.init(from: try LocalTime(String(times[0])), to: try LocalTime(String(times[1])), mode: known)
    }

    /// The JSON form, `{"from","to","mode"}`.
    public var json: [String: String] { ["from": from.description, "to": to.description, "mode": mode.rawValue] }

    /// Stored in `users.quietHours`: `22:00-08:00/delay`.
    public var stored: String { "\(from)-\(to)/\(mode.rawValue)" }

    /// When `instant` falls in the window in `zone`, the instant the window ends: the first time
    /// after `instant` the zone's wall clock reads `to`; nil outside the window.
    ///
    /// Wall-clock time, daylight saving included: a 22:00–08:00 window on the night clocks go
    /// back lasts 11 hours, on the night they go forward 9. A `to` the clocks skip (02:30 on a
    /// spring-forward night) ends the window at the instant that reading would have had (03:30,
    /// as Python's `zoneinfo` reads fold 0); a `to` they show twice ends it the first time after
    /// `instant` (the second, for an instant in the repeated hour past the first).
    public func end(containing instant: Date, in zone: TimeZone) -> Date? {
        let local = Self.wallClock(instant, zone)
        let second = (local.hour ?? 0) * 3_600 + (local.minute ?? 0) * 60 + (local.second ?? 0)
        let (start, stop) = (from.hour * 3_600 + from.minute * 60, to.hour * 3_600 + to.minute * 60)
        let inside = start < stop ? (second >= start && second < stop) : (second >= start || second < stop)
        guard inside else { return nil }
        // Past midnight: a window entered this evening ends tomorrow morning.
        let days = start > stop && second >= start ? 1 : 0
        return Self.instant(year: local.year, month: local.month, day: local.day, plusDays: days, hour: to.hour, minute: to.minute, zone,
                            after: instant)
    }

    private static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// `instant`'s wall-clock reading in `zone`.
    private static func wallClock(_ instant: Date, _ zone: TimeZone) -> DateComponents {
        let shifted = instant.addingTimeInterval(Double(zone.secondsFromGMT(for: instant)))
        return utc.dateComponents([.year, .month, .day, .hour, .minute, .second], from: shifted)
    }

    /// The first instant after `after` whose wall-clock reading in `zone` is the given one,
    /// `plusDays` after the date (the last such instant when none is after); for a reading the
    /// zone skips, the instant it names at the offset before the skip.
    static func instant(year: Int?, month: Int?, day: Int?, plusDays: Int, hour: Int, minute: Int, _ zone: TimeZone,
                        after: Date = .distantPast) -> Date {
        let midnight = utc.date(from: DateComponents(year: year, month: month, day: day))!.timeIntervalSince1970
        let naive = midnight + Double(plusDays * 86_400 + hour * 3_600 + minute * 60)
        // The offsets in force half a day either side cover any transition near the reading.
        let bound = after.timeIntervalSince1970
        let before = zone.secondsFromGMT(for: Date(timeIntervalSince1970: naive - 43_200))
        let later = zone.secondsFromGMT(for: Date(timeIntervalSince1970: naive + 43_200))
        let fits = [before, later].map { naive - Double($0) }.filter { candidate in
            Double(zone.secondsFromGMT(for: Date(timeIntervalSince1970: candidate))) == naive - candidate
        }
        return Date(timeIntervalSince1970: fits.filter { $0 > bound }.min() ?? fits.max() ?? naive - Double(before))
    }
}

/// What an app limits (docs/api.md#frequency-caps-and-quiet-hours).
public struct AppLimits: Sendable, Equatable {
    public var frequencyCap: FrequencyCap?
    public var quietHours: QuietHours?

    /// Creates limits; none by default.
    public init(frequencyCap: FrequencyCap? = nil, quietHours: QuietHours? = nil) {
        self.frequencyCap = frequencyCap
        self.quietHours = quietHours
    }

    public var isEmpty: Bool { frequencyCap == nil && quietHours == nil }
}

/// What the outbox holds back (docs/api.md#frequency-caps-and-quiet-hours): each app's limits,
/// and who hears of every push held back (metrics).
public struct Guardrails: Sendable {
    /// What a push held back became.
    public enum Outcome: String, Sendable, CaseIterable {
        /// Over its app's frequency cap: not sent.
        case capped
        /// In quiet hours with `delay`: sent when they end.
        case delayed
        /// In quiet hours with `drop`: not sent.
        case dropped
    }

    /// Limits by app name.
    public var apps: [String: AppLimits]
    /// Told of each push held back, with its app.
    public var onHeldBack: (@Sendable (_ app: String, _ outcome: Outcome) -> Void)?

    /// Guardrails over `apps`.
    public init(apps: [String: AppLimits] = [:], onHeldBack: (@Sendable (String, Outcome) -> Void)? = nil) {
        self.apps = apps.filter { !$0.value.isEmpty }
        self.onHeldBack = onHeldBack
    }

    /// How long after quiet hours end the delayed pushes are spread: not all at one second.
    public static let spread: Double = 600

    /// The reason a delayed push's row carries while it waits.
    static let quietReason = "quiet hours"
}
