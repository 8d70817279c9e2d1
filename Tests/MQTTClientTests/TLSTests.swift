import Foundation
import MQTTClient
import Testing
import TestSupport

/// TLS against a real mosquitto TLS listener, with certificates from deploy/mosquitto/make-certs.sh.
@Suite struct TLSTests {
    @Test func publishesAndReceivesOverTLSWithAPassword() async throws {
        let certificates = try await TestCertificates.make()
        let broker = try await MosquittoBroker(
            users: ["bridge": "s3cret"], extraConfig: TestCertificates.listener(certificates))
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
        let certificates = try await TestCertificates.make()
        let broker = try await MosquittoBroker(
            extraConfig: TestCertificates.listener(certificates, requireClientCertificate: true))
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
        let certificates = try await TestCertificates.make()
        let stranger = try await TestCertificates.make()
        let broker = try await MosquittoBroker(extraConfig: TestCertificates.listener(certificates))
        let client = try TestClient(broker) {
            $0.host = "localhost"
            $0.tls = .init(caFile: stranger.path + "/ca.crt")
        }
        try client.start()
        // The handshake fails, which trying again cannot mend: the first wait for a connection ends with it.
        let error = await #expect(throws: MQTTError.self) { try await client.client.waitUntilConnected() }
        #expect(error?.kind == .library && error?.isPermanent == true, "\(String(describing: error))")
        #expect(error?.hint?.contains("TLS") == true)
        try await broker.waitForLog("OpenSSL Error")
        #expect(!client.client.isConnected)
        #expect(!client.inbox.events.contains { $0.isConnected })
    }

    @Test func aPlainClientCannotTalkToATLSListener() async throws {
        let certificates = try await TestCertificates.make()
        let broker = try await MosquittoBroker(extraConfig: TestCertificates.listener(certificates))
        let client = try TestClient(broker)
        let offset = broker.logLength
        try client.start()
        // The broker hears no TLS handshake and closes the connection; the client tries again, in vain.
        try await broker.waitForLog("wrong version number", after: offset)
        let error = await #expect(throws: MQTTError.self) {
            try await client.client.waitUntilConnected(timeout: .seconds(1))
        }
        #expect(error?.kind == .notConnected)
        #expect(!client.client.isConnected)
        #expect(!client.inbox.events.contains { $0.isConnected })
    }
}
