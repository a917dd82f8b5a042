import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOSSL
import NIOTLS

/// How fast a request body must keep coming once its head has arrived: at least `minimum` bytes
/// in every `window` until it ends (a minimum rate judged over a period, as Apache's
/// `mod_reqtimeout` asks of a body). Without it a body could hold its connection for as long as
/// the client kept sending a byte now and then, since every byte resets the idle timer.
public struct BodyRateLimit: Sendable {
    /// The period the rate is judged over; a client may pause for nearly this long.
    public var window: TimeAmount
    /// Bytes of body each window must bring.
    public var minimum: Int

    /// At least `minimum` bytes in every `window`.
    public init(window: TimeAmount, minimum: Int) {
        self.window = window
        self.minimum = minimum
    }

    /// 20 KiB in every 20 s (1 KiB/s): a fraction of what a phone on a poor 2G link sends, with
    /// room for a stall of several seconds.
    public static let `default` = BodyRateLimit(window: .seconds(20), minimum: 20 << 10)
}
