import APNsSandbox
import Foundation
import NIOSSL

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
}
