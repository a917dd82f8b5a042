import Foundation

extension RichPushMessage {
    /// A Live Activity's push as Android and browsers get it (SPEC §25): which activity, what
    /// happened to it, and its content state.
    ///
    /// FCM's data map holds strings only, so there `contentState` is the JSON text of an object; a
    /// Web Push message carries the object itself. Either way it is kept here as the same compact
    /// JSON text (keys sorted), which `contentState(as:)` decodes into the app's own type, e.g. its
    /// `ActivityAttributes.ContentState`.
    public struct LiveActivity: Sendable, Equatable {
        /// What happened to the activity.
        public enum Event: String, Sendable, Equatable {
            /// It began: show it (the server alerts with it).
            case start
            /// Its content state changed: show the new one in place of the old, quietly unless the push alerts.
            case update
            /// It is over: show its final content state until `dismissAt`, or take it away.
            case end
        }

        /// The longest activity id read, in bytes.
        public static let maxIDBytes = 128

        /// The server's id of the activity (`richpushActivity`, `la_…`): what
        /// `RichPushClient.reportActivityToken(activity:token:registration:timeout:)` names, and the
        /// tag (Android) or Topic (Web Push) its notifications replace each other under.
        public var id: String
        /// Whether it started, changed or ended.
        public var event: Event
        /// The content state, as compact JSON text of an object with its keys sorted; nil when the
        /// push carried none.
        public var contentStateJSON: Data?
        /// When an ended activity should leave the screen (`dismissAt`: RFC 3339, or seconds since
        /// 1970); nil when the push does not say, or says it in another form.
        public var dismissAt: Date?

        /// Creates an activity's push from its parts, for tests and for apps that keep their own.
        public init(id: String, event: Event, contentStateJSON: Data? = nil, dismissAt: Date? = nil) {
            self.id = id
            self.event = event
            self.contentStateJSON = contentStateJSON
            self.dismissAt = dismissAt
        }

        /// The content state decoded as `type`, e.g. `DeliveryAttributes.ContentState.self`.
        /// - Throws: `RichPushClientError` of kind `.notRichPush` when the push carried no content
        ///   state or it does not decode as `type` (the decoder's words say where).
        public func contentState<State: Decodable>(as type: State.Type, decoder: JSONDecoder = JSONDecoder()) throws -> State {
            guard let contentStateJSON else {
                throw RichPushClientError.notRichPush("Live Activity \(id)'s \(event.rawValue) push carried no contentState")
            }
            do {
                return try decoder.decode(type, from: contentStateJSON)
            } catch {
                throw RichPushClientError.notRichPush("contentState does not decode as \(State.self): \(error)")
            }
        }

        /// Reads `richpushActivity` (`value`) and the fields beside it, `event`, `contentState` and `dismissAt`.
        init(id value: Any, fields: [AnyHashable: Any]) throws {
            guard let id = value as? String else { throw RichPushClientError.notRichPush("richpushActivity is not a string") }
            guard !id.isEmpty, id.utf8.count <= Self.maxIDBytes, id.utf8.allSatisfy(Wire.isUnreserved) else {
                throw RichPushClientError.notRichPush("richpushActivity \"\(id.prefix(40))\" is not an activity id")
            }
            let rawEvent = RichPushMessage.present(fields["event"])
            guard let event = (rawEvent as? String).flatMap(Event.init(rawValue:)) else {
                let seen = rawEvent.map { "\(String(describing: $0).prefix(40))" } ?? "missing"
                throw RichPushClientError.notRichPush("the Live Activity's event is \(seen), not start, update or end")
            }
            self.init(id: id, event: event, contentStateJSON: try Self.compactObject(fields["contentState"]),
                      dismissAt: Self.date(RichPushMessage.present(fields["dismissAt"])))
        }

        /// The content state's compact JSON text, from an object or (FCM) its JSON text; nil when absent.
        private static func compactObject(_ value: Any?) throws -> Data? {
            guard let value = RichPushMessage.present(value) else { return nil }
            let object: Any?
            if let text = value as? String {
                object = try? JSONSerialization.jsonObject(with: Data(text.utf8))
            } else {
                object = RichPushMessage.dictionary(value)
            }
            guard let fields = object as? [String: Any], JSONSerialization.isValidJSONObject(fields),
                  let compact = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) else {
                throw RichPushClientError.notRichPush("the Live Activity's contentState is not a JSON object")
            }
            return compact
        }

        /// A time as RFC 3339 text (with or without fractional seconds), or seconds since 1970 as
        /// a number or (FCM) its decimal text; nil for anything else.
        private static func date(_ value: Any?) -> Date? {
            if let text = value as? String {
                if let seconds = Double(text) { return seconds.isFinite ? Date(timeIntervalSince1970: seconds) : nil }
                return Wire.date(rfc3339: text)
            }
            // JSON's true and false read as NSNumber too: a time is a number, not a flag.
            guard let number = value as? NSNumber, !Wire.isBool(number), number.doubleValue.isFinite else { return nil }
            return Date(timeIntervalSince1970: number.doubleValue)
        }
    }
}
