import AccessoryModel
import AccessoryWire
import Foundation
import Logging
import MQTTClient
import Synchronization

/// The broker's users and their roles (``BrokerRole``), through mosquitto's dynamic security plugin: its JSON commands
/// go to `$CONTROL/dynamic-security/v1`, and its answers come back on `$CONTROL/dynamic-security/v1/response`. Every
/// change applies at once, while the broker runs. Log in as the plugin's admin (`mosquitto_ctrl dynsec init` makes
/// one; docs/security.md).
///
/// Every role may subscribe to any filter, and reads only what ``BrokerRole/reads`` says: the same semantics as
/// deploy/mosquitto/acl, so that a client behaves the same under either.
public final class BrokerRoles: Sendable {
    /// A command the plugin refused, with its reason ("Client already exists", "Role not found", …).
    public struct Refusal: Error, CustomStringConvertible {
        public var command: String
        public var reason: String

        public var description: String { "\(command): \(reason)" }
    }

    private static let requestTopic = "$CONTROL/dynamic-security/v1"
    private static let responseTopic = "$CONTROL/dynamic-security/v1/response"

    private let client: MQTTClient
    private let timeout: Duration
    private let logger: Logger
    private let pending = PendingRequests<String, [UInt8]>()

    public init(mqtt: MQTTConfiguration, timeout: Duration = .seconds(10), logger: Logger) throws(MQTTError) {
        self.timeout = timeout
        self.logger = logger
        client = try MQTTClient(configuration: mqtt, logger: logger)
    }

    deinit {
        client.syncClose()
    }

    /// Connects as the admin. `timeout`: see ``AccessoryHub/start(timeout:)``.
    public func start(timeout: Duration? = nil) async throws(MQTTError) {
        try client.subscribe(Self.responseTopic, qos: .atLeastOnce)
        try client.start(onEvent: { _ in }, onMessage: { [weak self] in self?.receive($0) })
        try await client.waitUntilConnected(timeout: timeout)
    }

    public func stop() async {
        await client.close()
    }

    // MARK: The roles of the contract

    /// Denies what no role grants (except unsubscribing), and makes the shared roles, `bridge` and `home-automation`,
    /// or brings them up to date. Run it again after an upgrade, or with another prefix.
    public func setUp(root: TopicRoot, homeAssistantPrefix: String) async throws {
        try await send([
            [
                "command": "setDefaultACLAccess",
                "acls": [
                    ["acltype": "publishClientSend", "allow": false], ["acltype": "publishClientReceive", "allow": false],
                    ["acltype": "subscribe", "allow": false], ["acltype": "unsubscribe", "allow": true],
                ],
            ]
        ])
        try await put(.bridge(root: root, homeAssistantPrefix: homeAssistantPrefix))
        try await put(.homeAutomation(root: root, homeAssistantPrefix: homeAssistantPrefix))
    }

    /// Adds `user` (a hub's user name is its hub id) with a role of its own, `hub:{id}`.
    public func addHub(_ hub: HubID, password: String, root: TopicRoot) async throws {
        let role = BrokerRole.hub(hub, root: root)
        try await put(role)
        try await addClient(hub.rawValue, password: password, role: role.name)
    }

    /// Adds a playing device, whose user name is its address as in its topics (`123456789abc`), with a role of its
    /// own, `device:{address}`.
    public func addDevice(_ source: BluetoothAddress, password: String, root: TopicRoot) async throws {
        let role = BrokerRole.device(source, root: root)
        try await put(role)
        try await addClient(source.topicID, password: password, role: role.name)
    }

    /// Adds `user` with a shared role that ``setUp(root:homeAssistantPrefix:)`` made: `bridge` or `home-automation`.
    public func addClient(_ user: String, password: String, role: String) async throws {
        try await send([
            ["command": "createClient", "username": user, "password": password, "roles": [["rolename": role]]]
        ])
    }

    /// Gives `user` a new password (its connections are closed: it logs in again with it).
    public func setPassword(of user: String, to password: String) async throws {
        try await send([["command": "setClientPassword", "username": user, "password": password]])
    }

    /// Removes `user`, and its own role if it has one (a hub's or a device's); its connections are closed.
    public func remove(_ user: String) async throws {
        try await send([["command": "deleteClient", "username": user]])
        for role in ["hub:\(user)", "device:\(user)"] {
            do {
                try await send([["command": "deleteRole", "rolename": role]])
            } catch let refusal as Refusal where refusal.reason == "Role not found" {
                continue
            }
        }
    }

    /// Creates `role`, or replaces the rules of the role of that name.
    private func put(_ role: BrokerRole) async throws {
        let acls = Self.acls(of: role)
        do {
            try await send([["command": "createRole", "rolename": role.name, "acls": acls]])
        } catch let refusal as Refusal where refusal.reason == "Role already exists" {
            try await send([["command": "modifyRole", "rolename": role.name, "acls": acls]])
        }
    }

    /// The plugin's rules for `role`: any subscription, and what it writes and reads.
    static func acls(of role: BrokerRole) -> [[String: Any]] {
        [["acltype": "subscribePattern", "topic": "#", "allow": true]]
            + role.writes.map { ["acltype": "publishClientSend", "topic": $0, "allow": true] }
            + role.reads.map { ["acltype": "publishClientReceive", "topic": $0, "allow": true] }
    }

    // MARK: Request and response

    /// Sends `commands` in one request and waits for the plugin's answer; throws the first refusal.
    private func send(_ commands: [[String: Any]]) async throws {
        let token = String(UInt64.random(in: .min ... .max), radix: 16)
        var tagged = commands
        for index in tagged.indices { tagged[index]["correlationData"] = "\(token)-\(index)" }
        let payload = [UInt8](try JSONSerialization.data(withJSONObject: ["commands": tagged]))
        let names = commands.map { $0["command"] as? String ?? "?" }.joined(separator: ", ")
        let timeout = timeout
        let answer = try await pending.send(
            token, timeout: timeout,
            timeoutReason: { "the broker did not answer \(names) within \(timeout): is its dynamic security plugin on?" },
            publish: { try client.publish(MQTTMessage(topic: Self.requestTopic, payload: payload, qos: .atLeastOnce)) }
        ).get()
        guard let object = try JSONSerialization.jsonObject(with: Data(answer)) as? [String: Any],
            let responses = object["responses"] as? [[String: Any]]
        else { throw Refusal(command: names, reason: "an answer that is not the plugin's JSON") }
        for response in responses {
            if let error = response["error"] as? String {
                throw Refusal(command: response["command"] as? String ?? names, reason: error)
            }
        }
    }

    /// Hands each answer to the request whose token its correlation data carries (answers go to every admin).
    private func receive(_ message: MQTTMessage) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any],
            let responses = object["responses"] as? [[String: Any]],
            let correlation = responses.lazy.compactMap({ $0["correlationData"] as? String }).first,
            let token = correlation.split(separator: "-").first
        else {
            logger.debug("an answer of the dynamic security plugin that is not ours")
            return
        }
        pending.finish(String(token), with: .success(message.payload))
    }
}
