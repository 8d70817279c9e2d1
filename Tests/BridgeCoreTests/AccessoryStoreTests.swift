import AccessoryModel
import Foundation
import Testing
import TestSupport

@testable import BridgeCore

/// The store keeps accessories compact (``StoredAccessory``) and must give back exactly what it was given: every
/// field, the rare ones kept beside (an error, diagnostics, identifiers that are not 6-byte addresses, a pinned
/// source, a capability beyond a byte), a hub change.
@Suite struct AccessoryStoreTests {
    @Test func aStoredAccessoryStaysSmall() {
        #expect(MemoryLayout<StoredAccessory>.stride == 104)
    }

    @Test(arguments: 0..<8)
    func whatIsSavedComesBackUnchanged(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var store = AccessoryStore()
        var expected: [AccessoryID: Accessory] = [:]
        let ids = (0..<40).map { AccessoryID("acc-\($0)")! }
        for _ in 0..<400 {
            let accessory = Self.randomAccessory(id: ids.randomElement(using: &random)!, using: &random)
            store.save(accessory)
            expected[accessory.id] = accessory
        }
        #expect(store.count == expected.count)
        for (id, accessory) in expected {
            #expect(store[id] == accessory)
        }
        #expect(Dictionary(uniqueKeysWithValues: store.all.map { ($0.id, $0) }) == expected)
        // The counts kept as accessories are saved (each one saved ten times on average, changing registration and
        // placement) are those of the accessories.
        var registrations: [Registration: Int] = [:]
        for accessory in expected.values { registrations[accessory.registration, default: 0] += 1 }
        #expect(store.registrations.dictionary == registrations)
        #expect(store.wornCount == expected.values.filter { RoutingAccessory($0).isWorn }.count)
        for hub in ["hub-1", "hub-2", "hub-3"].map({ HubID($0)! }) {
            #expect(Set(store.ids(of: hub)) == Set(expected.values.filter { $0.hub == hub }.map(\.id)))
        }
        #expect(store[AccessoryID("unknown")!] == nil)
    }

    static func randomAccessory(id: AccessoryID, using random: inout SeededGenerator) -> Accessory {
        func maybe<T>(_ value: @autoclosure () -> T) -> T? { Bool.random(using: &random) ? value() : nil }
        func identifier() -> Data? {
            // Mostly 6-byte addresses; now and then none, an empty one or a wrong length (as a restore may bring).
            switch Int.random(in: 0..<10, using: &random) {
            case 0: nil
            case 1: Data()
            case 2: Data((0..<5).map { _ in UInt8.random(in: 0...255, using: &random) })
            default: Data((0..<6).map { _ in UInt8.random(in: 0...255, using: &random) })
            }
        }
        // Now and then one this model does not know, beyond a byte.
        let choices: [Capabilities] = [[], .audioSwitching, .placement, .all, .all, Capabilities(rawValue: 1 << 9)]
        let capabilities = choices.randomElement(using: &random)!
        return Accessory(
            id: id,
            hub: HubID("hub-\(Int.random(in: 1...3, using: &random))")!,
            registration: Registration.allCases.randomElement(using: &random)!,
            name: Bool.random(using: &random) ? "Studio Pro" : "A name longer than fifteen bytes",
            model: maybe("SP-2") ?? "",
            hardwareCapabilities: choices.randomElement(using: &random)!,
            configuration: Configuration(
                devicePlacement: maybe(Placement.allCases.randomElement(using: &random)!),
                deviceCapabilities: capabilities,
                primaryAudioSourceDeviceIdentifier: identifier(),
                secondaryAudioSourceDeviceIdentifier: identifier()),
            lastSequence: UInt64.random(in: 0...1_000, using: &random),
            lastError: maybe(AccessoryControlError.invalidRequest(reason: "sequence \(Int.random(in: 0...9, using: &random))")),
            updatedAt: Timestamp(unixMilliseconds: Int64.random(in: 0...2_000_000_000_000, using: &random)),
            registeredAt: maybe(Timestamp(unixMilliseconds: Int64.random(in: -5...5, using: &random))),
            isStale: Bool.random(using: &random),
            diagnostics: maybe([Diagnostic.hubOffline(HubID("hub-1")!), .reported("odd")]) ?? [],
            automaticSwitching: Bool.random(using: &random),
            pinnedSource: maybe(BluetoothAddress(rawValue: UInt64.random(in: 0...0xFFFF_FFFF_FFFF, using: &random))!))
    }
}
