// The code samples of AudioAccessoryKit's documentation ("the seeds"), run against the bridge. They are adapted
// only where pairing differs: AccessorySetupKit's ASAccessory becomes a PairedAccessory, which a hub obtains from
// AccessoryHub.pair(_:name:model:hardwareCapabilities:). Everything else is the seeds' code as written.
//
// Usage: companion-example [mqtt://host:port] — exits 0 when every step behaved as the seeds describe.

import AccessoryControl
import AccessoryModel
import Foundation
import Logging
import MQTTClient

var failures = 0
@MainActor func check(_ condition: Bool, _ description: String) {
    print(condition ? "ok   \(description)" : "FAIL \(description)")
    if !condition { failures += 1 }
}

let broker = try BrokerURL(parsing: CommandLine.arguments.dropFirst().first ?? "mqtt://127.0.0.1:1883")
var mqtt = MQTTConfiguration(clientID: "companion-example-\(UInt32.random(in: .min ... .max))")
mqtt.host = broker.host
mqtt.port = broker.port
var logger = Logger(label: "companion-example")
logger.logLevel = .warning
let hub = try AccessoryHub(hubID: HubID("companion-hub")!, mqtt: mqtt, logger: logger)
try await hub.start()

// Pairing (AccessorySetupKit's part): the accessory is known, with what its hardware can do.
let suffix = String(UInt32.random(in: .min ... .max), radix: 16)
let accessory = try await hub.pair(
    AccessoryID("studio-pro-\(suffix)")!, name: "Studio Pro", model: "SP-2",
    hardwareCapabilities: [.audioSwitching, .placement])

// --- Registering an Accessory ---
try await AccessoryControlDevice.register(accessory, [.audioSwitching, .placement])
check(true, "register(accessory, [.audioSwitching, .placement])")

// --- Retrieving the Current Configuration ---
let device = try AccessoryControlDevice.current(for: accessory)
let currentConfig = device.configuration
check(currentConfig.deviceCapabilities == [.audioSwitching, .placement], "current(for:) has the registered capabilities")

// --- Updating Configuration ---
do {
    let device = try AccessoryControlDevice.current(for: accessory)
    var config = device.configuration

    config.devicePlacement = .onHead
    try await device.update(config)
}
check(try AccessoryControlDevice.current(for: accessory).configuration.devicePlacement == .onHead,
    "update(_:) with devicePlacement = .onHead")

// --- Connected Audio Sources ---
do {
    var config = try AccessoryControlDevice.current(for: accessory).configuration
    let primaryBTAddress = Data([0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC])
    config.primaryAudioSourceDeviceIdentifier = primaryBTAddress

    let secondaryBTAddress = Data([0xAB, 0xCD, 0xEF, 0x01, 0x23, 0x45])
    config.secondaryAudioSourceDeviceIdentifier = secondaryBTAddress
    try await AccessoryControlDevice.current(for: accessory).update(config)
}
check(try AccessoryControlDevice.current(for: accessory).configuration.secondaryAudioSourceDeviceIdentifier
    == Data([0xAB, 0xCD, 0xEF, 0x01, 0x23, 0x45]), "primary and secondary audio source identifiers")

// --- Feature Discovery: Querying Capabilities ---
do {
    let device = try AccessoryControlDevice.current(for: accessory)
    let caps = device.configuration.deviceCapabilities

    if caps.contains(.audioSwitching) {
        check(true, "the device supports automatic audio switching")
    }

    if caps.contains(.placement) {
        check(true, "the device reports physical placement")
    }
}

// --- Checking Placement ---
do {
    let device = try AccessoryControlDevice.current(for: accessory)

    if let placement = device.configuration.devicePlacement {
        switch placement {
        case .inEar, .onHead, .overTheEar:
            check(true, "the accessory is being worn")
        case .offHead:
            check(false, "the accessory is being worn")
        // AudioAccessoryKit's enums are resilient, hence the seeds' `@unknown default`; this library's are not, so
        // the compiler would warn that it can never run.
        }
    }
}

// --- Error Handling ---
let buds = try await hub.pair(
    AccessoryID("buds-\(suffix)")!, name: "Buds", model: "B-1", hardwareCapabilities: [.audioSwitching])
let configuration = AccessoryControlDevice.Configuration(
    devicePlacement: .offHead,
    deviceCapabilities: [.audioSwitching, .placement]
)
do {
    try await AccessoryControlDevice.register(buds, configuration.deviceCapabilities)
    check(false, "registering a capability the hardware lacks fails")
} catch let error as AccessoryControlDevice.Error {
    switch error {
    case .accessoryNotCapable:
        // Accessory hardware does not support requested capabilities
        check(true, "registering a capability the hardware lacks throws .accessoryNotCapable (\(error.reason))")
    case .invalidRequest, .invalidated, .unknown:
        check(false, "registering a capability the hardware lacks throws .accessoryNotCapable, not \(error)")
    }
}

// --- Common Mistakes: don't forget to handle the invalidated error ---
// Pairing again invalidates the registration; the device reference still exists, and update(_:) says so.
let staleDevice = try AccessoryControlDevice.current(for: accessory)
_ = try await hub.pair(accessory.id, name: "Studio Pro", model: "SP-2", hardwareCapabilities: [.audioSwitching, .placement])
do {
    try await staleDevice.update(staleDevice.configuration)
    check(false, "update after re-pairing throws .invalidated")
} catch AccessoryControlDevice.Error.invalidated {
    // The seeds: notifyContainerAppToRegisterAgain(accessory)
    try await AccessoryControlDevice.register(accessory, [.audioSwitching, .placement])
    check(try AccessoryControlDevice.current(for: accessory).configuration.primaryAudioSourceDeviceIdentifier != nil,
        "after .invalidated, registering again keeps the sources")
}

await hub.stop()
print(failures == 0 ? "every sample behaved as the seeds describe" : "\(failures) sample(s) did not")
exit(failures == 0 ? 0 : 1)
