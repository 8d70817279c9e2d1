import AccessoryModel
import AccessoryWire

/// In a cluster, the slot a ``MessageProcessor`` serves, and the epoch of its owner's claim (docs/scale-out.md): its
/// hubs' and accessories' topics are under the slot's root, the playing devices' under the cluster's.
public struct ServedSlot: Hashable, Sendable, CustomStringConvertible {
    public var slot: ClusterSlot
    /// The etcd revision of the claim: carried by every state, result and command published for the slot.
    public var epoch: UInt64

    public init(_ slot: ClusterSlot, epoch: UInt64) {
        self.slot = slot
        self.epoch = epoch
    }

    /// `slot 3 of 12, epoch 57`.
    public var description: String { "\(slot), epoch \(epoch)" }
}

/// Where a processor's topics live: its hubs' and accessories' under `root`, the playing devices' under `sources`.
/// One bridge: both are the configured root; a slot: its own root, and the cluster's.
struct TopicRoots: Sendable {
    let root: TopicRoot
    let sources: TopicRoot

    init(_ configured: TopicRoot, slot: ServedSlot?) {
        root = slot.map { $0.slot.root(under: configured) } ?? configured
        sources = configured
    }

    /// The topic `name` is, or why it is not one of the contract: the slot's topics under `root`, the playing
    /// devices' states under `sources`.
    func parse(_ name: String) throws(TopicError) -> Topic {
        do {
            return try Topic(parsing: name, under: root)
        } catch {
            guard sources != root, let topic = try? Topic(parsing: name, under: sources), topic.kind == .sourceState
            else { throw error }
            return topic
        }
    }

    /// The name of `topic`: under `root` for a slot's kind, else (a playing device's, the layout) under `sources`.
    func name(_ topic: Topic) -> String {
        topic.name(under: topic.kind.isSlotted ? root : sources)
    }
}
