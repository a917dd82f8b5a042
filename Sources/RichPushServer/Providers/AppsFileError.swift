/// A `serve --apps` file that cannot be used: the file, the app and the field, in words
/// (`serve` exits 2 with it, before anything is opened).
public struct AppsFileError: Error, CustomStringConvertible {
    /// What is wrong, as `serve` says it: `--apps FILE: app "NAME": FIELD: …`.
    public let description: String

    init(_ file: String, app: String? = nil, _ message: String) {
        description = "--apps \(file): " + (app.map { "app \"\($0)\": " } ?? "") + message
    }
}
