import CMosquitto
import Foundation
import Testing

@testable import MQTTClient

#if canImport(Glibc)
import Glibc
#endif

/// A libmosquitto handle made here has no wake-up socket pair (`cmosquitto_new`): libmosquitto's would cost each handle
/// two descriptors, and a write(2) for every packet it queues that nothing reads. socketpair(2) stays the system's for
/// every other call.
@Suite struct MosquittoHandleTests {
    /// How many descriptors this process has open (Linux).
    private func openDescriptors() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
    }

    @Test func aHandleHasNoSocketPair() throws {
        let configuration = MQTTConfiguration(clientID: "handle-\(UUID().uuidString.prefix(8))")
        let before = try openDescriptors()
        let handles = try (0..<200).map { _ in try MosquittoHandle.make(configuration) }
        let after = try openDescriptors()
        for handle in handles { mosquitto_destroy(handle.pointer) }
        // With a pair each they would be 400 more. The suite's other tests open and close a few meanwhile.
        #expect(after - before < 100, "\(after - before) descriptors for 200 handles")
    }

    @Test func socketpairIsTheSystemsOutsideAHandlesMaking() throws {
        var descriptors: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &descriptors) == 0)
        defer { for descriptor in descriptors where descriptor >= 0 { close(descriptor) } }
        #expect(descriptors.allSatisfy { $0 >= 0 })
        // The two ends are connected.
        var byte: UInt8 = 42
        #expect(write(descriptors[1], &byte, 1) == 1)
        byte = 0
        #expect(read(descriptors[0], &byte, 1) == 1)
        #expect(byte == 42)
    }
}
