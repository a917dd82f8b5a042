import ArgumentParser
import Crypto
import Foundation
import PushDelivery
import RichPushCore

/// `richpush webpush-encrypt` (hidden): what Web Push encryption costs per message, for
/// `bench/platforms.sh`. Each message takes a fresh P-256 key pair and one ECDH (RFC 8291), then
/// HKDF and AES-128-GCM; the key pair and ECDH alone are timed too. Microseconds per message are
/// milliseconds per 1,000 subscribers, on one core.
struct WebPushEncryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webpush-encrypt",
        abstract: "Times Web Push message encryption (RFC 8291) and prints one JSON object.",
        shouldDisplay: false)

    @Option(help: "Messages to encrypt.") var count = 2000
    @Option(help: "Plaintext bytes per message.") var size = 300

    func run() throws {
        guard count > 0, (1...WebPushEncryption.maxPlaintext).contains(size) else {
            throw ValidationError("--count must be positive and --size 1 to \(WebPushEncryption.maxPlaintext)")
        }
        let receiver = P256.KeyAgreement.PrivateKey()
        let subscription = try WebPushSubscription(endpoint: "https://push.example.net/p/1", p256dh: Array(receiver.publicKey.x963Representation),
                                                   auth: (0..<16).map { _ in .random(in: 0...255) })
        let plaintext = [UInt8](repeating: 0x61, count: size)
        /// Microseconds per message of `body` run `count` times.
        func micros(_ body: () throws -> Void) rethrows -> Double {
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<count { try body() }
            return Double(DispatchTime.now().uptimeNanoseconds - start) / 1000 / Double(count)
        }
        var bytes = 0, secrets = 0
        let whole = try micros { bytes &+= try WebPushEncryption.encrypt(plaintext, for: subscription).count }
        let ecdh = try micros {
            let secret = try P256.KeyAgreement.PrivateKey().sharedSecretFromKeyAgreement(with: receiver.publicKey)
            secrets &+= secret.withUnsafeBytes { Int($0[0]) }
        }
        let result: [String: Any] = [
            "messages": count, "plaintextBytes": size, "bodyBytes": bytes / count,
            "encryptMicrosecondsPerMessage": (whole * 10).rounded() / 10,
            "keyPairAndECDHMicrosecondsPerMessage": (ecdh * 10).rounded() / 10,
        ]
        _ = secrets
        let data = try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }
}
