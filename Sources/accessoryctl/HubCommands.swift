import AccessoryControl
import AccessoryModel
import AccessoryWire
import ArgumentParser

struct Pair: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Report that AccessorySetupKit pairing finished (Paired).")

    @OptionGroup var hub: HubOptions
    @Argument(help: "The accessory id.") var accessory: AccessoryArgument
    @Option(help: "The accessory's name.") var name = ""
    @Option(help: "The accessory's model.") var model = ""
    @Option(
        help: "What the hardware can do, separated by commas: audioSwitching, placement, audioSpatialization, headTracking.")
    var capabilities = CapabilitiesArgument([.audioSwitching, .placement])

    func run() async throws {
        try await hub.run { hub throws(AccessoryControlError) in
            let paired = try await hub.pair(
                accessory.id, name: name, model: model, hardwareCapabilities: capabilities.capabilities)
            print("paired \(paired)")
        }
    }
}

struct Unpair: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Report that the accessory was unpaired.")

    @OptionGroup var hub: HubOptions
    @Argument(help: "The accessory id.") var accessory: AccessoryArgument

    func run() async throws {
        try await hub.run { hub throws(AccessoryControlError) in
            try await hub.unpair(hub.accessory(accessory.id))
            print("unpaired \(accessory.id)")
        }
    }
}

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "AccessoryControlDevice.register(accessory, capabilities), or (iOS 27) with a configuration naming "
            + "the accessory's spatial audio extension.")

    @OptionGroup var hub: HubOptions
    @Argument(help: "The accessory id.") var accessory: AccessoryArgument
    @Option(
        help: "The capabilities to register, separated by commas: audioSwitching, placement, audioSpatialization, headTracking.")
    var capabilities = CapabilitiesArgument([.audioSwitching, .placement])
    @Option(
        help: "The spatial audio rendering extension (with audioSpatialization), in hex: type:subtype:manufacturer[:flags:mask], such as aaf:c0f:b05e.")
    var spatialExtension: AudioComponentArgument?

    func run() async throws {
        try await hub.run { hub throws(AccessoryControlError) in
            if let spatialExtension {
                let configuration = AccessoryControlDevice.Configuration(
                    deviceCapabilities: capabilities.capabilities,
                    spatialExtensionDescription: spatialExtension.description)
                try await hub.register(hub.accessory(accessory.id), configuration)
                print("registered \(accessory.id) with \(capabilities.capabilities), spatial extension "
                    + "\(spatialExtension.description)")
            } else {
                try await hub.register(hub.accessory(accessory.id), capabilities.capabilities)
                print("registered \(accessory.id) with \(capabilities.capabilities)")
            }
        }
    }
}

struct Place: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Report the accessory's placement (PlacementReport).")

    @OptionGroup var hub: HubOptions
    @Argument(help: "The accessory id.") var accessory: AccessoryArgument
    @Argument(help: "inEar, onHead, overTheEar, offHead, or none.") var placement: PlacementArgument

    func run() async throws {
        try await hub.run { hub throws(AccessoryControlError) in
            try await hub.report(placement: placement.placement, for: hub.accessory(accessory.id))
            print("placed \(accessory.id) \(placement.placement.map(\.description) ?? "nowhere")")
        }
    }
}

struct Sources: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Report the audio sources the accessory is connected to (SourcesReport); none clears them.")

    @OptionGroup var hub: HubOptions
    @Argument(help: "The accessory id.") var accessory: AccessoryArgument
    @Argument(help: "The primary source's Bluetooth address, such as 12:34:56:78:9A:BC.") var primary: AddressArgument?
    @Argument(help: "The secondary source's Bluetooth address.") var secondary: AddressArgument?

    func run() async throws {
        try await hub.run { hub throws(AccessoryControlError) in
            try await hub.report(
                primary: primary?.address, secondary: secondary?.address, for: hub.accessory(accessory.id))
            print("connected \(accessory.id) to \(SourcePair(primary: primary?.address, secondary: secondary?.address))")
        }
    }
}

struct Update: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "AccessoryControlDevice.update(_:) with a full configuration.")

    @OptionGroup var hub: HubOptions
    @Argument(help: "The accessory id.") var accessory: AccessoryArgument
    @Option(help: "The registered capabilities.") var capabilities = CapabilitiesArgument([.audioSwitching, .placement])
    @Option(help: "inEar, onHead, overTheEar, offHead, or none.") var placement = PlacementArgument(argument: "none")!
    @Option(help: "The primary source's Bluetooth address.") var primary: AddressArgument?
    @Option(help: "The secondary source's Bluetooth address.") var secondary: AddressArgument?
    @Option(help: "The spatial audio rendering extension, in hex: type:subtype:manufacturer[:flags:mask].")
    var spatialExtension: AudioComponentArgument?

    func run() async throws {
        try await hub.run { hub throws(AccessoryControlError) in
            let configuration = AccessoryControlDevice.Configuration(
                devicePlacement: placement.placement, deviceCapabilities: capabilities.capabilities,
                primaryAudioSourceDeviceIdentifier: primary?.address.data,
                secondaryAudioSourceDeviceIdentifier: secondary?.address.data,
                spatialExtensionDescription: spatialExtension?.description)
            // The seeds' sequence needs current(for:) first; the bridge knows this hub's accessory once it answers,
            // so a one-shot tool sends the update straight through the hub.
            try await hub.update(configuration, for: hub.accessory(accessory.id))
            print("updated \(accessory.id)")
        }
    }
}

struct Slot: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "In a cluster of bridges: a hub's routing domain, its slot, and the root of its topics.")

    @Argument(help: "The hub id (its routing domain is its id up to '--', or all of it).") var hub: String
    @Option(help: "The cluster's number of slots.") var slots: Int
    @Option(help: "The first topic levels of the contract.") var topicRoot = "audio"

    func run() async throws {
        guard let id = HubID(hub) else { throw ValidationError("the hub id must be \(IdentifierGrammar.description)") }
        guard let clusterSlots = ClusterSlots(slots) else {
            throw ValidationError("--slots must be a number \(ClusterSlots.range), not \(slots)")
        }
        guard let root = TopicRoot(topicRoot) else { throw ValidationError("--topic-root must be \(TopicRoot.grammar)") }
        let slot = clusterSlots.slot(of: id)
        print("hub \(id): routing domain \(ClusterSlots.domain(of: id)), slot \(slot) of \(slots), topics under "
            + "\(clusterSlots.root(of: slot, under: root))")
    }
}
