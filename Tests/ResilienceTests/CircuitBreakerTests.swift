import Foundation
import Testing
@testable import Resilience

/// The breaker on its own: what opens it, what it refuses, its probe and its cool-downs.
@Suite("Circuit breaker")
struct CircuitBreakerTests {
    struct Unreachable: Error {}
    struct Answered: Error {}

    static func classify(_ error: any Error) -> String? { error is Unreachable ? "refused" : nil }

    func fail(_ breaker: CircuitBreaker) async -> (any Error)? {
        do {
            _ = try await breaker.call(classify: Self.classify) { () async throws -> Int in throw Unreachable() }
            return nil
        } catch { return error }
    }

    @Test("an answer, even an error, keeps it closed; unreachability opens it, and the error names the dependency")
    func opens() async throws {
        let breaker = CircuitBreaker(.blobs, firstCooldown: .seconds(30))
        await #expect(throws: Answered.self) { try await breaker.call(classify: Self.classify) { () async throws -> Int in throw Answered() } }
        #expect(!breaker.isOpen)
        let error = await fail(breaker)
        let unavailable = try #require(error as? DependencyUnavailable)
        #expect(unavailable.dependency == .blobs && unavailable.reason == "refused")
        #expect(unavailable.publicMessage.hasPrefix("the media bucket is not answering"))
        #expect(breaker.isOpen)
        // Refused untried while cooling down, with the time left as Retry-After.
        let ran = Counter()
        let refused = await #expect(throws: DependencyUnavailable.self) {
            try await breaker.call(classify: Self.classify) { ran.add(); return 1 }
        }
        #expect(ran.value == 0 && breaker.refusals == 1)
        #expect((refused?.retryAfter ?? 0) >= 29)
    }

    @Test("after the cool-down one call is the probe (others are refused meanwhile); its failure doubles the cool-down, its success closes")
    func probe() async throws {
        let clock = ManualClock()
        let breaker = CircuitBreaker(.database, firstCooldown: .seconds(1), maxCooldown: .seconds(3), clock: clock.now)
        _ = await fail(breaker)
        clock.advance(0.9)
        #expect(throws: DependencyUnavailable.self) { try breaker.admit() }
        clock.advance(0.2)
        #expect(try breaker.admit() == true) // the probe
        #expect(throws: DependencyUnavailable.self) { try breaker.admit() } // one at a time
        breaker.record(.unreachable("still down"), probe: true)
        // Two seconds now, then four capped at three.
        clock.advance(1.5)
        #expect(throws: DependencyUnavailable.self) { try breaker.admit() }
        clock.advance(0.6)
        #expect(try breaker.admit() == true)
        breaker.record(.unreachable("still down"), probe: true)
        clock.advance(2.9)
        #expect(throws: DependencyUnavailable.self) { try breaker.admit() }
        clock.advance(0.2)
        #expect(try breaker.admit() == true)
        breaker.record(.answered, probe: true)
        #expect(!breaker.isOpen && breaker.refusals == 0)
        #expect(try breaker.admit() == false)
    }

    @Test("a probe abandoned by its caller lets the next call probe; one that never reports is forgotten after a minute")
    func abandoned() async throws {
        let clock = ManualClock()
        let breaker = CircuitBreaker(.hub, firstCooldown: .seconds(1), clock: clock.now)
        _ = await fail(breaker)
        clock.advance(1.1)
        #expect(try breaker.admit() == true)
        breaker.record(.abandoned, probe: true)
        #expect(try breaker.admit() == true)
        clock.advance(30)
        #expect(throws: DependencyUnavailable.self) { try breaker.admit() }
        clock.advance(31)
        #expect(try breaker.admit() == true)
    }

    final class ManualClock: @unchecked Sendable {
        private let lock = NSLock()
        private var seconds = 1000.0
        var now: @Sendable () -> Double { { [self] in lock.withLock { seconds } } }
        func advance(_ by: Double) { lock.withLock { seconds += by } }
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func add() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }
}
