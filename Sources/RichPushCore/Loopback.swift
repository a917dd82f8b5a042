import Foundation

/// Where plain `http://` is allowed for a push service, token endpoint or image: the loopback
/// interface alone (a stand-in, a local proxy), where nothing can listen in.
public enum Loopback {
    /// Whether `host` is `localhost`, `::1` or a 127.x.y.z address (not `127.evil.example`).
    public static func isLoopback(host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        let v4 = parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
        return host == "localhost" || host == "::1" || v4
    }

    /// Whether `url` is https, or http on loopback.
    public static func isSecureOrLoopback(_ url: String) -> Bool {
        guard let parsed = URL(string: url), let host = parsed.host, !host.isEmpty else { return false }
        return parsed.scheme == "https" || (parsed.scheme == "http" && isLoopback(host: host))
    }
}
