import AccessoryControl
import AccessoryModel
import AccessoryWire
import Logging
import MQTTClient
import Testing
import TestSupport

/// The cluster's first member records its slot count in etcd, and the owner of slot 0 retains it as the layout hubs
/// read; a member started with another count leaves at once, with an error that names both, and the members that
/// serve are not disturbed; a member started with none takes the recorded one.
@Suite struct SlotCountTests {
    @Test func aMemberGivenAnotherSlotCountRefusesToJoinAndTheOthersServeOn() async throws {
        let members = MemberProcesses(
            etcd: try await EtcdServer(), broker: try await MosquittoBroker(), cluster: "count", slots: 12)
        try members.start("m1")
        try await waitUntil("m1 serves its 12 slots", timeout: .seconds(30)) { members.owners().count == 12 }
        // The owner of slot 0 retains the cluster's layout, for hubs and tools that are not told the count.
        var mqtt = MQTTConfiguration(clientID: "layout-reader")
        mqtt.port = members.broker.port
        let layout = try await BridgeLayout.read(mqtt: mqtt, timeout: .seconds(20), logger: Logger(label: "layout"))
        #expect(layout?.slots == ClusterSlots(12) && layout?.version == Release.version)

        try members.start("m2", slots: 16)
        let code = try await members.process("m2").exit(timeout: .seconds(20))
        #expect(code != 0)
        #expect(members.logText.contains("this cluster was created with 12 slots, and this member was given 16"))
        let by = { (member: String, message: String) in
            members.lines(message).filter { $0["cluster.member"] as? String == member }
        }
        #expect(by("m2", "claimed a slot").isEmpty)
        // m1 never saw it join, and gave nothing up.
        #expect(by("m1", "a member joined").isEmpty)
        #expect(!members.events().contains { if case .stopped = $0.kind { true } else { false } })

        // A member given no count takes the cluster's: the two share the 12 slots.
        try members.start("m3", givesSlots: false)
        try await members.waitUntilServed(by: ["m1", "m3"])
        #expect(Set(members.owners().values) == ["m1", "m3"])
        #expect(!by("m3", "joining with the slot count the cluster recorded (no --slots was given)").isEmpty)
        _ = try await members.stop("m3")
        _ = try await members.stop("m1")
    }
}
