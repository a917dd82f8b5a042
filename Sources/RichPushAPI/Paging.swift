import HTTPTypes
import Hummingbird

/// The paging of the routes that list (notifications, campaigns).
enum Paging {
    /// `?limit=1…500&before=ID` of a list; a value that is not a whole number is a 400, not the default.
    static func page(_ request: Request, defaultLimit: Int) throws -> (limit: Int, before: Int64?) {
        func number(_ name: String) throws -> Int64? {
            let values = request.uri.queryParameters.getAll(name)
            guard let text = values.first else { return nil }
            guard values.count == 1, let value = Int64(text) else { throw Problem(.badRequest, "\(name) must be one whole number, got '\(text.prefix(40))'") }
            return value
        }
        let limit = try number("limit") ?? Int64(defaultLimit)
        guard (1...500).contains(limit) else { throw Problem(.badRequest, "limit must be 1 to 500") }
        return (Int(limit), try number("before"))
    }
}
