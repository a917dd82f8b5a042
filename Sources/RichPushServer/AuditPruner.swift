import Logging
import RichPushCore
import ServiceLifecycle

/// Removes audit log entries older than `serve --audit-days` (docs/operations.md#audit-log): at
/// start, then every `interval`. Every node does it; the same rows go whichever node is first.
struct AuditPruner: Service {
    let audit: AuditStore
    /// How many days an entry is kept.
    let days: Int
    let interval: Duration
    let logger: Logger

    func run() async throws {
        repeat {
            do {
                let removed = try await audit.prune(olderThanDays: days)
                if removed > 0 {
                    logger.info("pruned the audit log", metadata: ["removed": "\(removed)", "olderThanDays": "\(days)"])
                }
            } catch {
                logger.warning("cannot prune the audit log", metadata: ["error": "\(error)"])
            }
            // The pause ends at a graceful shutdown too.
        } while (try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }) != nil && !Task.isShuttingDownGracefully
    }
}
