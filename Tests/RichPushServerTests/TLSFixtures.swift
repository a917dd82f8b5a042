import APNsSandbox
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import RichPushTestSupport
@testable import RichPushAPI
import RichPushServer

/// What the HTTPS tests share: a certificate for `serve --tls-cert --tls-key`, and a client that
/// trusts it.
enum TLSFixtures {
    /// A new self-signed certificate and its key, written as `cert.pem` and `cert.key` in `directory`.
    static func certificateFiles(in directory: URL) throws -> (certificate: String, key: String) {
        let (certificate, key) = try APNsSandbox.selfSignedCertificate()
        let certificatePath = directory.appendingPathComponent("cert.pem").path
        let keyPath = directory.appendingPathComponent("cert.key").path
        try certificate.write(toFile: certificatePath, atomically: true, encoding: .utf8)
        try key.write(toFile: keyPath, atomically: true, encoding: .utf8)
        return (certificatePath, keyPath)
    }

    /// A client context that accepts any certificate (the test servers' are self-signed),
    /// offering `protocols` by ALPN.
    static func trustingClient(protocols: [String]) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .none
        configuration.applicationProtocols = protocols
        return try NIOSSLContext(configuration: configuration)
    }

    /// Runs `body` against a live server under `--tls-cert` (a new certificate), configured
    /// further by `configure`.
    static func runServer(_ configure: (inout ServerConfiguration) -> Void, _ body: @Sendable (TestServer) async throws -> Void) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (certificatePath, keyPath) = try certificateFiles(in: dir)
        try await TestServer.run(engine: .embedded, {
            $0.tlsCertificatePath = certificatePath
            $0.tlsKeyPath = keyPath
            configure(&$0)
        }, body)
    }

    /// A client connection over TLS to `port`, offering `protocols` by ALPN: `below` (when
    /// given) between the socket and the client's TLS handler, `above` after it.
    static func connect(port: Int, protocols: [String], below: (any ChannelHandler & Sendable)? = nil,
                        above: any ChannelHandler & Sendable) async throws -> any Channel {
        let context = try trustingClient(protocols: protocols)
        return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton.next())
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let below { try channel.pipeline.syncOperations.addHandler(below) }
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: nil))
                    try channel.pipeline.syncOperations.addHandler(above)
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
    }
}
