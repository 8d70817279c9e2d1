import AccessoryModel
import AccessoryWire
import BridgeCore
import MQTTClient

/// Publishes what home automation reads as the bridge's state changes: each accessory's JSON view (retained), its
/// switch events, each hub's availability, the bridge's view, and — unless turned off — Home Assistant discovery.
///
/// Discovery configs are retained and published only when they change, as zigbee2mqtt does: when an accessory is
/// paired, when what its config shows changes (name, model, hub, sources, pinned source), and removed when it is
/// unpaired. At start-up the bridge reads its configs retained on the broker: on connecting it publishes only those
/// that differ, and removes those of accessories that no longer exist. When Home Assistant announces itself
/// (`online` on its status topic), every config goes out again, as its documentation asks.
///
/// Owned by ``MessageProcessor``, on its thread.
struct HomeAutomationPublisher: Sendable {
    let outbox: Outbox
    let root: TopicRoot
    let discovery: HomeAssistantDiscovery?
    /// ``HomeAssistantDiscovery/configKey(_:)`` of each accessory's config as last published (or found retained).
    private var published: [AccessoryID: Int] = [:]
    private var hubsAnnounced: Set<HubID> = []
    /// Accessories whose config the client's queue refused, announced again once it drains (``queueDrained(_:)``; a
    /// state change does it sooner). Their hub's config is then due again too.
    private var unannounced: Set<AccessoryID> = []
    /// Hubs whose config the queue refused, announced again once it drains (or with one of their accessories).
    private var unannouncedHubs: Set<HubID> = []
    /// The queue refused the bridge's own config: it goes out again once the queue drains.
    private var bridgeUnannounced = false
    /// Object IDs of stale configs (of accessories and hubs gone, found retained at start-up) whose removal the queue
    /// refused: removed once it drains, unless a config was published there meanwhile.
    private var unremoved: Set<String> = []
    /// This bridge's discovery configs found retained at start-up, each with a hash of its bytes; emptied on the
    /// first connection.
    private var retainedConfigs: [String: Int] = [:]
    private var lastBridgeView: [UInt8] = []

    init(outbox: Outbox, root: TopicRoot, homeAssistantPrefix: String?) {
        self.outbox = outbox
        self.root = root
        discovery = homeAssistantPrefix.map { HomeAssistantDiscovery(prefix: $0, root: root) }
    }

    // MARK: - Events of the bridge

    /// An accessory's state was published: its view, and its discovery config if that changed. Returns whether all of
    /// it could be queued: what could not goes out again when the state is published again (a config is then no
    /// longer counted as published).
    @discardableResult
    mutating func stateChanged(_ state: AccessoryState) -> Bool {
        let id = state.accessory.id
        guard state.accessory.registration != .unpaired else {
            // Unpaired: its view and its device go (empty retained messages remove them).
            let viewSent = send(.accessoryView(accessory: id), [], retain: true)
            guard let discovery, let key = published.removeValue(forKey: id) else { return viewSent }
            let configSent = remove(config: discovery.accessoryID(id))
            if !configSent { published[id] = key }
            return viewSent && configSent
        }
        let viewSent = send(.accessoryView(accessory: id), HomeAutomationJSON.view(state), retain: true)
        return announce(state) && viewSent
    }

    /// A switch command went out: the accessory's event.
    func commandSent(_ command: SwitchCommand) {
        send(.accessoryEvents(accessory: command.accessoryID), HomeAutomationJSON.event(command), retain: false)
    }

    /// A hub's retained status arrived.
    mutating func hubStatus(_ hub: HubID, online: Bool) {
        send(.hubAvailability(hub: hub), Array((online ? "online" : "offline").utf8), retain: true)
        announce(hub)
    }

    /// The bridge's counts, published when they changed.
    mutating func bridgeView(_ statistics: BridgeStateMachine.Statistics, hubsOnline: Int) {
        var json = JSONObjectWriter(capacity: 96)
        json.field("accessories", statistics.accessories)
        json.field("hubs_online", hubsOnline)
        json.field("routed", statistics.routed)
        json.field("version", Release.version)
        json.field("worn", statistics.worn)
        let view = json.finish()
        guard view != lastBridgeView else { return }
        lastBridgeView = view
        send(.bridgeView, view, retain: true)
    }

    /// The client's queue has room again: what it refused of discovery, the removals of stale configs first, then the
    /// bridge's config, the hubs' and the accessories' as they are now (`state` looks one up). What the bridge
    /// announces all at once (on connecting, when Home Assistant comes back) is not otherwise sent again until the
    /// accessory changes. (Views and removals of unpaired accessories go out again with their state.)
    mutating func queueDrained(_ state: (AccessoryID) -> AccessoryState?) {
        guard discovery != nil else { return }
        for objectID in unremoved { removeStale(objectID) }
        if bridgeUnannounced { announceBridge() }
        for hub in unannouncedHubs { announce(hub) }
        let due = unannounced
        unannounced = []
        for id in due {
            guard let state = state(id), state.accessory.registration != .unpaired else { continue }
            announce(state)
        }
    }

    // MARK: - Home Assistant

    /// Whether `topic` is Home Assistant's birth topic.
    func isHomeAssistantStatus(_ topic: String) -> Bool { discovery?.statusTopic == topic }

    /// A retained message read at start-up outside the contract's topics: one of this bridge's discovery configs?
    mutating func retainedMessageSeen(topic: String, payload: [UInt8]) -> Bool {
        guard let objectID = discovery?.ownObjectID(ofConfigTopic: topic) else { return false }
        if !payload.isEmpty { retainedConfigs[objectID] = Self.fingerprint(payload) }
        return true
    }

    /// The bridge connected for the first time: the configs that differ from those retained, and the retained
    /// configs of accessories and hubs that no longer exist removed. Views are retained already and not sent again;
    /// after a reconnection, neither are configs (the broker keeps them, and what could not be sent waits in the
    /// client).
    mutating func firstConnected(_ states: some Sequence<AccessoryState>, hubsOnline: Set<HubID>) {
        announceAll(states, hubsOnline: hubsOnline)
    }

    /// Home Assistant (re)started: every config again, changed or not.
    mutating func homeAssistantOnline(_ states: some Sequence<AccessoryState>, hubsOnline: Set<HubID>) {
        retainedConfigs.removeAll()
        announceAll(states, hubsOnline: hubsOnline)
    }

    private mutating func announceAll(_ states: some Sequence<AccessoryState>, hubsOnline: Set<HubID>) {
        guard discovery != nil else { return }
        published.removeAll()
        hubsAnnounced.removeAll()
        announceBridge()
        for state in states where state.accessory.registration != .unpaired { announce(state) }
        for hub in hubsOnline { announce(hub) }
        // What is left was not announced: it belongs to an accessory or hub that is gone.
        for stale in retainedConfigs.keys { removeStale(stale) }
        retainedConfigs.removeAll()
    }

    /// The accessory's config (and its hub's) unless published already; returns whether what was due could be queued
    /// (if not, it is due again).
    @discardableResult
    private mutating func announce(_ state: AccessoryState) -> Bool {
        guard let discovery else { return true }
        let hubSent = announce(state.accessory.hub)
        let id = state.accessory.id
        let key = discovery.configKey(state)
        let previous = published.updateValue(key, forKey: id)
        guard previous != key else { return hubSent }
        guard publish(config: HomeAssistantDiscovery.payload(discovery.accessoryConfig(state)),
            objectID: discovery.accessoryID(id))
        else {
            published[id] = previous
            unannounced.insert(id)
            return false
        }
        unannounced.remove(id)
        return hubSent
    }

    @discardableResult
    private mutating func announce(_ hub: HubID) -> Bool {
        guard let discovery, hubsAnnounced.insert(hub).inserted else { return true }
        guard publish(config: HomeAssistantDiscovery.payload(discovery.hubConfig(hub)), objectID: discovery.hubID(hub))
        else {
            hubsAnnounced.remove(hub)
            unannouncedHubs.insert(hub)
            return false
        }
        unannouncedHubs.remove(hub)
        return true
    }

    /// The bridge's own config; due again once the queue drains if it refused it.
    private mutating func announceBridge() {
        guard let discovery else { return }
        bridgeUnannounced = !publish(
            config: HomeAssistantDiscovery.payload(discovery.bridgeConfig()), objectID: discovery.bridgeID)
    }

    /// Removes the config of an accessory or hub that is gone; due again once the queue drains if it refused it.
    private mutating func removeStale(_ objectID: String) {
        if remove(config: objectID) {
            unremoved.remove(objectID)
        } else {
            unremoved.insert(objectID)
        }
    }

    /// Publishes a config unless the same bytes are retained already; returns whether it is (or could be queued).
    /// A removal of that config still due is then moot.
    @discardableResult
    private mutating func publish(config: [UInt8], objectID: String) -> Bool {
        guard let discovery else { return true }
        if let retained = retainedConfigs.removeValue(forKey: objectID), retained == Self.fingerprint(config) {
            return true
        }
        guard outbox.publish(json: config, to: discovery.configTopic(objectID), retain: true) else { return false }
        unremoved.remove(objectID)
        return true
    }

    /// A hash of a config's bytes, taken as one buffer. (`[UInt8].hashValue` hashes them one by one through
    /// `Hashable`, about 150 instructions a byte: with discovery on, most of a restart's rebuild went there, once for
    /// each retained config and again for each config built after the first connection.)
    private static func fingerprint(_ config: [UInt8]) -> Int {
        var hasher = Hasher()
        config.withUnsafeBytes { hasher.combine(bytes: $0) }
        return hasher.finalize()
    }

    /// Removes a config (an empty retained message); returns whether that could be queued.
    private func remove(config objectID: String) -> Bool {
        guard let discovery else { return true }
        return outbox.publish(json: [], to: discovery.configTopic(objectID), retain: true)
    }

    @discardableResult
    private func send(_ topic: Topic, _ payload: [UInt8], retain: Bool) -> Bool {
        outbox.publish(json: payload, to: topic.name(under: root), retain: retain)
    }
}

extension Outbox {
    /// Publishes plain JSON (or text, or an empty payload) for home automation, QoS 1.
    @discardableResult
    func publish(json payload: [UInt8], to topic: String, retain: Bool) -> Bool {
        publish(
            MQTTMessage(
                topic: topic, payload: payload, qos: .atLeastOnce, retain: retain,
                properties: payload.isEmpty ? .none : MQTTProperties(contentType: "application/json")))
    }
}
