import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
#if canImport(Glibc)
import Glibc
#endif

/// The NIO channels of the connections `RawFront` gave on: made for each from its descriptor
/// (`ClientBootstrap.withConnectedSocket`), counted against the listener's limit until they
/// close, and asked to finish on a graceful shutdown, as NIO's quiescing helper asks the
/// channels its server channel accepted.
final class AdoptedConnections: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var quiescing = false
    }

    private let state = NIOLockedValueBox(State())
    let count: ConnectionCount
    let group: any EventLoopGroup
    /// A connection written to that does not read its answer is closed after this long.
    let idleTimeout: TimeAmount

    init(count: ConnectionCount, group: any EventLoopGroup, idleTimeout: TimeAmount) {
        self.count = count
        self.group = group
        self.idleTimeout = idleTimeout
    }

    /// Makes `adoption`'s channel: the bytes read from it go to the handlers `pipeline` adds, as
    /// if NIO had read them; the rest of an answer is written first, then the connection closed
    /// or (`thenServe`) served by `pipeline`'s handlers.
    func adopt(_ adoption: RawAdoption, pipeline: @escaping @Sendable (any Channel) throws -> Void) {
        let owned = NIOLockedValueBox(false)
        let idleTimeout = idleTimeout
        ClientBootstrap(group: group)
            .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    owned.withLockedValue { $0 = true }
                    track(channel)
                    if let rest = adoption.rest, !adoption.thenServe {
                        try channel.pipeline.syncOperations.addHandler(WriteRestAndClose(rest, timeout: idleTimeout))
                    } else {
                        try channel.pipeline.syncOperations.addHandler(ReplayFirstRead(adoption.read ?? ByteBuffer(), writingFirst: adoption.rest))
                        try pipeline(channel)
                    }
                }
            }
            .withConnectedSocket(adoption.fd)
            .whenFailure { [self] _ in
                // A channel made closes its socket and is released when it closes; one never made
                // (the loops shut down), here.
                if !owned.withLockedValue({ $0 }) {
                    close(adoption.fd)
                    count.release()
                }
            }
    }

    /// Counts `channel` until it closes; asks it to finish at once when shutting down.
    private func track(_ channel: any Channel) {
        let key = ObjectIdentifier(channel)
        let quiescing = state.withLockedValue { state in
            state.channels[key] = channel
            return state.quiescing
        }
        channel.closeFuture.whenComplete { [self] _ in
            state.withLockedValue { _ = $0.channels.removeValue(forKey: key) }
            count.release()
        }
        // After its activation, which follows the initializer on the same turn of the loop.
        if quiescing { channel.eventLoop.execute { channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) } }
    }

    /// Asks every channel to finish what it is doing and close (`ChannelShouldQuiesceEvent`).
    func quiesce() {
        let channels = state.withLockedValue { state in
            state.quiescing = true
            return Array(state.channels.values)
        }
        for channel in channels { channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
    }

    /// Returns once no connection is open (raw or adopted).
    func drained() async {
        while count.current > 0 { try? await Task.sleep(for: .milliseconds(10)) }
    }
}
