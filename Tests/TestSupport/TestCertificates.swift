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
        let output = directory.appendingPathExtension("log")
        defer { try? FileManager.default.removeItem(at: output) }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("deploy/mosquitto/make-certs.sh")
        let process = try ChildProcess(executable: script.path, arguments: [directory.path], outputPath: output.path)
        guard try await process.exit(timeout: .seconds(30)) == 0 else {
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            throw MosquittoBrokerError("make-certs.sh failed: \(text)")
        }
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
