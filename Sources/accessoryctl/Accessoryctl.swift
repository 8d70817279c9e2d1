import AccessoryWire
import ArgumentParser

/// `accessoryctl`: drive the bridge by hand — act as a hub (pair, register, place, …), as a playing device
/// (`source`), or watch what goes by.
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
            Switching.self, Pin.self, Watch.self,
        ])
}
