import AccessoryModel
import AccessoryWire
import MQTTClient

/// Following the bridge's layout (``AccessoryHub/Options/followsLayout``; docs/scale-out.md, "The layout hubs read"):
/// the layouts the connection receives are taken one at a time, in a task of their own, and each that gives the hub
/// another root moves it there.
extension AccessoryHub {
    /// The bridge's retained layout, on the network thread: handed to the task that follows it (never waits).
    func receiveLayout(_ message: MQTTMessage) {
        do {
            let format = try PayloadFormat.detect(contentType: message.properties.contentType, payload: message.payload)
            layouts.continuation.yield(try codec.decode(BridgeLayout.self, from: message.payload, format: format))
        } catch {
            following.withLock { $0.malformed += 1 }
            logger.warning(
                "unreadable bridge layout: the hub stays where it is", metadata: ["mqtt.topic": "\(message.topic)", "error": "\(error)"])
        }
    }

    /// Moves the hub to `layout`'s root, unless it is there: requests wait meanwhile; it says offline where it was
    /// (the old connection's will would not: it disconnects cleanly), ends its head-tracking sessions, forgets the
    /// old owner's epochs, connects under the new root, is born again there, and then serves, the requests that were
    /// in flight first (sent anew).
    func move(to layout: BridgeLayout) async {
        let root = layout.root(of: hubID, under: options.topicRoot)
        guard let current = link.connection else { return }
        following.withLock { $0.layout = layout }
        guard current.root != root else { return }
        let from = current.root
        link.suspend()
        if let from {
            if options.announcesStatus { _ = try? current.client.publish(status(online: false, under: from)) }
            let ended = headTracking.moved()
            epoch.store(0, ordering: .relaxed)
            following.withLock { $0.moves += 1 }
            logger.info(
                "the bridge's layout moves the hub",
                metadata: [
                    "from": "\(from)", "to": "\(root)", "cluster.slots": "\(layout.slots.map { "\($0.count)" } ?? "none")",
                    "head_tracking_sessions_ended": "\(ended)",
                ])
        }
        following.withLock { $0.followed += 1 }
        pending.finishAll(with: .success(.moved))
        await current.client.close()
        let connection: HubLink.Connection
        do {
            connection = try self.connection(under: root)
        } catch {
            logger.error("cannot make the hub's connection under its new root", metadata: ["error": "\(error)"])
            return
        }
        guard link.install(connection) else {
            await connection.client.close()
            return
        }
        do {
            try open(connection)
            try await connection.client.waitUntilConnected(timeout: nil)
        } catch {
            // Closed by stop(), or refused for good (logged by the client, which tries again): requests time out.
            logger.warning("the hub's connection under its new root is not up", metadata: ["error": "\(error)"])
        }
        await reborn(on: connection)
        link.serve()
    }

    /// Says again under `root` what the hub said of each of its accessories, before any other request: first its
    /// configuration alone (``AccessoryRebirth/probe``: a reshard moved its state, and the new root knows it), and
    /// when that is refused, paired, registered and configured (a single bridge's states are not a slot's).
    private func reborn(on connection: HubLink.Connection) async {
        let accessories = rebirths.withLock { $0 }.sorted { $0.key < $1.key }
        for (id, rebirth) in accessories {
            let said = await sayAgain(
                id, probe: rebirth.probe, requests: rebirth.requests, metadata: ["accessory.id": "\(id)"]
            ) { request throws(AccessoryControlError) in
                guard case .result(let result) = try await send(request, for: id, on: connection) else { return nil }
                return result
            }
            if case .moved = said { return }
        }
    }
}
