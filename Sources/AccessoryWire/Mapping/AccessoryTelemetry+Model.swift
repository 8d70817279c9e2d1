import AccessoryModel

extension Audioaccessory_V1_AccessoryTelemetry {
    /// The model request this telemetry carries, for the accessory its topic names.
    ///
    /// Fails with `invalidRequest` when the payload names another accessory, carries no event, or holds enum
    /// values that are UNSPECIFIED where one is required or unknown to this version; with `unknown` when its only
    /// content is fields this version does not know.
    func request(for accessory: AccessoryID) throws(AccessoryControlError) -> AccessoryRequest {
        guard accessoryID.isEmpty || accessoryID == accessory.rawValue else {
            throw Self.mismatch(named: accessoryID, topic: accessory)
        }
        switch event {
        case nil where !unknownFields.data.isEmpty:
            // Fields of a newer schema (an event this version does not know): not the hub's mistake.
            throw .unknown(
                reason: "the telemetry carries only fields this bridge does not know (an event from a newer "
                    + "schema?); upgrade the bridge")
        case nil:
            throw .invalidRequest(
                reason: "the telemetry carries no event; set one of paired, unpaired, register, update, placement, "
                    + "sources")
        case .paired(let paired)?:
            return .paired(
                name: paired.name, model: paired.model,
                hardwareCapabilities: try paired.hardwareCapabilities.capabilities(field: "paired.hardware_capabilities"))
        case .unpaired?:
            return .unpaired
        case .register(let register)?:
            return .register(
                try register.capabilities.capabilities(field: "register.capabilities"),
                spatialExtensionDescription: register.hasSpatialExtensionDescription
                    ? register.spatialExtensionDescription.model : nil)
        case .update(let configuration)?:
            return .update(try configuration.configuration())
        case .placement(let report)?:
            return .placement(try report.placement.placement(field: "placement.placement"))
        case .sources(let report)?:
            return .sources(primary: report.primary.nilWhenEmpty, secondary: report.secondary.nilWhenEmpty)
        }
    }

    /// The error for a payload whose `accessory_id` is not the accessory its topic names.
    static func mismatch(named: String, topic accessory: AccessoryID) -> AccessoryControlError {
        .invalidRequest(reason: "the payload names accessory '\(named)' but the topic names '\(accessory)'")
    }

    /// The telemetry that carries `request`.
    init(_ request: AccessoryRequest, sequence: UInt64 = 0, requestID: String = "") {
        self.init()
        self.sequence = sequence
        self.requestID = requestID
        switch request {
        case .paired(let name, let model, let hardware):
            paired = .with {
                $0.name = name
                $0.model = model
                $0.hardwareCapabilities = .init(hardware)
            }
        case .unpaired:
            unpaired = .init()
        case .register(let capabilities, let spatialExtension):
            register = .with {
                $0.capabilities = .init(capabilities)
                if let spatialExtension { $0.spatialExtensionDescription = .init(spatialExtension) }
            }
        case .update(let configuration):
            update = .init(configuration)
        case .placement(let placement):
            self.placement = .with { $0.placement = .init(placement) }
        case .sources(let primary, let secondary):
            sources = .with {
                $0.primary = primary ?? .init()
                $0.secondary = secondary ?? .init()
            }
        }
    }
}
