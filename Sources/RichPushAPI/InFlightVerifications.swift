import Crypto
import Foundation
import Hummingbird
import HummingbirdBcrypt
import Logging
import PushDelivery
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RichPushCore
import ServiceLifecycle

/// Makes concurrent requests with the same uncached header share one bcrypt run.
actor InFlightVerifications {
    private var running: [CredentialKey: Task<Bool?, any Error>] = [:]

    /// Runs `work` once for concurrent callers with the same key; its result is the admin flag,
    /// nil when refused. Only the caller that starts the work calls `admit` first (it throws
    /// when no attempt may start); its reservation is settled by the outcome.
    func verify(key: CredentialKey, admit: @Sendable () throws -> LoginReservation? = { nil },
                _ work: @escaping @Sendable () async throws -> Bool?) async throws -> Bool? {
        if let task = running[key] { return try await task.value }
        let reservation = try admit()
        let task = Task { try await work() }
        running[key] = task
        defer { running[key] = nil }
        do {
            let admin = try await task.value
            reservation?.finish(failed: admin == nil)
            return admin
        } catch {
            reservation?.finish(failed: false)
            throw error
        }
    }
}
