import AccessoryControl
import AccessoryModel
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
        try await connection.runControls(AccessoryControls(automaticSwitching: switching == .on), for: accessory.id)
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
        try await connection.runControls(AccessoryControls(pin: source.pin), for: accessory.id)
    }
}

extension ConnectionOptions {
    /// Sends `controls` for `id`, prints the accessory's controls after the change; a refusal exits with status 1.
    func runControls(_ controls: AccessoryControls, for id: AccessoryID) async throws {
        let client = try await connecting {
            try AccessoryControlsClient(
                mqtt: try mqtt(clientID: Self.clientID("controls")), topicRoot: try root, timeout: patience,
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
