import Foundation

/// Throw-away TLS material for the tests: a CA with server and client certificates (`ca.crt`, `server.crt`,
/// `server.key`, `client.crt`, `client.key`) made by deploy/mosquitto/make-certs.sh, the script docs/running.md gives
/// people.
///
/// Each set is a directory of its own under the temporary directory, removed when the test process exits
/// (``TemporaryFiles``).
public enum TestCertificates {
    /// A new set; its directory.
    public static func make() async throws -> URL {
        let directory = TemporaryFiles.path("certs")
        let script = RepositoryFiles.url("deploy/mosquitto/make-certs.sh")
        try await MosquittoBroker.run(
            script.path, [directory.path], outputIn: FileManager.default.temporaryDirectory)
        return directory
    }

    /// The listener options of a broker serving `certificates` (after its `listener` line).
    public static func listener(_ certificates: URL, requireClientCertificate: Bool = false) -> String {
        """
        cafile \(certificates.path)/ca.crt
        certfile \(certificates.path)/server.crt
        keyfile \(certificates.path)/server.key
        require_certificate \(requireClientCertificate)
        """
    }
}
