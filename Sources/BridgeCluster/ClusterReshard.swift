import AccessoryBridge
import AccessoryModel
import AccessoryWire
import Cluster
import Foundation
import HomeAutomation
import Logging
import MQTTClient

/// `accessory-bridge reshard`: moves a cluster to another slot count (docs/scale-out.md, "Changing the slot count").
/// It records `N resharding` in etcd (``ReshardPlan/decide(cluster:recorded:to:)``), at which every running member
/// leaves (its slots stop, its lease is revoked) and waits; once every member has left, it moves each accessory's
/// retained state (its pins and switching choice with it) to the slot its hub belongs to now, removing the old copy
/// and its view (``ReshardPlan/steps(for:to:)``); it hands each Home Assistant device that changes slot over to its new
/// slot's config topic, and when the count shrinks removes what else the slots that are gone retained for Home
/// Assistant and of the hubs' statuses; it writes the device listings anew, and records `N`, at which the members
/// join again with `N` slots. The owner of slot 0 then says the new count in the bridge's layout, which hubs that
/// follow it move to. Run again after it was interrupted, it finishes what is left.
public enum ClusterReshard {
    /// What a reshard did.
    public struct Summary: Hashable, Sendable, CustomStringConvertible {
        public var from: ClusterSlots
        public var to: ClusterSlots
        /// States found, moved to their new slot, and older copies removed.
        public var states = 0
        public var moved = 0
        public var removed = 0
        /// Retained states that could not be read (left where they are, and logged).
        public var unreadable = 0
        /// Home Assistant devices (accessories and hubs) whose entities were handed over to their new slot's config
        /// topic (``HomeAssistantDiscovery/handOverPayload``), so that they stay the same devices and entities.
        public var configsHandedOver = 0
        /// What the slots that are gone retained for Home Assistant (configs) and of the hubs (statuses), removed.
        public var configsRemoved = 0
        public var hubStatusesRemoved = 0
        /// Devices listed anew in etcd, by the slots that list them under the new count.
        public var devices = 0
        /// The cluster had the count already, and no reshard was under way.
        public var nothingToDo = false

        public var description: String {
            if nothingToDo { return "the cluster has \(to.count) slots already: nothing to do" }
            return "\(from.count) → \(to.count) slots: \(states) accessory states, \(moved) moved, \(removed) older copies "
                + "removed, \(unreadable) unreadable; \(configsHandedOver) Home Assistant devices handed over to their "
                + "new slot; of the slots gone, \(configsRemoved) discovery configs and "
                + "\(hubStatusesRemoved) hub statuses removed; \(devices) devices listed anew"
        }
    }

    /// Why a reshard did not go ahead.
    public struct Refused: Error, CustomStringConvertible {
        public var description: String
    }

    /// Moves `cluster` to `to` slots (the cluster's own ``ClusterConfiguration/slots`` is not read).
    public static func run(
        cluster: ClusterConfiguration, to: ClusterSlots, bridge: BridgeConfiguration, store: any CoordinationStore,
        logger: Logger
    ) async throws -> Summary {
        guard let from = try await record(cluster: cluster, to: to, store: store, logger: logger) else {
            var summary = Summary(from: to, to: to)
            summary.nothingToDo = true
            return summary
        }
        var summary = Summary(from: from, to: to)
        let accessories = try await move(cluster: cluster, bridge: bridge, summary: &summary, logger: logger)
        summary.devices = try await list(ReshardPlan.listings(of: accessories, to: to), cluster, store)
        try await finish(cluster: cluster, to: to, store: store)
        return summary
    }

    /// The count recorded without its "resharding": members may join.
    private static func finish(cluster: ClusterConfiguration, to: ClusterSlots, store: any CoordinationStore) async throws {
        let keys = ClusterKeys(cluster: cluster.name)
        let resharding = ReshardPlan.Recorded.resharding(to: to)
        let finished = try await inSession(store) { session in
            guard let layout = try await store.get(keys.layout, in: session), layout.value == resharding else {
                return false
            }
            return try await store.commit(
                CoordinationTransaction(
                    conditions: [.init(key: keys.layout, modRevision: layout.modRevision)],
                    puts: [.init(key: keys.layout, value: "\(to.count)", lifetime: .untilDeleted)]),
                in: session) != nil
        }
        guard finished else {
            throw Refused(description: "cluster \(cluster.name)'s slot count changed during the reshard: run it again")
        }
    }

    /// Runs `body` under a lease of its own (etcd's calls are made in a session), revoked after.
    private static func inSession<T: Sendable>(
        _ store: any CoordinationStore, _ body: (LeaseSession) async throws -> T
    ) async throws -> T {
        let session = LeaseSession(lease: try await store.grantLease(ttl: .seconds(10)))
        do {
            let result = try await body(session)
            session.close()
            try? await store.revoke(session.lease)
            return result
        } catch {
            session.close()
            try? await store.revoke(session.lease)
            throw error
        }
    }

    /// Writes the device listings anew (the old ones named the old slots): one transaction per 64 devices.
    private static func list(
        _ listings: [BluetoothAddress: ListerSlots], _ cluster: ClusterConfiguration, _ store: any CoordinationStore
    ) async throws -> Int {
        let keys = ClusterKeys(cluster: cluster.name)
        return try await inSession(store) { session in
            try await list(listings, keys, store, session)
        }
    }

    private static func list(
        _ listings: [BluetoothAddress: ListerSlots], _ keys: ClusterKeys, _ store: any CoordinationStore,
        _ session: LeaseSession
    ) async throws -> Int {
        _ = try await store.commit(CoordinationTransaction(prefixDeletes: keys.deviceListings), in: session)
        let devices = listings.keys.sorted()
        for start in stride(from: 0, to: devices.count, by: 64) {
            let puts = devices[start..<min(start + 64, devices.count)].flatMap { device in
                let listers = listings[device]!
                let value = "\(listers)"
                return [CoordinationTransaction.Put(key: keys.listers(device), value: value, lifetime: .untilDeleted)]
                    + (listers.slots.count >= 2
                        ? [CoordinationTransaction.Put(key: keys.shared(device), value: value, lifetime: .untilDeleted)]
                        : [])
            }
            _ = try await store.commit(CoordinationTransaction(puts: puts), in: session)
        }
        return devices.count
    }

    /// Records `N resharding` in etcd and waits until every member has left; returns the count it replaced (`nil`:
    /// the cluster has the count already, and nothing is done).
    private static func record(
        cluster: ClusterConfiguration, to target: ClusterSlots, store: any CoordinationStore, logger: Logger
    ) async throws -> ClusterSlots? {
        let keys = ClusterKeys(cluster: cluster.name)
        return try await inSession(store) { session in try await record(cluster, target, keys, store, session, logger) }
    }

    private static func record(
        _ cluster: ClusterConfiguration, _ target: ClusterSlots, _ keys: ClusterKeys, _ store: any CoordinationStore,
        _ session: LeaseSession, _ logger: Logger
    ) async throws -> ClusterSlots? {
        let layout = try await store.get(keys.layout, in: session)
        let decision = ReshardPlan.decide(cluster: cluster.name, recorded: layout?.value, to: target)
        let (from, to): (ClusterSlots, ClusterSlots)
        switch decision {
        case .refuse(let reason): throw Refused(description: reason)
        case .nothing(let count):
            logger.info("the cluster has this slot count already: nothing to do", metadata: ["slots": "\(count.count)"])
            return nil
        case .resume(let count): (from, to) = (count, count)
        case .record(let old, let new): (from, to) = (old, new)
        }
        // "resharding" until the states are moved: a member started meanwhile refuses to join.
        let written = try await store.commit(
            CoordinationTransaction(
                conditions: [.init(key: keys.layout, modRevision: layout?.modRevision ?? 0)],
                puts: [.init(key: keys.layout, value: ReshardPlan.Recorded.resharding(to: to), lifetime: .untilDeleted)]),
            in: session)
        guard written != nil else {
            throw Refused(description: "cluster \(cluster.name)'s slot count changed meanwhile: run reshard again")
        }
        logger.info(
            from == to ? "resuming an unfinished reshard" : "resharding the cluster",
            metadata: ["from": "\(from.count)", "to": "\(to.count)"])
        try await waitUntilEveryMemberLeft(keys, store, session, logger)
        return from
    }

    /// How long the members have to leave (each stops its slots, then revokes its lease).
    static let membersLeave = Duration.seconds(60)

    /// Waits until no member is registered and no slot is claimed: the members that saw `N resharding` have left.
    private static func waitUntilEveryMemberLeft(
        _ keys: ClusterKeys, _ store: any CoordinationStore, _ session: LeaseSession, _ logger: Logger
    ) async throws {
        let deadline = ContinuousClock.now + membersLeave
        var logged = false
        while true {
            let entries = try await store.read(prefix: keys.prefix, in: session).entries
            let members = entries.compactMap { if case .member(let name)? = keys.subject(of: $0.key) { name } else { nil } }
            let claims = entries.count { if case .slot? = keys.subject(of: $0.key) { true } else { false } }
            if members.isEmpty && claims == 0 { return }
            guard ContinuousClock.now < deadline else {
                throw Refused(
                    description: """
                        members \(members.sorted().joined(separator: ", ")) did not leave within \(membersLeave) (\(claims) \
                        slots still claimed): a member of a release before the reshard's does not follow it; stop it, \
                        then run reshard again
                        """)
            }
            if !logged && !members.isEmpty {
                logger.info("waiting for the members to leave", metadata: ["members": "\(members.sorted())"])
                logged = true
            }
            _ = try await store.keepAlive(session.lease)
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    /// Reads every slot's retained states and Home Assistant configs (and, of the slots gone, the hubs' statuses), and
    /// moves, hands over or removes them; returns each accessory's hub and the devices it lists.
    private static func move(
        cluster: ClusterConfiguration, bridge: BridgeConfiguration, summary: inout Summary, logger: Logger
    ) async throws -> [(hub: HubID, devices: [BluetoothAddress])] {
        let root = bridge.topicRoot
        let gone = summary.to.count..<max(summary.to.count, summary.from.count)
        let slots = summary.to
        let slotRoot = { (slot: Int) in slots.root(of: slot, under: root) }
        var filters = [Topic.Kind.accessoryState.filterInEverySlot(under: root)]
        for slot in gone {
            filters.append(Topic.Kind.hubStatus.filter(under: slotRoot(slot)))
        }
        let discoveries = bridge.homeAssistantPrefix.map { prefix in
            (0..<max(summary.to.count, summary.from.count)).map {
                HomeAssistantDiscovery(prefix: prefix, root: slotRoot($0), fleet: root)
            }
        } ?? []
        filters += discoveries.map(\.configFilter)
        let client = try MQTTClient(
            configuration: bridge.mqtt.companion(clientID: "\(cluster.name)-reshard"), logger: logger)
        let accessories: [(hub: HubID, devices: [BluetoothAddress])]
        do {
            let retained = try await readRetained(
                client, filters: filters, marker: root.rebuildMarker("reshard-\(UUID().uuidString)"),
                timeout: bridge.rebuildTimeout)
            accessories = try apply(
                retained, root: root, gone: gone, discoveries: discoveries, to: client, summary: &summary, logger: logger)
            // The new layout before the members serve again: hubs that follow it move now, and none of their
            // requests reaches a slot that would refuse it as another slot's hub.
            try client.publish(
                BridgeStatuses.layout(
                    BridgeLayout(slots: summary.to, version: bridge.version), under: root, format: bridge.payloadFormat))
        } catch {
            await client.close()
            throw error
        }
        // Closing waits for the broker's acknowledgement of what was published.
        await client.close()
        return accessories
    }

    /// Every retained message under `filters`, by topic: those that arrive before `marker`, published after the
    /// subscriptions, comes back.
    private static func readRetained(
        _ client: MQTTClient, filters: [String], marker: String, timeout: Duration
    ) async throws -> [String: MQTTMessage] {
        for filter in filters + [marker] {
            try client.subscribe(filter, qos: .atLeastOnce)
        }
        let stream = try client.startStreaming()
        try await client.waitUntilConnected(timeout: timeout)
        try client.publish(MQTTMessage(topic: marker, payload: Array("reshard".utf8)))
        let timer = Task {
            try await Task.sleep(for: timeout)
            await client.close()
        }
        defer { timer.cancel() }
        var retained: [String: MQTTMessage] = [:]
        for await message in stream {
            if message.topic == marker { return retained }
            if message.retain && !message.payload.isEmpty { retained[message.topic] = message }
        }
        throw Refused(description: "the broker's retained states did not all arrive within \(timeout)")
    }

    private static func apply(
        _ retained: [String: MQTTMessage], root: TopicRoot, gone: Range<Int>, discoveries: [HomeAssistantDiscovery],
        to client: MQTTClient, summary: inout Summary, logger: Logger
    ) throws -> [(hub: HubID, devices: [BluetoothAddress])] {
        let codec = WireCodec()
        var states: [ReshardPlan.Retained] = []
        var messages: [ReshardPlan.Retained: MQTTMessage] = [:]
        var devices: [ReshardPlan.Retained: [BluetoothAddress]] = [:]
        func remove(_ topic: String) throws {
            try client.publish(MQTTMessage(topic: topic, payload: [], qos: .atLeastOnce, retain: true))
        }
        func slotRoot(_ slot: Int) -> TopicRoot { summary.to.root(of: slot, under: root) }
        var configs: [(topic: String, slot: Int, device: HomeAssistantDiscovery.ConfiguredDevice)] = []
        let slotOfNode = Dictionary(
            discoveries.enumerated().compactMap { slot, discovery in discovery.node.map { ($0, slot) } }) { $1 }
        for (topic, message) in retained.sorted(by: { $0.key < $1.key }) {
            guard let (slot, rest) = slotAndRest(of: topic, under: root) else {
                // A Home Assistant config (the only messages outside `R/slots/`), `…/{node}/{object}/config`: handed
                // over or removed below, once every accessory's hub is known.
                if let slot = HomeAssistantDiscovery.node(ofConfigTopic: topic).flatMap({ slotOfNode[$0] }),
                    let device = discoveries[slot].device(ofConfigTopic: topic)
                {
                    configs.append((topic, slot, device))
                }
                continue
            }
            switch try? Topic(parsing: topic, under: slotRoot(slot)) {
            case .accessoryState(let id)?:
                summary.states += 1
                guard
                    let format = try? PayloadFormat.detect(
                        contentType: message.properties.contentType, payload: message.payload),
                    let state = try? codec.decode(
                        AccessoryState.self, from: message.payload, format: format, at: WallClock.system.now),
                    state.accessory.id == id
                else {
                    summary.unreadable += 1
                    logger.warning("left an unreadable retained state where it is", metadata: ["mqtt.topic": "\(topic)"])
                    continue
                }
                let found = ReshardPlan.Retained(
                    slot: slot, accessory: id, hub: state.accessory.hub, lastSequence: state.accessory.lastSequence,
                    epoch: state.epoch)
                states.append(found)
                messages[found] = message
                devices[found] = state.accessory.configuration.audioSources
            case .hubStatus(let hub)? where gone.contains(slot):
                try remove(topic)
                try remove(Topic.hubAvailability(hub: hub).name(under: slotRoot(slot)))
                summary.hubStatusesRemoved += 1
            default:
                logger.debug("left a retained message alone", metadata: ["mqtt.topic": "\(topic)", "levels": "\(rest)"])
            }
        }
        let steps = ReshardPlan.steps(for: states, to: summary.to)
        let removed = Set(steps.compactMap { if case .remove(let state) = $0 { state } else { nil } })
        let kept = states.filter { !removed.contains($0) }
        // Home Assistant's devices first: it unloads a device handed over before the state topics its entities read
        // are emptied, which they would take for a state that is not JSON.
        try handOver(configs, hubs: Dictionary(kept.map { ($0.accessory, $0.hub) }) { $1 }, gone: gone, to: client,
            summary: &summary)
        for step in steps {
            switch step {
            case .move(let state, let slot):
                guard let message = messages[state] else { continue }
                try client.publish(
                    MQTTMessage(
                        topic: Topic.accessoryState(accessory: state.accessory).name(under: slotRoot(slot)),
                        payload: message.payload, qos: .atLeastOnce, retain: true, properties: message.properties))
                try remove(Topic.accessoryState(accessory: state.accessory).name(under: slotRoot(state.slot)))
                try remove(Topic.accessoryView(accessory: state.accessory).name(under: slotRoot(state.slot)))
                summary.moved += 1
            case .remove(let state):
                try remove(Topic.accessoryState(accessory: state.accessory).name(under: slotRoot(state.slot)))
                try remove(Topic.accessoryView(accessory: state.accessory).name(under: slotRoot(state.slot)))
                summary.removed += 1
            }
        }
        return kept.map { ($0.hub, devices[$0] ?? []) }
    }

    /// Each Home Assistant device whose config is under another slot than its hub's now is handed over: Home
    /// Assistant's migration payload on its old topic (it unloads the entities and keeps them, with their ids, names,
    /// areas and history, for the config the new slot publishes with the same ids), then the old topic emptied. What
    /// else the slots that are gone retained (their own devices, configs of accessories no state names) is removed.
    private static func handOver(
        _ configs: [(topic: String, slot: Int, device: HomeAssistantDiscovery.ConfiguredDevice)],
        hubs: [AccessoryID: HubID], gone: Range<Int>, to client: MQTTClient, summary: inout Summary
    ) throws {
        for config in configs {
            let hub: HubID? =
                switch config.device {
                case .accessory(let id): hubs[id]
                case .hub(let hub): hub
                case .bridge: nil
                }
            let moves = hub.map { summary.to.slot(of: $0) != config.slot } ?? false
            if moves {
                try client.publish(
                    MQTTMessage(topic: config.topic, payload: HomeAssistantDiscovery.handOverPayload, qos: .atLeastOnce))
                summary.configsHandedOver += 1
            } else if gone.contains(config.slot) {
                summary.configsRemoved += 1
            } else {
                continue
            }
            try client.publish(MQTTMessage(topic: config.topic, payload: [], qos: .atLeastOnce, retain: true))
        }
    }

    /// `R/slots/{slot}/{rest}`: the slot and the rest, or `nil` for a topic outside every slot.
    private static func slotAndRest(of topic: String, under root: TopicRoot) -> (Int, Substring)? {
        let head = root.rawValue + "/slots/"
        guard topic.hasPrefix(head) else { return nil }
        let after = topic.dropFirst(head.count)
        guard let slash = after.firstIndex(of: "/"), let slot = Int(after[..<slash]), slot >= 0 else { return nil }
        return (slot, after[after.index(after: slash)...])
    }
}
