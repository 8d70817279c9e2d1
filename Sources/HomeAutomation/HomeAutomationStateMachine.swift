import AccessoryModel
import AccessoryWire

/// Everything the bridge owes home automation, as a pure state machine: the bridge's events go in, publications come
/// out (a topic, a payload, retained or not), and the shell publishes them and tells it which ones the client's queue
/// refused (``notSent(_:)``), which then come due again. Each accessory's JSON view (retained), its switch events,
/// each hub's availability, the bridge's view, and — unless turned off — Home Assistant discovery.
///
/// Discovery configs are retained and published only when they change, as zigbee2mqtt does: when an accessory is
/// paired, when what its config shows (``AccessoryDevice``) changes, and removed when it is unpaired. At start-up the
/// bridge reads its configs retained on the broker (``retainedMessageSeen(topic:payload:)``): on connecting it
/// publishes only those that differ, and removes those of accessories and hubs that no longer exist. When Home Assistant
/// announces itself (`online` on its status topic), every config goes out again, as its documentation asks.
///
/// Announcing every accessory (on the first connection, when Home Assistant comes back) goes **in slices**
/// (``nextSlice(budget:state:)``), which the shell runs between the messages it handles, so that telemetry never waits
/// for a whole fleet's configs.
public struct HomeAutomationStateMachine: Sendable {
    /// One message to publish, QoS 1.
    public struct Publication: Hashable, Sendable {
        public var topic: String
        /// JSON, text, or nothing (an empty retained message removes what was retained).
        public var payload: [UInt8]
        public var retain: Bool
        /// What it is: what ``notSent(_:)`` makes due again.
        public var subject: Subject
    }

    public enum Subject: Hashable, Sendable {
        case view(AccessoryID)
        case event(AccessoryID)
        case hubAvailability(HubID)
        case bridgeView
        case accessoryConfig(AccessoryDevice)
        /// The removal of an unpaired accessory's config; the device it showed.
        case accessoryRemoval(AccessoryDevice)
        case hubConfig(HubID)
        case bridgeConfig
        /// The removal of a stale config found retained at start-up.
        case staleRemoval(objectID: String)
    }

    public let root: TopicRoot
    public let discovery: HomeAssistantDiscovery?
    private let version: String

    /// Each accessory's device as last announced (or found retained with the same bytes).
    private var announced: [AccessoryID: AccessoryDevice] = [:]
    private var hubsAnnounced: Set<HubID> = []
    /// What the queue refused, due again once it drains (``queueDrained(state:)``; a state change does it sooner).
    private var unannounced: Set<AccessoryID> = []
    private var unannouncedHubs: Set<HubID> = []
    private var bridgeUnannounced = false
    /// Stale configs whose removal the queue refused: removed once it drains, unless a config was published there.
    private var unremoved: Set<String> = []
    /// This bridge's discovery configs found retained at start-up, each with a hash of its bytes; emptied once every
    /// accessory was announced after the first connection.
    private var retainedConfigs: [String: Int] = [:]
    private var lastBridgeView: [UInt8] = []
    /// Announcing every accessory, in slices (``nextSlice(budget:state:)``); `nil` when no pass runs.
    private var pass: AnnouncingPass?

    /// One pass over every accessory: the ids to announce, in order (hubs online went first), and the next one's
    /// index. On Home Assistant's birth (`everything`), every config goes out again, changed or not, without forgetting
    /// what was announced (dropping it and building it again, a million entries at a fleet's scale, ran on the network
    /// thread); those a state change published since the pass began are not sent twice.
    private struct AnnouncingPass {
        let ids: [AccessoryID]
        let everything: Bool
        private var next = 0
        private(set) var publishedSince: Set<AccessoryID> = []

        init(ids: [AccessoryID], everything: Bool) {
            self.ids = ids
            self.everything = everything
        }

        var isDone: Bool { next == ids.count }

        mutating func nextID() -> AccessoryID? {
            guard next < ids.count else { return nil }
            defer { next += 1 }
            return ids[next]
        }

        /// A state change published `id`'s config while the pass runs: a birth's pass need not send it again.
        mutating func published(_ id: AccessoryID) {
            if everything { publishedSince.insert(id) }
        }
    }

    /// - Parameter fleet: for a cluster's slot, the cluster's root: the slot's discovery configs go under a node level
    ///   of their own, with the fleet's ids (``HomeAssistantDiscovery/init(prefix:root:fleet:)``).
    public init(
        root: TopicRoot, homeAssistantPrefix: String?, fleet: TopicRoot? = nil, version: String = Release.version
    ) {
        self.root = root
        self.version = version
        discovery = homeAssistantPrefix.map { HomeAssistantDiscovery(prefix: $0, root: root, fleet: fleet) }
    }

    // MARK: - Events of the bridge

    /// An accessory's state was published: its view, and its config when what that shows changed.
    public mutating func stateChanged(_ state: AccessoryState) -> [Publication] {
        let id = state.accessory.id
        guard state.accessory.registration != .unpaired else {
            // Unpaired: its device and its view go (empty retained messages remove them), the device first: Home
            // Assistant removes its entities before the view they read is emptied, which they would take for a
            // state that is not JSON (an error in its log for each of them).
            var publications: [Publication] = []
            if let discovery, let device = announced.removeValue(forKey: id) {
                unannounced.remove(id)
                publications.append(
                    Publication(discovery.configTopic(of: id), [], retain: true, .accessoryRemoval(device)))
            }
            publications.append(Publication(topic(.accessoryView(accessory: id)), [], retain: true, .view(id)))
            return publications
        }
        var publications = [
            Publication(topic(.accessoryView(accessory: id)), HomeAutomationJSON.view(state), retain: true, .view(id))
        ]
        announce(state, into: &publications)
        return publications
    }

    /// A switch command went out: the accessory's event (not retained, not sent again).
    public func commandSent(_ command: SwitchCommand) -> [Publication] {
        [
            Publication(
                topic(.accessoryEvents(accessory: command.accessoryID)), HomeAutomationJSON.event(command),
                retain: false, .event(command.accessoryID))
        ]
    }

    /// A head-tracking session's news went out (rule 13): the accessory's event (not retained, not sent again).
    public func headTracking(_ event: HeadTrackingEvent) -> [Publication] {
        let id = event.session.accessory
        return [
            Publication(
                topic(.accessoryEvents(accessory: id)), HomeAutomationJSON.event(event), retain: false, .event(id))
        ]
    }

    /// A hub's retained status arrived: its availability, and its device.
    public mutating func hubStatus(_ hub: HubID, online: Bool) -> [Publication] {
        var publications = [
            Publication(
                topic(.hubAvailability(hub: hub)), Array((online ? "online" : "offline").utf8), retain: true,
                .hubAvailability(hub))
        ]
        announce(hub, into: &publications)
        return publications
    }

    /// The bridge's counts: its view, when they changed.
    public mutating func statistics(accessories: Int, worn: Int, routed: Int, hubsOnline: Int) -> [Publication] {
        var json = JSONObjectWriter(capacity: 96)
        json.field("accessories", accessories)
        json.field("hubs_online", hubsOnline)
        json.field("routed", routed)
        json.field("version", version)
        json.field("worn", worn)
        let view = json.finish()
        guard view != lastBridgeView else { return [] }
        lastBridgeView = view
        return [Publication(topic(.bridgeView), view, retain: true, .bridgeView)]
    }

    // MARK: - Home Assistant

    /// Whether `topic` is Home Assistant's birth topic.
    public func isHomeAssistantStatus(_ topic: String) -> Bool { discovery?.statusTopic == topic }

    /// The filter of this bridge's retained discovery configs, read at start-up; `nil` without discovery.
    public var configFilter: String? { discovery?.configFilter }

    /// A retained message read at start-up outside the contract's topics: whether it is one of this bridge's
    /// discovery configs (then remembered, to publish only what differs, and to remove what is stale).
    public mutating func retainedMessageSeen(topic: String, payload: [UInt8]) -> Bool {
        guard let objectID = discovery?.ownObjectID(ofConfigTopic: topic) else { return false }
        if !payload.isEmpty { retainedConfigs[objectID] = Self.fingerprint(payload) }
        return true
    }

    /// The bridge connected for the first time: everything is announced again (in slices), publishing only the
    /// configs that differ from those retained, and removing the retained configs of what no longer exists. What was
    /// announced already (a state can come before the first connection is complete) is not announced again. After a
    /// reconnection, nothing: the broker kept the configs, and what could not be sent waits in the client.
    public mutating func firstConnected(accessories: [AccessoryID], hubsOnline: some Sequence<HubID>) -> [Publication] {
        beginAnnouncing(accessories: accessories, hubsOnline: hubsOnline)
    }

    /// Home Assistant said something on its status topic: `online` (it started) gets every config again, changed or
    /// not, in slices.
    public mutating func homeAssistantStatus(
        _ payload: [UInt8], accessories: [AccessoryID], hubsOnline: some Sequence<HubID>
    ) -> [Publication] {
        guard payload == Array("online".utf8) else { return [] }
        retainedConfigs.removeAll()
        hubsAnnounced.removeAll()
        return beginAnnouncing(accessories: accessories, hubsOnline: hubsOnline, everything: true)
    }

    /// Whether accessories wait to be announced: the shell then calls ``nextSlice(budget:state:)`` between messages.
    public var isAnnouncing: Bool { pass != nil }

    /// The next slice of announcements: at most `budget` accessories' configs (those unchanged since announced cost
    /// nothing); `state` looks an accessory up (`nil`: gone). After the last, the stale retained configs are removed.
    public mutating func nextSlice(budget: Int, state: (AccessoryID) -> AccessoryState?) -> [Publication] {
        guard let everything = pass?.everything else { return [] }
        var publications: [Publication] = []
        var left = budget
        while left > 0, let id = pass?.nextID() {
            guard let state = state(id), state.accessory.registration != .unpaired else { continue }
            let before = publications.count
            announce(state, again: everything, into: &publications)
            if publications.count > before { left -= 1 }
        }
        if pass?.isDone == true {
            pass = nil
            // What is left was not announced: it belongs to an accessory or hub that is gone.
            for stale in retainedConfigs.keys.sorted() { publications.append(removal(of: stale)) }
            retainedConfigs.removeAll()
        }
        return publications
    }

    private mutating func beginAnnouncing(
        accessories: [AccessoryID], hubsOnline: some Sequence<HubID>, everything: Bool = false
    ) -> [Publication] {
        guard let discovery else { return [] }
        var publications: [Publication] = []
        announceBridge(discovery, into: &publications)
        for hub in hubsOnline { announce(hub, into: &publications) }
        pass = AnnouncingPass(ids: accessories, everything: everything)
        return publications
    }

    // MARK: - What could not be published

    /// The client's queue refused `publication`: it is due again once the queue drains (``queueDrained(state:)``)
    /// or, for an accessory's view and config, with its next state.
    public mutating func notSent(_ publication: Publication) {
        switch publication.subject {
        case .accessoryConfig(let device):
            if announced[device.id] == device { announced[device.id] = nil }
            unannounced.insert(device.id)
        case .accessoryRemoval(let device):
            // Still announced: its state, published again, removes it again.
            announced[device.id] = device
        case .hubConfig(let hub):
            hubsAnnounced.remove(hub)
            unannouncedHubs.insert(hub)
        case .bridgeConfig:
            bridgeUnannounced = true
        case .staleRemoval(let objectID):
            unremoved.insert(objectID)
        case .view, .event, .hubAvailability, .bridgeView:
            // A view goes again with its state (the shell tells the bridge's state machine); the others are not kept.
            break
        }
    }

    /// The client's queue has room again: what it refused of discovery, the removals of stale configs first, then the
    /// bridge's config, the hubs' and the accessories' as they are now (`state` looks one up).
    public mutating func queueDrained(state: (AccessoryID) -> AccessoryState?) -> [Publication] {
        guard let discovery else { return [] }
        var publications = unremoved.sorted().map(removal(of:))
        unremoved.removeAll()
        if bridgeUnannounced { announceBridge(discovery, into: &publications) }
        for hub in unannouncedHubs.sorted() { announce(hub, into: &publications) }
        unannouncedHubs.removeAll()
        let due = unannounced
        unannounced = []
        for id in due.sorted() {
            guard let state = state(id), state.accessory.registration != .unpaired else { continue }
            announce(state, into: &publications)
        }
        return publications
    }

    // MARK: - Helpers

    /// The accessory's config (and its hub's) unless announced as it is; `again`: Home Assistant's birth asks for it
    /// anyway, unless a change published it since.
    private mutating func announce(
        _ state: AccessoryState, again: Bool = false, into publications: inout [Publication]
    ) {
        guard let discovery else { return }
        announce(state.accessory.hub, into: &publications)
        let device = AccessoryDevice(state)
        unannounced.remove(device.id)
        let changed = announced.updateValue(device, forKey: device.id) != device
        if again {
            guard changed || pass?.publishedSince.contains(device.id) != true else { return }
        } else {
            guard changed else { return }
            pass?.published(device.id)
        }
        let objectID = discovery.accessoryID(device.id)
        let config = HomeAssistantDiscovery.payload(discovery.accessoryConfig(device))
        if let publication = publication(config: config, objectID: objectID, .accessoryConfig(device)) {
            publications.append(publication)
        }
    }

    private mutating func announce(_ hub: HubID, into publications: inout [Publication]) {
        guard let discovery, hubsAnnounced.insert(hub).inserted else { return }
        unannouncedHubs.remove(hub)
        let config = HomeAssistantDiscovery.payload(discovery.hubConfig(hub))
        if let publication = publication(config: config, objectID: discovery.hubID(hub), .hubConfig(hub)) {
            publications.append(publication)
        }
    }

    /// The bridge's own config, unless the same is retained.
    private mutating func announceBridge(_ discovery: HomeAssistantDiscovery, into publications: inout [Publication]) {
        bridgeUnannounced = false
        let config = HomeAssistantDiscovery.payload(discovery.bridgeConfig())
        if let publication = publication(config: config, objectID: discovery.bridgeID, .bridgeConfig) {
            publications.append(publication)
        }
    }

    /// A config to publish, unless the same bytes are retained already (`nil`); a removal of it still due is moot.
    private mutating func publication(config: [UInt8], objectID: String, _ subject: Subject) -> Publication? {
        guard let discovery else { return nil }
        unremoved.remove(objectID)
        if let retained = retainedConfigs.removeValue(forKey: objectID), retained == Self.fingerprint(config) {
            return nil
        }
        return Publication(discovery.configTopic(objectID), config, retain: true, subject)
    }

    private func removal(of objectID: String) -> Publication {
        Publication(discovery?.configTopic(objectID) ?? objectID, [], retain: true, .staleRemoval(objectID: objectID))
    }

    private func topic(_ topic: Topic) -> String { topic.name(under: root) }

    /// A hash of a config's bytes, taken as one buffer. (`[UInt8].hashValue` hashes them one by one through
    /// `Hashable`, about 150 instructions a byte: with discovery on, most of a restart's rebuild went there.)
    private static func fingerprint(_ config: [UInt8]) -> Int {
        var hasher = Hasher()
        config.withUnsafeBytes { hasher.combine(bytes: $0) }
        return hasher.finalize()
    }
}

extension HomeAutomationStateMachine.Publication {
    init(_ topic: String, _ payload: [UInt8], retain: Bool, _ subject: HomeAutomationStateMachine.Subject) {
        self.init(topic: topic, payload: payload, retain: retain, subject: subject)
    }
}
