import Foundation
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

extension PushOptions {
    /// A request's `options` with its `badge` beside them (the API keeps the badge out of `options`).
    static func with(_ options: PushOptions?, badge: Badge?) -> PushOptions {
        var all = options ?? PushOptions()
        all.badge = badge
        return all
    }
}

extension PushOptions.InterruptionLevel: SchemaEnumeration {}
extension PushOptions.Priority: SchemaEnumeration {}

extension PushOptions.Badge: DeclaredSchema {
    public static var declaredSchema: JSONSchema {
        JSONSchema.oneOf([JSONSchema.string.with { $0.enumeration = ["unread"] },
                          JSONSchema.integer.with { $0.minimum = 0; $0.maximum = Int64(PushOptions.maxBadge) }]).with {
            $0.description = "The app icon's badge: \"unread\" (the recipient's unread count at send time) or a number."
        }
    }
    public static var schemaExample: PushOptions.Badge { .unread }
}

extension PushOptions: SchemaRefining {
    /// The platforms' limits, as `validate` enforces them (docs/api.md#options-badges-and-paced-sends).
    public static func refine(_ schema: inout JSONSchema) {
        for field in ["threadId", "category", "androidChannelId"] { schema.properties?[field]?.refineIdentifier() }
        schema.properties?["subtitle"]?.refineText(minLength: 1)
        schema.properties?["sound"]?.refineText(minLength: 0)
        schema.properties?["relevanceScore"]?.minimum = 0
        schema.properties?["relevanceScore"]?.maximum = 1
        schema.properties?["expiresIn"]?.minimum = 0
        schema.properties?["expiresIn"]?.maximum = Int64(PushOptions.maxExpiresIn)
        schema.properties?["actions"]?.maxItems = PushOptions.maxActions
        // docs/api.md#templates-and-localization-keys: at most 256 bytes of UTF-8 each, which a
        // schema bounds only in characters (Tests/OpenAPI/schemathesis.toml says so).
        for field in ["titleLocKey", "locKey"] {
            schema.properties?[field]?.minLength = 1
            schema.properties?[field]?.maxLength = PushOptions.maxLocalizationBytes
            schema.properties?[field]?.description = "A key of the app's localized strings; at most 256 bytes of UTF-8."
        }
        schema.properties?["locArgs"]?.maxItems = PushOptions.maxLocArgs
        schema.properties?["locArgs"]?.items?[0].maxLength = PushOptions.maxLocalizationBytes
        schema.properties?["locArgs"]?.description = "The locKey string's format arguments (it needs locKey); each at most 256 bytes of UTF-8."
    }
}

extension PushOptions.Action: SchemaRefining {
    /// An id as an identifier, a title as a text (docs/api.md#options-badges-and-paced-sends).
    public static func refine(_ schema: inout JSONSchema) {
        schema.properties?["id"]?.refineIdentifier()
        schema.properties?["title"]?.refineText(minLength: 1)
    }
}

extension JSONSchema {
    /// 1 to 64 visible ASCII characters: a thread, category, channel or button id.
    mutating func refineIdentifier() {
        minLength = 1
        maxLength = PushOptions.maxIdentifier
        pattern = "^[!-~]+$"
    }

    /// Up to 256 characters with no control characters: a subtitle, a sound's name, a button's title.
    mutating func refineText(minLength: Int) {
        self.minLength = minLength
        maxLength = PushOptions.maxText
        pattern = "^[^\\u0000-\\u001F\\u007F]*$"
    }
}
