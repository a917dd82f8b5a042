import Mustache

/// A page's file in the target's resources (`Sources/RichPushAPI/Pages`), compiled into the
/// binary by SwiftPM (`.embedInCode`): a deployed `richpush` needs no folder beside it.
///
/// Every file ends with one newline that is not part of the page: an editor may keep it, and the
/// bytes served stay those of the file without it. A name with no file, or an empty file, is a
/// build mistake, not a page: it stops the server naming the file.
package enum PageFile {
    static let folder = "Pages"

    /// Loads and parses every page now, so that a broken install stops the server as it starts
    /// rather than at the first request for a page.
    package static func loadAll() {
        _ = (ConsolePages.css, ConsolePages.script, ConsolePages.signIn, ConsolePages.forbidden, ConsolePages.app,
             WebPushDemo.page, WebPushDemo.serviceWorker)
    }

    /// Every embedded file, by its name in `Pages/`.
    private static let embedded: [String: [UInt8]] = [
        "console-app.mustache": PackageResources.console_app_mustache,
        "console-forbidden.mustache": PackageResources.console_forbidden_mustache,
        "console-signin.mustache": PackageResources.console_signin_mustache,
        "console.css": PackageResources.console_css,
        "console.js": PackageResources.console_js,
        "console-live-activities.js": PackageResources.console_live_activities_js,
        "console-ab-tests.js": PackageResources.console_ab_tests_js,
        "console-audit.js": PackageResources.console_audit_js,
        "webpush-demo.html": PackageResources.webpush_demo_html,
        "webpush-sw.js": PackageResources.webpush_sw_js,
    ]

    /// The text of `Pages/NAME.EXT`, less its final newline.
    static func text(_ name: String, _ ext: String) -> String {
        let file = "\(name).\(ext)"
        guard let bytes = embedded[file] else {
            fatalError("RichPushServer has no page file \(folder)/\(file): add it to Pages/ and to the target's resources in Package.swift")
        }
        var text = String(decoding: bytes, as: UTF8.self)
        if text.hasSuffix("\n") { text.removeLast() }
        guard !text.isEmpty else { fatalError("RichPushServer's page file \(folder)/\(file) is empty") }
        return text
    }

    /// The Mustache template `Pages/NAME.mustache`, parsed.
    static func template(_ name: String) -> MustacheTemplate {
        let source = text(name, "mustache")
        do {
            return try MustacheTemplate(string: source)
        } catch {
            fatalError("RichPushServer's page template \(folder)/\(name).mustache does not parse: \(error)")
        }
    }
}
