import Foundation
import Logging
import NIOConcurrencyHelpers

/// Which push providers fail for a cause a person must mend (`ProviderFailure`), each named
/// `PLATFORM:APP` (`apns:default`), as this node's own sends found them: what `GET /ready` names,
/// and what the log says once instead of once per push.
///
/// A provider is failing from its first push that fails so until one of its pushes is sent (a
/// retried push finds out; a restart with the fix starts clear). The log says so at error level
/// when it starts (or its cause changes), with the fix; again once an hour (`reminder`) while it
/// lasts, with the count of failed sends since; and at notice level when it ends. A cause that comes
/// back after it ended is logged again, but not within a minute (`quiet`) of the last line about
/// it: a service failing every other push would otherwise log each flip.
public final class ProviderHealth: Sendable {
    /// What one push said about its provider.
    public enum Observation: Sendable {
        case failed(ProviderFailure)
        case sent
    }

    /// A log line due, made by `observe` and written by `log`.
    public struct Note: Sendable, Equatable {
        public enum Kind: Sendable, Equatable {
            /// The provider started failing (or for another cause).
            case failing
            /// An hour on, still failing.
            case stillFailing
            /// A push was sent again.
            case recovered
        }
        public let kind: Kind
        public let platform: String
        public let app: String
        public let failure: ProviderFailure
        /// Sends that failed so since `since` (a retried push counts at each attempt).
        public let sends: Int
        public let since: Date

        public var provider: String { ProviderHealth.name(platform: platform, app: app) }
    }

    private struct Standing {
        var failure: ProviderFailure
        var since: Date
        var sends: Int
        /// When this spell was last logged; nil while a recent line about the same cause keeps it quiet.
        var logged: Date?
    }

    private struct State {
        var failing: [String: Standing] = [:]
        /// When each provider's cause was last logged, kept after it ended (for `quiet`).
        var lastLogged: [String: (cause: ProviderFailure.Cause, at: Date)] = [:]
    }

    private let state = NIOLockedValueBox(State())
    private let reminder: TimeInterval
    private let quiet: TimeInterval
    private let clock: @Sendable () -> Date

    /// `reminder`: seconds between lines while a provider keeps failing; `quiet`: the least
    /// seconds between two lines about one provider's cause; `clock`: now.
    public init(reminder: TimeInterval = 3600, quiet: TimeInterval = 60, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.reminder = reminder
        self.quiet = quiet
        self.clock = clock
    }

    /// `apns:default`.
    public static func name(platform: String, app: String) -> String { "\(platform):\(app)" }

    /// The providers failing now, by name, sorted.
    public var failing: [String] {
        state.withLockedValue { $0.failing.keys.sorted() }
    }

    /// Why `provider` (`apns:default`) fails, if it does.
    public func failure(of provider: String) -> ProviderFailure? {
        state.withLockedValue { $0.failing[provider]?.failure }
    }

    /// Whether any provider is failing (the dispatcher then watches its sent pushes too).
    public var isFailing: Bool {
        state.withLockedValue { !$0.failing.isEmpty }
    }

    /// Takes the observations of a batch of outcomes, in order; the lines due.
    public func observe(_ observations: [(platform: String, app: String, observation: Observation)]) -> [Note] {
        guard !observations.isEmpty else { return [] }
        let now = clock()
        let (reminder, quiet) = (self.reminder, self.quiet)
        return state.withLockedValue { state in
            var notes: [Note] = []
            for (platform, app, observation) in observations {
                let name = Self.name(platform: platform, app: app)
                switch observation {
                case .sent:
                    guard let ended = state.failing.removeValue(forKey: name) else { continue }
                    if ended.logged != nil {
                        notes.append(Note(kind: .recovered, platform: platform, app: app, failure: ended.failure, sends: ended.sends, since: ended.since))
                    }
                case .failed(let failure):
                    var standing: Standing
                    if let known = state.failing[name], known.failure.cause == failure.cause {
                        standing = known
                        standing.sends += 1
                        standing.failure = failure
                    } else {
                        standing = Standing(failure: failure, since: now, sends: 1, logged: nil)
                    }
                    if let logged = standing.logged {
                        if now.timeIntervalSince(logged) >= reminder {
                            notes.append(Note(kind: .stillFailing, platform: platform, app: app, failure: failure, sends: standing.sends,
                                              since: standing.since))
                            standing.logged = now
                            state.lastLogged[name] = (failure.cause, now)
                        }
                    } else if let last = state.lastLogged[name], last.cause == failure.cause, now.timeIntervalSince(last.at) < quiet {
                        // Said less than `quiet` ago: counted, said on a later push once the quiet is over.
                    } else {
                        notes.append(Note(kind: .failing, platform: platform, app: app, failure: failure, sends: standing.sends,
                                          since: standing.since))
                        standing.logged = now
                        state.lastLogged[name] = (failure.cause, now)
                    }
                    state.failing[name] = standing
                }
            }
            return notes
        }
    }

    /// Writes `notes`: failures at error level with their fix, recoveries at notice level.
    public func log(_ notes: [Note], to logger: Logger) {
        for note in notes {
            var metadata: Logger.Metadata = ["provider": "\(note.provider)", "cause": "\(note.failure.cause.rawValue)"]
            switch note.kind {
            case .failing:
                logger.error("\(note.platform) pushes of app \(note.app) fail: \(note.failure.sentence)", metadata: metadata)
            case .stillFailing:
                metadata["sends"] = "\(note.sends)"
                metadata["since"] = "\(note.since.formatted(.iso8601))"
                logger.error("\(note.platform) pushes of app \(note.app) still fail: \(note.failure.sentence)", metadata: metadata)
            case .recovered:
                metadata["failed"] = "\(note.sends)"
                metadata["since"] = "\(note.since.formatted(.iso8601))"
                logger.notice("\(note.platform) pushes of app \(note.app) are sent again", metadata: metadata)
            }
        }
    }
}
