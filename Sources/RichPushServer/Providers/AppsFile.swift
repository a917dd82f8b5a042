import Foundation
import PushDelivery
import RichPushAPI
import RichPushCore

/// Reads `{"apps":[{"name","apns":{…},"fcm":{…},"webpush":{…},"hub":{…}},…]}`.
enum AppsFile {
    /// The apps of the file at `path`, each checked: its fields known, its name valid and
    /// unique, its credential files readable; a file that cannot be used is an `AppsFileError`.
    static func load(_ path: String) throws -> [AppDefinition] {
        guard let data = FileManager.default.contents(atPath: path) else { throw AppsFileError(path, "cannot read the file") }
        guard data.count <= 1 << 20 else { throw AppsFileError(path, "the file is over 1 MiB") }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw AppsFileError(path, "not a JSON object; expected {\"apps\":[{\"name\":…},…]}")
        }
        if let extra = Set(root.keys).subtracting(["apps"]).sorted().first { throw AppsFileError(path, "unknown field \"\(extra)\"") }
        guard let list = root["apps"] as? [Any] else { throw AppsFileError(path, "\"apps\" must be an array of apps") }
        var apps: [AppDefinition] = []
        for (index, item) in list.enumerated() {
            guard let object = item as? [String: Any] else { throw AppsFileError(path, "apps[\(index)] is not an object") }
            guard let name = object["name"] as? String else { throw AppsFileError(path, "apps[\(index)]: \"name\" is missing or not a string") }
            do { try AppName.validate(name) } catch let error as CoreError { throw AppsFileError(path, app: name, "name: \(error.message)") }
            guard !apps.contains(where: { $0.name == name }) else { throw AppsFileError(path, app: name, "name: two apps have this name") }
            let reader = FieldReader(file: path, app: name, object: object, prefix: "")
            try reader.only(["name", "apns", "fcm", "webpush", "hub", "frequencyCap", "quietHours"])
            var app = AppDefinition(name: name)
            app.limits = try reader.limits()
            if let apns = try reader.object("apns") {
                try apns.only(["key", "keyId", "teamId", "topic", "env"])
                app.apns = .init(key: try apns.file("key"), keyID: try apns.string("keyId"), teamID: try apns.string("teamId"),
                                 topic: try apns.string("topic"), environment: try apns.string("env", default: "sandbox"))
                do { _ = try APNsEnvironment(app.apns!.environment) } catch { throw apns.error("env", "\(error)") }
            }
            if let fcm = try reader.object("fcm") {
                try fcm.only(["serviceAccount", "endpoint"])
                app.fcm = .init(serviceAccount: try fcm.file("serviceAccount"), endpoint: try fcm.optionalString("endpoint"))
            }
            if let webPush = try reader.object("webpush") {
                try webPush.only(["vapidKey", "subject"])
                let subject = try webPush.string("subject")
                guard subject.hasPrefix("mailto:") && subject.count > 7 || subject.hasPrefix("https://") && subject.count > 8 else {
                    throw webPush.error("subject", "must be a mailto: or https: URI")
                }
                app.webPush = .init(vapidKey: try webPush.file("vapidKey"), subject: subject)
            }
            if let hub = try reader.object("hub") {
                try hub.only(["connectionString", "connectionStringFile", "name"])
                let inline = try hub.optionalString("connectionString")
                let file = try hub.optionalString("connectionStringFile")
                guard (inline == nil) != (file == nil) else { throw hub.error("connectionString", "give exactly one of connectionString and connectionStringFile") }
                var connection = inline ?? ""
                if let file {
                    guard let text = FileManager.default.contents(atPath: file) else { throw hub.error("connectionStringFile", "cannot read \(file)") }
                    connection = String(decoding: text, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                }
                do { _ = try NotificationHubsConnection(connection) } catch { throw hub.error(inline == nil ? "connectionStringFile" : "connectionString", "\(error)") }
                app.hub = .init(connectionString: connection, name: try hub.string("name"))
                if app.apns != nil || app.fcm != nil || app.webPush != nil {
                    throw reader.error("hub", "an app sends through a hub or directly (apns, fcm, webpush), not both")
                }
            }
            if app.apns == nil && app.fcm == nil && app.webPush == nil && app.hub == nil {
                throw reader.error("apns", "the app has no credentials: give apns, fcm, webpush or hub")
            }
            apps.append(app)
        }
        return apps
    }

    /// Checked reads of one object's fields, naming `prefix.field` in errors.
    private struct FieldReader {
        let file: String
        let app: String
        let object: [String: Any]
        let prefix: String

        func error(_ field: String, _ message: String) -> AppsFileError {
            AppsFileError(file, app: app, "\(prefix)\(field): \(message)")
        }
        func only(_ fields: Set<String>) throws {
            if let extra = Set(object.keys).subtracting(fields).sorted().first { throw error(extra, "unknown field") }
        }
        func object(_ field: String) throws -> FieldReader? {
            guard let value = object[field] else { return nil }
            guard let nested = value as? [String: Any] else { throw error(field, "must be an object") }
            return FieldReader(file: file, app: app, object: nested, prefix: "\(prefix)\(field).")
        }
        func optionalString(_ field: String) throws -> String? {
            guard let value = object[field] else { return nil }
            guard let text = value as? String, !text.isEmpty else { throw error(field, "must be a non-empty string") }
            return text
        }
        func string(_ field: String, default fallback: String? = nil) throws -> String {
            guard let text = try optionalString(field) ?? fallback else { throw error(field, "is missing") }
            return text
        }
        /// `frequencyCap` (`{"max":3,"per":"24h"}`) and `quietHours` (`{"from","to","mode"}`), docs/api.md#frequency-caps-and-quiet-hours.
        func limits() throws -> AppLimits {
            var limits = AppLimits()
            if let cap = try self.object("frequencyCap") {
                try cap.only(["max", "per"])
                guard let max = cap.object["max"] as? Int else { throw cap.error("max", "must be a whole number, 1 to \(FrequencyCap.maxCount)") }
                do {
                    limits.frequencyCap = try FrequencyCap(max: max, per: try FrequencyCap.period(try cap.string("per"), field: "frequencyCap.per"))
                } catch let error as CoreError {
                    throw AppsFileError(file, app: app, error.message)
                }
            }
            if let quiet = object["quietHours"] {
                guard let fields = quiet as? [String: Any] else { throw error("quietHours", "must be an object {\"from\",\"to\",\"mode\"}") }
                do { limits.quietHours = try QuietHours(json: fields, field: "quietHours") } catch let error as CoreError {
                    throw AppsFileError(file, app: app, error.message)
                }
            }
            return limits
        }
        /// A path to a readable file.
        func file(_ field: String) throws -> String {
            let path = try string(field)
            guard FileManager.default.isReadableFile(atPath: path) else { throw error(field, "cannot read \(path)") }
            return path
        }
    }
}
