import Foundation
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

/// The values the stores check, as patterns (`RegistrationStore.normalizeHandle` and `update`,
/// `UserStore.validateName`, `MediaIndex.validateName`, `TagExpression`).
enum ValuePattern {
    /// An APNs device token in hex (the store also takes spaces and angle brackets, as iOS prints tokens).
    static let deviceToken = "^([0-9a-fA-F]{2}){8,200}$"
    /// An FCM registration token.
    static let fcmToken = "^[A-Za-z0-9_:.-]{20,4096}$"
    static let tag = "^[A-Za-z0-9_@#.:-]{1,120}$"
    static let userName = "^[A-Za-z0-9_@#.-]{1,64}$"
    /// No control characters; 64 hex digits would read as a media id (at most 255 UTF-8 bytes).
    static let mediaName = "^[^\\u0000-\\u001F\\u007F-\\u009F]{1,255}$"
    /// Up to six tags joined by && or ||, each maybe negated: a subset of Notification Hubs' grammar
    /// (parentheses and longer || lists are accepted too) that is always within its limits.
    static let tagExpression = "^!?[A-Za-z0-9_@#.:-]{1,120}( (&&|\\|\\|) !?[A-Za-z0-9_@#.:-]{1,120}){0,5}$"
    /// A user attribute's key (`UserAttributes.validate(key:)`).
    static let attributeKey = UserAttributes.keyPattern
    /// A topic's name (`TopicStore.validateName`), as it stands in a URL path.
    static let topic = TopicStore.namePattern
    /// A segment's name (`SegmentStore.validateName`).
    static let segmentName = SegmentStore.namePattern
    /// An app or OS version a device reports (`RegistrationStore.validateVersion`): no control
    /// characters; at most 64 bytes, which the pattern can only approach (64 characters).
    static let version = "^[^\\u0000-\\u001F\\u007F-\\u009F]{1,64}$"

    /// A Live Activity's push-to-start or update token in hex (`LiveActivityStore.checkedToken`).
    static let activityToken = "^([0-9a-fA-F]{2}){32,255}$"
    /// An ActivityKit attributes type's name (`LiveActivityStore.checkedType`).
    static let activityType = "^[A-Za-z0-9_.]{1,100}$"
    /// An RFC 3339 time.
    static let rfc3339 = "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$"

    static func string(_ pattern: String) -> JSONSchema { JSONSchema.string.with { $0.pattern = pattern } }
}
