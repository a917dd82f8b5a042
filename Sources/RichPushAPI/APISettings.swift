import Foundation

/// The values of `serve`'s configuration the API's rooms answer by (docs/configuration.md):
/// each controller is given only those it uses.
package struct APISettings: Sendable {
    /// The server's apps.
    package var apps: AppCatalog
    /// `--public-media`: images are served without credentials, cached publicly.
    package var publicMedia: Bool
    /// The image a notification or campaign without one shows.
    package var defaultImage: String
    /// docs/operations.md#traces: a trace viewer's URL with `{traceId}` in it (`serve --trace-url`); nil: no link.
    package var traceURL: String? = nil
    /// How long a session (API or console) lasts, in seconds.
    package var sessionLifetime: TimeInterval
    /// The server is reached over HTTPS (`--tls-cert`, or an `https://` `--public-url`).
    package var servedOverHTTPS: Bool
    /// `--metrics-port`: /metrics is answered on a listener of its own.
    package var metricsOnOwnPort: Bool
    /// Uploads received and decoded at once.
    package var maxConcurrentUploads: Int
    /// Web Push endpoints may name private addresses.
    package var allowPrivatePushEndpoints: Bool
    /// `POST /api/notifications` per user per minute.
    package var notificationsPerMinute: Int
    /// Opens reported per client address per minute.
    package var opensPerMinute: Int

    /// The settings, named.
    package init(apps: AppCatalog, publicMedia: Bool, defaultImage: String, sessionLifetime: TimeInterval, servedOverHTTPS: Bool,
                 metricsOnOwnPort: Bool, maxConcurrentUploads: Int, allowPrivatePushEndpoints: Bool, notificationsPerMinute: Int,
                 opensPerMinute: Int) {
        self.apps = apps
        self.publicMedia = publicMedia
        self.defaultImage = defaultImage
        self.sessionLifetime = sessionLifetime
        self.servedOverHTTPS = servedOverHTTPS
        self.metricsOnOwnPort = metricsOnOwnPort
        self.maxConcurrentUploads = maxConcurrentUploads
        self.allowPrivatePushEndpoints = allowPrivatePushEndpoints
        self.notificationsPerMinute = notificationsPerMinute
        self.opensPerMinute = opensPerMinute
    }
}
