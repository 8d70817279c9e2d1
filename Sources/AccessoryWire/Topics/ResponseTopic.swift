import AccessoryModel

/// Where the bridge may also answer a hub's request: the MQTT 5 response topic the request names, when it lies under
/// the requesting hub's own `R/hubs/{hub}/responses/`. The bridge may write on every device's commands topic, and the
/// broker cannot tell a result written there from a command: so no hub may make the bridge write anywhere else.
public enum ResponseTopic: Hashable, Sendable {
    /// The request names none.
    case none
    /// Under the hub's own responses: answer there too.
    case allowed(String)
    /// Anywhere else: answer only on the result topic (and say so).
    case refused(String)

    public init(_ requested: String?, of hub: HubID, under root: TopicRoot) {
        guard let requested, !requested.isEmpty else {
            self = .none
            return
        }
        if case .responses(hub, _)? = try? Topic(parsing: requested, under: root) {
            self = .allowed(requested)
        } else {
            self = .refused(requested)
        }
    }
}
