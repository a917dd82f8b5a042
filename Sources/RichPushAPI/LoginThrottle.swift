import HTTPEdge
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

/// Counts sign-in attempts per user name and per client address over a sliding window; past a
/// limit, further attempts are refused (429) before any bcrypt runs, until the oldest failure
/// in the window ages out. An attempt is counted as a failure when it is *reserved*, before its
/// bcrypt, and given back when it succeeds: guesses sent at once cannot all pass the check
/// before the first of them fails. A success clears the user's count.
///
/// It also bounds the work itself: at most `perAddressConcurrent` bcrypt runs at once for one
/// address (429 past it) and `globalConcurrent` in all, running or queued for the bcrypt pool
/// (503 past it), so one address cannot queue more bcrypt than it may ever be answered for.
/// Both tables are bounded.
public final class LoginThrottle: Sendable {
    static let window: Double = 300
    /// Failures per user name allowed in the window by default.
    public static let defaultPerUser = 10
    /// Sign-ins verified at once for one address.
    static let perAddressConcurrent = 4
    /// Failures per user name allowed in the window; 0 turns the throttle off.
    let perUser: Int
    /// Sign-ins verified (or waiting for the bcrypt pool) at once, in all.
    let globalConcurrent: Int
    /// Failures per client address: many users may share one (a NAT, a proxy).
    var perAddress: Int { perUser * 5 }
    private static let capacity = 100_000
    private struct State {
        var users: [String: [Double]] = [:]
        var addresses: [String: [Double]] = [:]
        /// Verifications running per address, and in all.
        var running: [String: Int] = [:]
        var total = 0
    }
    private let state = NIOLockedValueBox(State())

    init(perUser: Int = LoginThrottle.defaultPerUser, globalConcurrent: Int = 64) {
        self.perUser = perUser
        self.globalConcurrent = globalConcurrent
    }

    /// Seconds to wait before the next attempt, or nil when one may go ahead now.
    func wait(user: String?, address: String?, now: Double = Date().timeIntervalSince1970) -> Int? {
        guard perUser > 0 else { return nil }
        let address = address.map(Self.addressKey)
        return state.withLockedValue { state in
            Self.wait(state, user: user, address: address, perUser: perUser, perAddress: perAddress, now: now)
        }
    }

    private static func wait(_ state: State, user: String?, address: String?, perUser: Int, perAddress: Int, now: Double) -> Int? {
        var wait: Double = 0
        if let user, let failures = state.users[user] { wait = max(wait, Self.wait(failures, limit: perUser, now: now)) }
        if let address, let failures = state.addresses[address] { wait = max(wait, Self.wait(failures, limit: perAddress, now: now)) }
        return wait > 0 ? Int(wait.rounded(.up)) : nil
    }

    /// Reserves one attempt: checks the limits and counts it as a failure, in one step.
    /// Throws 429 (with `Retry-After`) while the user or address is over its limit or the
    /// address has `perAddressConcurrent` sign-ins being verified, 503 while the server has
    /// `globalConcurrent`.
    func reserve(user: String?, address: String?, now: Double = Date().timeIntervalSince1970) throws -> LoginReservation {
        let address = address.map(Self.addressKey)
        let perUser = self.perUser, perAddress = self.perAddress, globalConcurrent = self.globalConcurrent
        let refusal: Problem? = state.withLockedValue { state in
            if perUser > 0 {
                if let wait = Self.wait(state, user: user, address: address, perUser: perUser, perAddress: perAddress, now: now) {
                    return Self.throttled(wait: wait)
                }
                if let address, state.running[address, default: 0] >= Self.perAddressConcurrent {
                    return Problem(.tooManyRequests, "\(Self.perAddressConcurrent) sign-ins from this address are being checked; wait for their answers",
                                   headers: [.retryAfter: "1"])
                }
            }
            if state.total >= globalConcurrent {
                return Problem(.serviceUnavailable, "the server is checking \(globalConcurrent) sign-ins already; try again in a second",
                               headers: [.retryAfter: "1"])
            }
            state.total += 1
            if let address { state.running[address, default: 0] += 1 }
            if perUser > 0 {
                if let user { Self.record(&state.users, user, keep: perAddress, now: now) }
                if let address { Self.record(&state.addresses, address, keep: perAddress, now: now) }
            }
            return nil
        }
        if let refusal { throw refusal }
        return LoginReservation(throttle: self, user: user, address: address, at: now)
    }

    /// The 429 of a user or address over its limit, to try again in `wait` seconds.
    static func throttled(wait: Int) -> Problem {
        Problem(.tooManyRequests, "too many failed sign-ins lately for this user or address; try again in \(wait) s",
                headers: [.retryAfter: String(wait)])
    }

    /// Settles a reservation: a failure stays counted, a success is given back (and clears
    /// the user's failures).
    func settle(_ reservation: LoginReservation, failed: Bool) {
        let counting = perUser > 0
        state.withLockedValue { state in
            state.total -= 1
            if let address = reservation.address {
                let left = state.running[address, default: 1] - 1
                state.running[address] = left > 0 ? left : nil
            }
            guard counting, !failed else { return }
            if let user = reservation.user { state.users[user] = nil }
            if let address = reservation.address, var failures = state.addresses[address],
               let mine = failures.lastIndex(of: reservation.at) {
                failures.remove(at: mine)
                state.addresses[address] = failures.isEmpty ? nil : failures
            }
        }
    }

    /// Counts one failure of `user` and `address` (a session lookup that found nothing).
    func recordFailure(user: String?, address: String?, now: Double = Date().timeIntervalSince1970) {
        guard perUser > 0 else { return }
        let keep = perAddress
        let address = address.map(Self.addressKey)
        state.withLockedValue { state in
            if let user { Self.record(&state.users, user, keep: keep, now: now) }
            if let address { Self.record(&state.addresses, address, keep: keep, now: now) }
        }
    }

    /// The key an address is counted under: an IPv4 address itself, an IPv6 address's /64 (one
    /// subscriber's whole prefix, which a client may rotate through at will).
    static func addressKey(_ address: String) -> String {
        guard address.contains(":"), let parsed = IPAddress(address), parsed.ipv4 == nil else { return address }
        return String(parsed.high, radix: 16) + "::/64"
    }

    /// Sign-ins being verified now (for tests).
    var running: Int { state.withLockedValue { $0.total } }

    private static func wait(_ failures: [Double], limit: Int, now: Double) -> Double {
        let recent = failures.filter { now - $0 < window }
        guard recent.count >= limit, let oldest = recent.min() else { return 0 }
        return oldest + window - now
    }

    private static func record(_ table: inout [String: [Double]], _ key: String, keep: Int, now: Double) {
        if table.count >= capacity { table = table.filter { $0.value.contains { now - $0 < window } } }
        if table.count >= capacity { table.removeAll() }
        var failures = (table[key] ?? []).filter { now - $0 < window }
        failures.append(now)
        table[key] = Array(failures.suffix(keep))
    }
}
