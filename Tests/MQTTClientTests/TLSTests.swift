import Foundation
import MQTTClient
import Testing
import TestSupport

/// TLS against a real mosquitto TLS listener, with certificates from deploy/mosquitto/make-certs.sh.
@Suite struct TLSTests {
    /// A throw-away CA, server and client certificates, made by the script the README gives to people.
    static func certificates() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("certs-\(UUID().uuidString)")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("deploy/mosquitto/make-certs.sh")
        let process = Process()
        process.executableURL = script
        process.arguments = [directory.path]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return directory
    }

    static func tlsListener(_ certificates: URL, requireClientCertificate: Bool = false) -> String {
        """
        cafile \(certificates.path)/ca.crt
        certfile \(certificates.path)/server.crt
        keyfile \(certificates.path)/server.key
        require_certificate \(requireClientCertificate)
        """
    }

    @Test func publishesAndReceivesOverTLSWithAPassword() async throws {
        let certificates = try Self.certificates()
        let broker = try await MosquittoBroker(users: ["bridge": "s3cret"], extraConfig: Self.tlsListener(certificates))
        let client = try TestClient(broker) {
            $0.host = "localhost"
            $0.tls = .init(caFile: certificates.path + "/ca.crt")
            $0.username = "bridge"
            $0.password = "s3cret"
        }
        try await client.connect()
        try await client.subscribe("tls/echo")
        try client.client.publish(MQTTMessage(topic: "tls/echo", payload: Array("over TLS".utf8)))
        let echoed = try await client.inbox.waitForMessages(count: 1, on: "tls/echo")
        #expect(echoed.map(\.payload) == [Array("over TLS".utf8)])
    }

    @Test func aClientCertificateIsPresentedWhenRequired() async throws {
        let certificates = try Self.certificates()
        let broker = try await MosquittoBroker(
            extraConfig: Self.tlsListener(certificates, requireClientCertificate: true))
        let client = try TestClient(broker) {
            $0.host = "localhost"
            $0.tls = .init(
                caFile: certificates.path + "/ca.crt", certificateFile: certificates.path + "/client.crt",
                keyFile: certificates.path + "/client.key")
        }
        try await client.connect()
        #expect(client.client.isConnected)
    }

    @Test func aBrokerSignedByAnotherCAIsNotTrusted() async throws {
        let certificates = try Self.certificates()
        let stranger = try Self.certificates()
        let broker = try await MosquittoBroker(extraConfig: Self.tlsListener(certificates))
        let client = try TestClient(broker) {
            $0.host = "localhost"
            $0.tls = .init(caFile: stranger.path + "/ca.crt")
        }
        try client.start()
        // The handshake fails, and keeps failing on every retry: never connected.
        try await Task.sleep(for: .seconds(1))
        #expect(!client.client.isConnected)
        #expect(!client.inbox.events.contains { $0.isConnected })
        #expect(broker.log().contains("OpenSSL Error") || broker.log().contains("certificate"), "\(broker.log())")
    }

    @Test func aPlainClientCannotTalkToATLSListener() async throws {
        let certificates = try Self.certificates()
        let broker = try await MosquittoBroker(extraConfig: Self.tlsListener(certificates))
        let client = try TestClient(broker)
        try client.start()
        try await Task.sleep(for: .seconds(1))
        #expect(!client.client.isConnected)
    }
}
