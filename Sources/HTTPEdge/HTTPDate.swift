import CoreMetrics
import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import ServiceLifecycle

/// The `Date` line of a response head, encoded once per second.
public enum HTTPDate {
    /// The second (Unix time) and its `Date` line.
    public struct Now: Sendable {
        /// Unix time.
        public var second: Int
        /// `Date: <now>` and the blank line that ends a head.
        public var line: ByteBuffer
        /// The header's value.
        public var value: String
    }

    private static let cache = NIOLockedValueBox(Now(second: 0, line: ByteBuffer(), value: ""))
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Date: <now>` and the blank line that ends a head.
    public static func line() -> ByteBuffer { now().line }

    /// The value of a `Date` header now.
    public static func value() -> String { now().value }

    /// The current second, with its line and value.
    public static func now() -> Now {
        var seconds = time(nil)
        return cache.withLockedValue { cache in
            if cache.second == seconds { return cache }
            var t = tm()
            gmtime_r(&seconds, &t)
            let value = String(format: "%@, %02d %@ %04d %02d:%02d:%02d GMT", days[Int(t.tm_wday)], t.tm_mday, months[Int(t.tm_mon)],
                               Int(t.tm_year) + 1900, t.tm_hour, t.tm_min, t.tm_sec)
            let now = Now(second: seconds, line: ByteBuffer(string: "Date: \(value)\r\n\r\n"), value: value)
            // A thread that read the clock just before another stored the next second does not turn it back.
            if seconds > cache.second { cache = now }
            return now
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
