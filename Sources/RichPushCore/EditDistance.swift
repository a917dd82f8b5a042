/// How far apart two names are, to say "did you mean …" for a misspelt one.
public enum EditDistance {
    /// The Levenshtein distance between `a` and `b` (insertions, deletions and substitutions).
    public static func between(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// The name among `candidates` nearest to `name` (case aside), when it is near enough to be
    /// what was meant: at most a quarter of its letters apart, and at least one.
    public static func nearest(to name: String, in candidates: some Sequence<String>) -> String? {
        let key = name.lowercased()
        let limit = max(1, key.count / 4)
        var best: (name: String, distance: Int)?
        for candidate in candidates where candidate.lowercased() != key {
            let distance = between(candidate.lowercased(), key)
            guard distance <= limit else { continue }
            if let current = best, current.distance < distance || (current.distance == distance && current.name <= candidate) { continue }
            best = (candidate, distance)
        }
        return best?.name
    }
}
