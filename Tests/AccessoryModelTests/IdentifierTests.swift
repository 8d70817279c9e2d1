import AccessoryModel
import Foundation
import Testing
import TestSupport

@Suite struct IdentifierTests {
    @Test(arguments: ["a", "hub-1", "Living_Room-2", String(repeating: "x", count: 64), "0123456789"])
    func acceptsValidIDs(_ text: String) {
        #expect(AccessoryID(text)?.rawValue == text)
        #expect(HubID(text)?.rawValue == text)
    }

    @Test(arguments: ["", String(repeating: "x", count: 65), "a/b", "a+b", "#", "hub 1", "hüb", "a.b", "$SYS", "a\u{0}b"])
    func rejectsInvalidIDs(_ text: String) {
        #expect(AccessoryID(text) == nil)
        #expect(HubID(text) == nil)
    }

    @Test func bluetoothAddressSpellings() throws {
        let address = try #require(BluetoothAddress("12:34:56:78:9A:BC"))
        #expect(address.bytes == [0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC])
        #expect(address.data == Data([0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC]))
        #expect(address.topicID == "123456789abc")
        #expect(address.description == "12:34:56:78:9A:BC")
        #expect(BluetoothAddress(topicID: "123456789abc") == address)
        #expect(BluetoothAddress(bytes: [0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC]) == address)
        #expect(BluetoothAddress("12-34-56-78-9a-bc") == address)
        #expect(BluetoothAddress("123456789ABC") == address)
        #expect(BluetoothAddress(rawValue: 0x1234_5678_9ABC) == address)
        #expect(BluetoothAddress("00:00:00:00:00:0A")?.topicID == "00000000000a")
        #expect(BluetoothAddress(rawValue: 0x0A)?.description == "00:00:00:00:00:0A")
        #expect(BluetoothAddress(rawValue: 0xFFFF_FFFF_FFFF)?.description == "FF:FF:FF:FF:FF:FF")
    }

    @Test func everySpellingReadsBackAsTheAddress() {
        var random = SeededGenerator(seed: 7)
        for _ in 0..<1_000 {
            let address = BluetoothAddress(rawValue: UInt64.random(in: 0..<(1 << 48), using: &random))!
            #expect(BluetoothAddress(address.description) == address)
            #expect(BluetoothAddress(topicID: address.topicID) == address)
            #expect(address.description.count == 17)
            #expect(address.topicID.count == 12)
        }
    }

    @Test(arguments: ["12:34:56:78:9A", "12:34:56:78:9A:BC:DE", "1:234:56:78:9A:BC", "12:34:56:78:9A:BG", "", "12345"])
    func rejectsMalformedAddresses(_ text: String) {
        #expect(BluetoothAddress(text) == nil)
    }

    @Test(arguments: ["123456789ABC", "123456789ab", "123456789abcd", "12:34:56:78:9a:bc", "12345678 9abc"])
    func topicIDsAreTwelveLowercaseHexDigits(_ text: String) {
        #expect(BluetoothAddress(topicID: text) == nil)
    }

    @Test func addressesAreExactlySixBytes() {
        #expect(BluetoothAddress(bytes: [1, 2, 3, 4, 5]) == nil)
        #expect(BluetoothAddress(bytes: [1, 2, 3, 4, 5, 6, 7]) == nil)
        #expect(BluetoothAddress(rawValue: 1 << 48) == nil)
    }

    @Test func timestampArithmetic() {
        let t = Timestamp(unixMilliseconds: 1000)
        #expect(t + .seconds(15) == Timestamp(unixMilliseconds: 16_000))
        #expect(t + .milliseconds(-1) == Timestamp(unixMilliseconds: 999))
        #expect(Timestamp(unixMilliseconds: 16_000) - t == .seconds(15))
        #expect(Timestamp(unixMilliseconds: .max) + .seconds(1) == Timestamp(unixMilliseconds: .max))
    }

    @Test func capabilitiesDescribeThemselvesAsSwift() {
        #expect(Capabilities.all.description == "[.audioSwitching, .placement, .audioSpatialization, .headTracking]")
        #expect(Capabilities([]).description == "[]")
        // A later version's capability is kept and shown as a number, never dropped.
        #expect(Capabilities(rawValue: 0b10_0001).description == "[.audioSwitching, rawValue: 32]")
    }
}

@Suite struct SourcePairTests {
    let phone = Fixture.phone
    let laptop = Fixture.laptop

    @Test func holdsUpToTwoSourcesInOrder() {
        #expect(Array(SourcePair([])) == [])
        #expect(Array(SourcePair([phone])) == [phone])
        #expect(Array(SourcePair([phone, laptop])) == [phone, laptop])
        #expect(Array(SourcePair([phone, laptop, Fixture.tv])) == [phone, laptop], "the first two")
        let pair: SourcePair = [laptop, phone]
        #expect(pair.primary == laptop && pair.secondary == phone)
        #expect(pair.contains(phone) && !pair.contains(Fixture.tv))
        #expect(pair.description == "[AB:CD:EF:01:23:45, 12:34:56:78:9A:BC]")
    }

    @Test func aSecondaryAloneBecomesThePrimary() {
        let pair = SourcePair(primary: nil, secondary: laptop)
        #expect(pair.primary == laptop)
        #expect(pair.secondary == nil)
        #expect(pair.count == 1)
    }

    @Test func comesFromTheConfiguration() {
        let accessory = Accessory(
            id: Fixture.headphones, hub: Fixture.hubA, registration: .registered, hardwareCapabilities: .all,
            configuration: Configuration(deviceCapabilities: .all, primaryAudioSourceDeviceIdentifier: phone.data,
                secondaryAudioSourceDeviceIdentifier: laptop.data),
            updatedAt: Fixture.start)
        #expect(Array(RoutingAccessory(accessory).sources) == [phone, laptop])
        #expect(accessory.configuration.audioSources == [phone, laptop])
    }
}
