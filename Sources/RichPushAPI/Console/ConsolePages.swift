import Mustache

/// The console's pages, from `Pages/` in the target's resources: Mustache templates for the
/// HTML, and the style sheet and script they inline.
///
/// The CSS and the script are inlined with `{{{…}}}` (never parsed as Mustache, never escaped),
/// since the console's CSP allows inline style and script and no other source. Values the server
/// fills in use `{{…}}`, which HTML-escapes them as the page always did (`& < > " '`). Each
/// template is loaded and parsed once, on first use; one that is missing or does not parse stops
/// the server there with its name, rather than serving a blank page.
enum ConsolePages {
    static let css = PageFile.text("console", "css")
    /// The console's script: its panels', then the A/B tests' parts of the campaign panels, the
    /// Live Activities panel's and the audit log's (files of their own), in one inline script.
    static let script = ["console", "console-ab-tests", "console-live-activities", "console-audit"].map { PageFile.text($0, "js") }.joined(separator: "\n")
    static let signIn = PageFile.template("console-signin")
    static let forbidden = PageFile.template("console-forbidden")
    static let app = PageFile.template("console-app")
}
