import Foundation
import MQTTClient
import Testing
import TestSupport

/// Bad arguments and refusals become ``MQTTError``s and events.
@Suite(.timeLimit(.minutes(1)))
struct ErrorTests {
    static let mosqErrInval: Int32 = 3

    @Test(arguments: ["a/#", "a/+", "+", "#", "a/+/b", "", "a/#/b"])
    func publishingToATopicWithWildcardsIsAnInvalidArgument(_ topic: String) async throws {
        let broker = try await MosquittoBroker()
        let client = try TestClient(broker)
        try await client.connect()
        let error = #expect(throws: MQTTError.self) {
            try client.client.publish(MQTTMessage(topic: topic, payload: Array("x".utf8)))
        }
        #expect(error?.kind == .invalidArgument)
        #expect(error?.code == Self.mosqErrInval)
        #expect(client.client.isConnected)  // nothing was sent
    }

    @Test(arguments: ["a/#/b", "a#", "a/b+", "+a/b", ""])
    func subscribingToAMalformedFilterIsAnInvalidArgument(_ filter: String) throws {
        let client = try MQTTClient(configuration: MQTTConfiguration(clientID: "filters"), logger: testLogger)
        defer { client.syncClose() }
        let error = #expect(throws: MQTTError.self) { try client.subscribe(filter) }
        #expect(error?.kind == .invalidArgument)
    }

    @Test(arguments: ["a/#", "+/b", "#", "a/+/c", "$SYS/#"])
    func wellFormedFiltersAreAccepted(_ filter: String) throws {
        let client = try MQTTClient(configuration: MQTTConfiguration(clientID: "filters"), logger: testLogger)
        defer { client.syncClose() }
        #expect(throws: Never.self) { try client.subscribe(filter) }
    }

    @Test func invalidConfigurationIsRefusedAtInit() throws {
        var shortKeepAlive = MQTTConfiguration(clientID: "c")
        shortKeepAlive.keepAlive = .seconds(2)
        var noID = MQTTConfiguration(clientID: "")
        noID.cleanStart = false
        var badPort = MQTTConfiguration(clientID: "c")
        badPort.port = 70_000
        for configuration in [shortKeepAlive, noID, badPort] {
            let error = #expect(throws: MQTTError.self) {
                let client = try MQTTClient(configuration: configuration, logger: testLogger)
                client.syncClose()
            }
            #expect(error?.kind == .invalidArgument)
        }
    }

    @Test func subscriptionRefusedByTheBrokerIsReported() async throws {
        let broker = try await MosquittoBroker(extraConfig: try dynamicSecurity(allowingSubscriptionsTo: "allowed/#"))
        let client = try TestClient(broker)
        // Remembered before the connection, sent with the CONNACK.
        try client.client.subscribe("allowed/x")
        try client.client.subscribe("denied/before")
        try await client.connect()
        // Sent at once while connected.
        try client.client.subscribe("denied/live")

        let refusals = try await client.inbox.waitForEvents(count: 2) {
            if case .subscriptionRefused = $0 { true } else { false }
        }
        let refused = refusals.compactMap { event -> (String, MQTTError)? in
            if case .subscriptionRefused(let filter, let error) = event { (filter, error) } else { nil }
        }
        #expect(refused.map(\.0) == ["denied/before", "denied/live"])
        for (_, error) in refused {
            #expect(error.kind == .subscriptionRefused)
            #expect(error.code == 0x87)  // not authorized
            #expect(error.message == "Not authorized")
        }
        // The allowed one works.
        try await broker.publish(topic: "allowed/x", message: "ok", qos: 1)
        #expect(try await client.inbox.waitForMessages(count: 1).map(\.text) == ["ok"])
    }
}

/// mosquitto's dynamic security plugin, letting anonymous clients subscribe only to `filter` (mosquitto 2.0's
/// `acl_file` grants every subscription and filters at delivery, so it never refuses one in its SUBACK).
private func dynamicSecurity(allowingSubscriptionsTo filter: String) throws -> String {
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so", "/usr/lib/aarch64-linux-gnu/mosquitto_dynamic_security.so",
        "/usr/lib/mosquitto_dynamic_security.so", "/usr/local/lib/mosquitto_dynamic_security.so",
    ]
    guard let plugin = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) else {
        throw MosquittoBrokerError(
            "mosquitto_dynamic_security.so not found (looked in \(candidates)): run `make test`, which installs mosquitto"
        )
    }
    let configuration = TemporaryFiles.path("dynsec", suffix: ".json")
    try """
    {
      "defaultACLAccess": {"publishClientSend": true, "publishClientReceive": true, "subscribe": false, "unsubscribe": true},
      "clients": [],
      "groups": [{"groupname": "anonymous", "roles": [{"rolename": "limited"}]}],
      "roles": [{"rolename": "limited", "acls": [{"acltype": "subscribePattern", "topic": "\(filter)", "allow": true}]}],
      "anonymousGroup": "anonymous"
    }
    """.write(to: configuration, atomically: true, encoding: .utf8)
    return "plugin \(plugin)\nplugin_opt_config_file \(configuration.path)\n"
}
