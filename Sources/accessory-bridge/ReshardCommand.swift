import AccessoryWire
import ArgumentParser
import BridgeCluster
import Etcd
import Logging
import MQTTClient

/// `accessory-bridge reshard`: moves a cluster to another slot count, with the settings a member runs with
/// (``ClusterReshard``, docs/scale-out.md "Changing the slot count").
struct ReshardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reshard",
        abstract: "Move a cluster to another slot count (--slots) while its members run, and exit.",
        usage: "accessory-bridge reshard --cluster <etcd url> --cluster-name <name> --slots <count> [--<setting> ...]",
        discussion: """
            Records "<count> resharding" as the cluster's count in etcd: every member leaves (its slots stop) and \
            waits. Then moves each accessory's retained state (its pins and switching choice with it) to the slot its \
            hub belongs to under the new count, removing the old copy; when the count shrinks, also removes what the \
            slots that are gone retained for Home Assistant and of the hubs' statuses; lists the devices anew; and \
            records the count, at which the members join again with it. Hubs that follow the bridge's layout move by \
            themselves; members started without --slots take the new count at their next start too (give those \
            started with it the new one). Run again, it finishes what an \
            interrupted run left. It takes the settings a member takes (the broker, its credentials and TLS, the \
            topic root, the Home Assistant prefix, etcd and its TLS).
            """,
        version: Release.version)

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp(visibility: .hidden))
    var settings: [String] = []

    func run() async throws {
        let settings: Settings.Resolved
        do {
            settings = try await Settings.resolve(self.settings)
        } catch let invalid as Settings.Invalid {
            throw ValidationError(invalid.description)
        }
        guard let cluster = settings.cluster, let to = cluster.slots else {
            throw ValidationError("reshard needs --cluster (etcd's URL), --cluster-name and the new --slots")
        }
        LoggingSystem.bootstrap(settings.logFormat.factory)
        var logger = Logger(label: "accessory-bridge")
        logger.logLevel = settings.logLevel
        let etcd = try EtcdClient(endpoint: cluster.endpoint, tls: cluster.tls, logger: logger)
        do {
            let summary = try await ClusterReshard.run(
                cluster: cluster, to: to, bridge: settings.bridge, store: etcd, logger: logger)
            await etcd.shutdown()
            print("resharded cluster \(cluster.name): \(summary)")
        } catch {
            await etcd.shutdown()
            if let error = error as? MQTTError { throw StartupFailure(error, broker: settings.bridge.mqtt) }
            throw error
        }
    }
}
