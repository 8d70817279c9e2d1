@testable import AccessoryControl
import AccessoryModel
import Foundation
import Testing

/// What a hub that follows the bridge's layout says again of an accessory after a move: what the bridge accepted,
/// as the requests that make it so, in their order.
@Suite struct AccessoryRebirthTests {
    static let phone = Data([0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc])
    static let laptop = Data([0xab, 0xcd, 0xef, 0x01, 0x23, 0x45])
    static let pairing = AccessoryRequest.paired(name: "Studio", model: "S", hardwareCapabilities: .all)

    @Test func nothingBeforeThePairingAndThePairingAloneUntilRegistered() {
        var rebirth = AccessoryRebirth()
        rebirth.took(.placement(.onHead))
        #expect(!rebirth.isPaired && rebirth.requests.isEmpty)
        rebirth.took(Self.pairing)
        #expect(rebirth.isPaired && rebirth.requests == [Self.pairing])
        #expect(rebirth.probe == nil, "nothing registered to ask about")
    }

    /// The registration, then the whole configuration as the partial updates left it.
    @Test func aRegisteredAccessoryIsRegisteredAndConfiguredAgain() {
        var rebirth = AccessoryRebirth()
        rebirth.took(Self.pairing)
        rebirth.took(.register([.audioSwitching, .placement]))
        rebirth.took(.sources(primary: Self.phone, secondary: nil))
        rebirth.took(.placement(.inEar))
        rebirth.took(.sources(primary: Self.laptop, secondary: Self.phone))
        let configuration = Configuration(
            devicePlacement: .inEar, deviceCapabilities: [.audioSwitching, .placement],
            primaryAudioSourceDeviceIdentifier: Self.laptop, secondaryAudioSourceDeviceIdentifier: Self.phone)
        #expect(rebirth.requests == [Self.pairing, .register([.audioSwitching, .placement]), .update(configuration)])
        #expect(rebirth.probe == .update(configuration))

        // A full update replaces the configuration, capabilities and spatial extension included.
        let spatial = AudioComponentDescription(componentType: 0xaaf, componentSubType: 0xc0f, componentManufacturer: 0xb05e)
        let full = Configuration(
            devicePlacement: .offHead, deviceCapabilities: [.audioSwitching, .placement, .audioSpatialization],
            spatialExtensionDescription: spatial)
        rebirth.took(.update(full))
        #expect(
            rebirth.requests == [
                Self.pairing, .register(full.deviceCapabilities, spatialExtensionDescription: spatial), .update(full),
            ])
    }

    /// Paired again while registered: not registered until the next register, and its configuration stays (as the
    /// bridge keeps it).
    @Test func aPairingAgainKeepsTheConfigurationUntilTheNextRegister() {
        var rebirth = AccessoryRebirth()
        rebirth.took(Self.pairing)
        rebirth.took(.register([.audioSwitching, .placement]))
        rebirth.took(.placement(.onHead))
        let again = AccessoryRequest.paired(name: "Studio", model: "S2", hardwareCapabilities: .all)
        rebirth.took(again)
        #expect(rebirth.requests == [again] && rebirth.probe == nil)
        rebirth.took(.register([.audioSwitching, .placement]))
        let configuration = Configuration(devicePlacement: .onHead, deviceCapabilities: [.audioSwitching, .placement])
        #expect(rebirth.requests == [again, .register([.audioSwitching, .placement]), .update(configuration)])
    }

    /// Unpaired, nothing is said again; paired anew, the accessory starts from nothing.
    @Test func unpairingForgetsAndAPairingStartsOver() {
        var rebirth = AccessoryRebirth()
        rebirth.took(Self.pairing)
        rebirth.took(.register(.all))
        rebirth.took(.unpaired)
        #expect(!rebirth.isPaired && rebirth.requests.isEmpty)
        let again = AccessoryRequest.paired(name: "Studio 2", model: "S", hardwareCapabilities: [.audioSwitching])
        rebirth.took(again)
        #expect(rebirth.requests == [again])
    }

    /// A rebirth request is answered with the configuration alone when the bridge had taken the last pairing and
    /// registration before its gap (its last sequence is at or past them), else with the whole.
    @Test func aRebirthRequestGetsTheUpdateAloneWhenTheBridgeHadTheBirth() {
        var rebirth = AccessoryRebirth()
        rebirth.took(Self.pairing, sequence: 100)
        rebirth.took(.register([.audioSwitching, .placement]), sequence: 101)
        rebirth.took(.placement(.onHead), sequence: 102)
        #expect(rebirth.birthSequence == 101)
        let configuration = Configuration(devicePlacement: .onHead, deviceCapabilities: [.audioSwitching, .placement])
        #expect(rebirth.answer(lastSequence: 101) == (.update(configuration), rebirth.requests))
        #expect(rebirth.answer(lastSequence: 105).probe == .update(configuration))
        #expect(rebirth.answer(lastSequence: 100).probe == nil, "the registration may have been missed")
        // Paired again: its birth is that pairing, and with no registration since there is nothing to probe.
        rebirth.took(Self.pairing, sequence: 110)
        #expect(rebirth.birthSequence == 110 && rebirth.answer(lastSequence: 200).probe == nil)
    }

    /// A hub that restarted learns the accessory from the bridge's state (its birth not known: the configuration is
    /// asked first); an unpaired one is nothing to learn.
    @Test func aRestartedHubLearnsTheAccessoryFromTheBridgesState() throws {
        let configuration = Configuration(
            devicePlacement: .inEar, deviceCapabilities: [.audioSwitching, .placement],
            primaryAudioSourceDeviceIdentifier: Self.phone)
        func state(_ registration: Registration) -> AccessoryState {
            AccessoryState(
                Accessory(
                    id: AccessoryID("buds")!, hub: HubID("home")!, registration: registration, name: "Studio",
                    hardwareCapabilities: .all, configuration: configuration,
                    updatedAt: Timestamp(unixMilliseconds: 1_763_790_000_000)),
                routedSource: nil)
        }
        let learned = try #require(AccessoryRebirth(learning: state(.registered)))
        #expect(learned.birthSequence == 0)
        #expect(learned.answer(lastSequence: 0).probe == .update(configuration))
        #expect(learned.requests == [
            .paired(name: "Studio", model: "", hardwareCapabilities: .all),
            .register([.audioSwitching, .placement]), .update(configuration),
        ])
        let paired = try #require(AccessoryRebirth(learning: state(.paired)))
        #expect(paired.requests == [.paired(name: "Studio", model: "", hardwareCapabilities: .all)] && paired.probe == nil)
        #expect(AccessoryRebirth(learning: state(.unpaired)) == nil)
    }
}
