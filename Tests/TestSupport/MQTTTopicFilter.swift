/// An MQTT topic filter and which topic names it matches (`+` one level, `#` the rest), as a broker decides: for tests
/// that check what a client's subscriptions can receive.
public struct MQTTTopicFilter: Hashable, Sendable {
    public let levels: [Substring]

    public init(_ filter: String) {
        levels = filter.split(separator: "/", omittingEmptySubsequences: false)
    }

    public func matches(_ topic: String) -> Bool {
        let names = topic.split(separator: "/", omittingEmptySubsequences: false)
        for (index, level) in levels.enumerated() {
            if level == "#" { return true }
            guard index < names.count, level == "+" || level == names[index] else { return false }
        }
        return levels.count == names.count
    }
}
