import NIOConcurrencyHelpers

/// Runs indexed jobs on a fixed number of worker tasks.
///
/// Child tasks return nothing: results go wherever `body` puts them. (Returning large values
/// through task-group results corrupted them in release builds with Swift 6.3.1: wrong results
/// and crashes in `destroyTask`; this shape does not rely on that path.)
public enum Concurrently {
    /// Calls `body(i)` for every `i` in `0..<count`, at most `width` at a time, and returns when all are done.
    public static func forEach(count: Int, width: Int, _ body: @escaping @Sendable (Int) async -> Void) async {
        let counter = NIOLockedValueBox(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<max(1, min(width, count)) {
                group.addTask {
                    while true {
                        let index = counter.withLockedValue { value -> Int in
                            defer { value += 1 }
                            return value
                        }
                        guard index < count else { return }
                        await body(index)
                    }
                }
            }
        }
    }
}
