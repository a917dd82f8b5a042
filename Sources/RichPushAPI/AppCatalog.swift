import HTTPTypes
import RichPushCore

/// The apps this server sends for (docs/api.md#apps-and-api-keys): `default`, and each of
/// `serve --apps` with what its devices may ask of it. The routes ask here which app a request
/// names, and whether its caller may send to it.
package struct AppCatalog: Sendable {
    /// The apps of `serve --apps` (not `default`), by name.
    package let profiles: [String: AppProfile]
    /// The VAPID public key of the `default` app's browsers; nil when it sends no Web Push.
    package let defaultVAPIDKey: String?

    /// The catalogue of `default` (with `defaultVAPIDKey`) and `profiles`.
    package init(profiles: [String: AppProfile], defaultVAPIDKey: String?) {
        self.profiles = profiles
        self.defaultVAPIDKey = defaultVAPIDKey
    }

    /// Every app's name, `default` first, the others sorted.
    package var names: [String] { [AppName.default] + profiles.keys.sorted() }

    /// The VAPID public key `app`'s browsers subscribe with; nil when it sends no Web Push.
    func vapidPublicKey(_ app: String) -> String? {
        app == AppName.default ? defaultVAPIDKey : profiles[app]?.vapidPublicKey
    }

    /// The apps that send through Notification Hubs.
    var hubApps: some Sequence<String> { profiles.filter(\.value.hub).keys }

    /// `name` when it is an app of this server's; else 422, or 404 on a public route
    /// (`isPublic`). Only an admin is told the apps' names: the configuration is no one else's
    /// to read (docs/security.md).
    func knownApp(_ name: String?, for caller: Principal? = nil, isPublic: Bool = false) throws -> String? {
        guard let name else { return nil }
        guard name == AppName.default || profiles[name] != nil else {
            if isPublic { throw Problem(.notFound, "no app named '\(name.prefix(64))' on this server") }
            guard caller?.admin == true else {
                throw Problem(.unprocessableContent, "no app named '\(name.prefix(64))' on this server; the app's developers know its name")
            }
            let known = names.joined(separator: ", ")
            throw Problem(.unprocessableContent, "no app named '\(name.prefix(64))' on this server; its apps are \(known)")
        }
        return name
    }

    /// The app a notification or campaign goes to: the one asked for (known, 422 otherwise), and
    /// for a key bound to an app, that app alone (403 for another; its own when none is named).
    func appAllowed(_ requested: String?, for caller: Principal) throws -> String? {
        let app = try knownApp(requested, for: caller)
        guard let bound = caller.apiKey?.app else { return app }
        // A key made for an app this server does not have would reach no device, silently.
        guard bound == AppName.default || profiles[bound] != nil else {
            throw Problem(.forbidden, "API key \(caller.apiKey!.name) is bound to app \(bound), which this server does not have; "
                          + "start serve with that app in --apps, or make a key for one of its apps (richpush api-keys add NAME --app APP)")
        }
        guard app == nil || app == bound else {
            throw Problem(.forbidden, "API key \(caller.apiKey!.name) is bound to app \(bound); it cannot send to app \(app!)")
        }
        return bound
    }
}
