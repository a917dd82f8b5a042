import Foundation

/// RFC 3339's `date-time` (§5.6), read strictly: `YYYY-MM-DDTHH:MM:SS`, an optional fraction of a
/// second, then `Z` or an offset `±HH:MM`; `T` and `Z` in either case (§5.6's note), ASCII digits
/// only, a day the month has, nothing before or after. It is the `format: date-time` that
/// `/openapi.json` gives `sendAt`, and what JSON Schema validators check it with.
///
/// Foundation's `ISO8601DateFormatter` read this before, and took more than RFC 3339 does: an
/// offset without its colon (`+0000`) or its minutes (`+05`), anything after the zone
/// (`…Zjunk`), a space before it, `24:00:00`, the 30th of February (as the 2nd of March), an
/// offset of `+24:00` and digits of other scripts (`٢٠٢٦`), so a `sendAt` a client's validator
/// would call malformed was scheduled for a time other than the client meant; and 35 or more
/// digits of fraction killed the process (SIGFPE in ICU).
///
/// A leap second (`:60`) is refused, as `rfc3339-validator` refuses it: a time of day on a
/// clock that has none is not worth the surprise of reading it as the next minute's first.
public enum RFC3339 {
    /// The longest text read, in bytes: room for 43 digits of fraction with `Z`, 37 with an offset.
    public static let maxLength = 64

    /// The instant `text` names, or nil when it is not an RFC 3339 date-time.
    public static func date(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { read($0) }
    }

    private static func read(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        guard bytes.count >= 20, bytes.count <= maxLength else { return nil }
        var index = 0
        func number(_ width: Int) -> Int? {
            guard index + width <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + width] {
                let digit = byte &- UInt8(ascii: "0")
                guard digit <= 9 else { return nil }
                value = value * 10 + Int(digit)
            }
            index += width
            return value
        }
        func skip(_ allowed: UInt8...) -> Bool {
            guard index < bytes.count, allowed.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), year >= 1, skip(UInt8(ascii: "-")),
              let month = number(2), (1...12).contains(month), skip(UInt8(ascii: "-")),
              let day = number(2), day >= 1, day <= days(inMonth: month, of: year), skip(UInt8(ascii: "T"), UInt8(ascii: "t")),
              let hour = number(2), hour <= 23, skip(UInt8(ascii: ":")),
              let minute = number(2), minute <= 59, skip(UInt8(ascii: ":")),
              let second = number(2), second <= 59 else { return nil }
        var fraction = 0.0
        if skip(UInt8(ascii: ".")) {
            let start = index
            var scale = 0.1
            while index < bytes.count, case let digit = bytes[index] &- UInt8(ascii: "0"), digit <= 9 {
                fraction += Double(digit) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offset = 0
        if !skip(UInt8(ascii: "Z"), UInt8(ascii: "z")) {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") else { return nil }
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let hours = number(2), hours <= 23, skip(UInt8(ascii: ":")), let minutes = number(2), minutes <= 59 else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        }
        guard index == bytes.count else { return nil }
        let seconds = daysSince1970(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// The days of `month` (1–12) in `year` of the proleptic Gregorian calendar.
    static func days(inMonth month: Int, of year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to the date (negative before it), proleptic Gregorian (Howard
    /// Hinnant's `days_from_civil`).
    static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let year = month <= 2 ? year - 1 : year
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
