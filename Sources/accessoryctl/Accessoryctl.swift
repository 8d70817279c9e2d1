import AccessoryWire
import ArgumentParser

// C's stdout is read once, at the start of main, before anything runs that could print.
#if canImport(Glibc)
@preconcurrency import Glibc
#elseif canImport(Darwin)
@preconcurrency import Darwin
#endif

/// `accessoryctl`: drive the bridge by hand — act as a hub (pair, register, place, …), as a playing device
/// (`source`; `host` renders head-tracking sessions), or watch what goes by.
@main
struct Accessoryctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accessoryctl",
        abstract: "Talk to the AudioAccessoryBridge over MQTT: as a hub, as a playing device, or as an observer.",
        discussion: """
            Hub commands send one AccessoryTelemetry and print the bridge's answer, or the AudioAccessoryKit error \
            and its reason (exit status 1). Bluetooth addresses are written 12:34:56:78:9A:BC.
            """,
        version: Release.version,
        subcommands: [
            Pair.self, Unpair.self, Register.self, Place.self, Sources.self, Update.self, State.self, Source.self,
            Host.self, Switching.self, Pin.self, Watch.self, Layout.self, Roles.self, Slot.self,
        ])

    static func main() async {
        // Line by line into a file or a pipe too, as mosquitto_sub's output: what is printed is there at once, and
        // stays there when a signal ends the command.
        setvbuf(stdout, nil, _IOLBF, 0)
        await main(nil)
    }
}
