import AccessoryModel
import Foundation

extension Topic {
    /// Reads a topic name under `root`, or explains what is wrong with it.
    ///
    /// Scans the UTF-8 bytes once, without intermediate arrays or closures: every inbound message comes through here.
    public init(parsing name: String, under root: TopicRoot) throws(TopicError) {
        var name = name
        var root = root.rawValue
        let parsed = name.withUTF8 { bytes in root.withUTF8 { Self.parse(bytes, root: $0) } }
        switch parsed {
        case .success(let topic): self = topic
        case .failure(let failure): throw TopicError(topic: name, reason: failure.reason)
        }
    }

    private struct Failure: Error {
        var reason: String
    }

    /// The most levels a topic of the contract has after its root.
    private static let maximumLevels = 5

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>, root: UnsafeBufferPointer<UInt8>)
        -> Result<Topic, Failure>
    {
        guard bytes.count > root.count, bytes[root.count] == UInt8(ascii: "/"),
            root.isEmpty || memcmp(bytes.baseAddress!, root.baseAddress!, root.count) == 0
        else {
            return .failure(Failure(reason: "it is not under the topic root '\(String(decoding: root, as: UTF8.self))'"))
        }
        // Level i spans starts[i] ..< starts[i + 1] - 1.
        return withUnsafeTemporaryAllocation(of: Int.self, capacity: maximumLevels + 1) { starts in
            var count = 0
            starts[0] = root.count + 1
            var index = starts[0]
            while index <= bytes.count {
                if index == bytes.count || bytes[index] == UInt8(ascii: "/") {
                    guard count < maximumLevels else { return notInContract }
                    count += 1
                    starts[count] = index + 1
                    // A responses topic's name is everything after `hubs/{hub}/responses/`, levels and all.
                    if count == 3, index < bytes.count,
                        Levels(bytes: bytes, starts: starts, count: count).isResponsesPrefix
                    {
                        count = 4
                        starts[count] = bytes.count + 1
                        break
                    }
                }
                index += 1
            }
            let levels = Levels(bytes: bytes, starts: starts, count: count)
            return parse(levels)
        }
    }

    private static let notInContract = Result<Topic, Failure>.failure(
        Failure(reason: "it is not a topic of the contract (see Topic.Kind)"))

    /// The levels after the root.
    private struct Levels {
        let bytes: UnsafeBufferPointer<UInt8>
        let starts: UnsafeMutableBufferPointer<Int>
        let count: Int

        func level(_ index: Int) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(rebasing: bytes[starts[index]..<(starts[index + 1] - 1)])
        }

        @inline(__always)
        func `is`(_ index: Int, _ word: StaticString) -> Bool {
            let start = starts[index]
            let count = starts[index + 1] - 1 - start
            return count == word.utf8CodeUnitCount && memcmp(bytes.baseAddress! + start, word.utf8Start, count) == 0
        }

        func text(_ index: Int) -> String { String(decoding: level(index), as: UTF8.self) }

        /// `hubs/{hub}/responses`.
        var isResponsesPrefix: Bool { count >= 3 && `is`(0, "hubs") && `is`(2, "responses") }
    }

    private static func parse(_ levels: Levels) -> Result<Topic, Failure> {
        switch levels.count {
        case 5 where levels.is(0, "hubs") && levels.is(2, "accessories") && levels.is(4, "telemetry"):
            return hub(levels, 1).flatMap { hub in accessory(levels, 3).map { .telemetry(hub: hub, accessory: $0) } }
        case 5 where levels.is(0, "hubs") && levels.is(2, "accessories") && levels.is(4, "result"):
            return hub(levels, 1).flatMap { hub in accessory(levels, 3).map { .result(hub: hub, accessory: $0) } }
        case 5 where levels.is(0, "hubs") && levels.is(2, "accessories") && levels.is(4, "headtracking"):
            return hub(levels, 1).flatMap { hub in accessory(levels, 3).map { .headTracking(hub: hub, accessory: $0) } }
        case 5 where levels.is(0, "sources") && levels.is(2, "frames"):
            return source(levels, 1).flatMap { host in
                hub(levels, 3).flatMap { hub in accessory(levels, 4).map { .frames(host: host, hub: hub, accessory: $0) } }
            }
        case 3 where levels.is(0, "sources") && levels.is(2, "headtracking"):
            return source(levels, 1).map { .hostHeadTracking(host: $0) }
        case 3 where levels.is(0, "hubs") && levels.is(2, "status"):
            return hub(levels, 1).map { .hubStatus(hub: $0) }
        case 3 where levels.is(0, "hubs") && levels.is(2, "rebirth"):
            return hub(levels, 1).map { .rebirth(hub: $0) }
        case 3 where levels.is(0, "accessories") && levels.is(2, "state"):
            return accessory(levels, 1).map { .accessoryState(accessory: $0) }
        case 3 where levels.is(0, "accessories") && levels.is(2, "controls"):
            return accessory(levels, 1).map { .controls(accessory: $0) }
        case 4 where levels.is(0, "accessories") && levels.is(2, "controls") && levels.is(3, "result"):
            return accessory(levels, 1).map { .controlsResult(accessory: $0) }
        case 3 where levels.is(0, "accessories") && levels.is(2, "view"):
            return accessory(levels, 1).map { .accessoryView(accessory: $0) }
        case 3 where levels.is(0, "accessories") && levels.is(2, "events"):
            return accessory(levels, 1).map { .accessoryEvents(accessory: $0) }
        case 3 where levels.is(0, "hubs") && levels.is(2, "availability"):
            return hub(levels, 1).map { .hubAvailability(hub: $0) }
        case 2 where levels.is(0, "bridge") && levels.is(1, "availability"):
            return .success(.bridgeAvailability)
        case 2 where levels.is(0, "bridge") && levels.is(1, "view"):
            return .success(.bridgeView)
        case 3 where levels.is(0, "sources") && levels.is(2, "state"):
            return source(levels, 1).map { .sourceState(source: $0) }
        case 3 where levels.is(0, "sources") && levels.is(2, "commands"):
            return source(levels, 1).map { .sourceCommands(source: $0) }
        case 4 where levels.isResponsesPrefix:
            let name = levels.level(3)
            guard !name.isEmpty, !name.contains(UInt8(ascii: "+")), !name.contains(UInt8(ascii: "#")) else {
                return .failure(Failure(reason: "a response topic's name must be neither empty nor hold a wildcard"))
            }
            return hub(levels, 1).map { .responses(hub: $0, name: levels.text(3)) }
        case 2 where levels.is(0, "bridge") && levels.is(1, "status"):
            return .success(.bridgeStatus)
        case 2 where levels.is(0, "bridge") && levels.is(1, "layout"):
            return .success(.bridgeLayout)
        default:
            return notInContract
        }
    }

    private static func hub(_ levels: Levels, _ index: Int) -> Result<HubID, Failure> {
        guard let id = HubID(utf8: levels.level(index)) else {
            return .failure(Failure(reason: "hub id '\(levels.text(index))' must be \(IdentifierGrammar.description)"))
        }
        return .success(id)
    }

    private static func accessory(_ levels: Levels, _ index: Int) -> Result<AccessoryID, Failure> {
        guard let id = AccessoryID(utf8: levels.level(index)) else {
            return .failure(
                Failure(reason: "accessory id '\(levels.text(index))' must be \(IdentifierGrammar.description)"))
        }
        return .success(id)
    }

    private static func source(_ levels: Levels, _ index: Int) -> Result<BluetoothAddress, Failure> {
        guard let address = BluetoothAddress(topicIDUTF8: levels.level(index)) else {
            return .failure(
                Failure(
                    reason: "source id '\(levels.text(index))' must be a Bluetooth address as 12 lowercase hex "
                        + "digits, such as 123456789abc"))
        }
        return .success(address)
    }
}
