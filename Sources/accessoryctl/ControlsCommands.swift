import AccessoryControl
import AccessoryModel
import AccessoryWire
import ArgumentParser
import Foundation

/// `accessoryctl switching` and `accessoryctl pin`: the person's controls, as home automation sets them.
struct Switching: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Turn automatic switching of an accessory on (automatic) or off (the bridge leaves it alone).")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The accessory id.") var accessory: AccessoryArgument
    @Argument(help: "on or off.") var switching: OnOff

    enum OnOff: String, ExpressibleByArgument {
        case on, off
    }

    func run() async throws {
        try await connection.resolvingLayout().runControls(
            AccessoryControls(automaticSwitching: switching == .on), for: accessory.id)
    }
}

struct Pin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pin a source to an accessory (only it is ever routed there), or unpin it with 'automatic'.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The accessory id.") var accessory: AccessoryArgument
    @Argument(help: "A Bluetooth address such as 12:34:56:78:9A:BC, or automatic.") var source: PinArgument

    struct PinArgument: ExpressibleByArgument {
        let pin: AccessoryControls.Pin
        init?(argument: String) {
            if argument.lowercased() == "automatic" {
                pin = .automatic
            } else if let address = BluetoothAddress(argument) {
                pin = .source(address)
            } else {
                return nil
            }
        }
    }

    func run() async throws {
        try await connection.resolvingLayout().runControls(AccessoryControls(pin: source.pin), for: accessory.id)
    }
}

extension ConnectionOptions {
    /// The root of `id`'s topics: the root; in a cluster, the slot's root its retained state is under (its hub's).
    func accessoryRoot(of id: AccessoryID) async throws -> TopicRoot {
        guard try clusterSlots != nil else { return try root }
        let filter = try filter(.accessoryState).replacingOccurrences(of: "/accessories/+/", with: "/accessories/\(id)/")
        var found: TopicRoot?
        let stopped = try await observe(self, role: "lookup", filters: [filter], limit: patience) { message in
            found = try? root(of: message.topic)
            return false
        }
        if stopped { throw ExitCode(130) }
        guard let found else { throw fail("no state of \(id) under any slot (\(filter)): is it paired?") }
        return found
    }

    /// Sends `controls` for `id`, prints the accessory's controls after the change; a refusal exits with status 1.
    func runControls(_ controls: AccessoryControls, for id: AccessoryID) async throws {
        let root = try await accessoryRoot(of: id)
        let client = try await connecting {
            try AccessoryControlsClient(
                mqtt: try mqtt(clientID: Self.clientID("controls")), topicRoot: root, timeout: patience,
                payloadFormat: format, logger: Self.logger)
        }
        do {
            try await connecting { try await client.start(timeout: patience) }
            let state = try await client.set(controls, for: id)
            await client.stop()
            let accessory = state.accessory
            print("\(id): automatic switching \(accessory.automaticSwitching ? "on" : "off"), pinned source "
                + (accessory.pinnedSource.map(\.description) ?? "none (automatic)"))
        } catch let exit as ExitCode {
            await client.stop()
            throw exit
        } catch {
            await client.stop()
            throw fail("\(error)")
        }
    }
}
