import AccessoryModel
import Foundation

/// Names and values shared by the model tests.
enum Fixture {
    static let hubA = HubID("hub-a")!
    static let hubB = HubID("hub-b")!
    static let headphones = AccessoryID("headphones")!
    static let earbuds = AccessoryID("earbuds")!

    static let phone = BluetoothAddress("12:34:56:78:9A:BC")!
    static let laptop = BluetoothAddress("AB:CD:EF:01:23:45")!
    static let tv = BluetoothAddress("00:11:22:33:44:55")!

    static let start = Timestamp(unixMilliseconds: 1_763_790_000_000)

    static func at(_ seconds: Double) -> Timestamp {
        Timestamp(unixMilliseconds: start.unixMilliseconds + Int64(seconds * 1000))
    }

    static func bytes(_ count: Int) -> Data { Data((0..<count).map { UInt8($0 + 1) }) }
}
