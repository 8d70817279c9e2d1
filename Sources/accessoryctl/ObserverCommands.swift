import AccessoryControl
import AccessoryModel
import AccessoryWire
import ArgumentParser
import Foundation
import MQTTClient
import Synchronization
import UnixSignals

/// Subscribes to `filters` and hands each message to `body` until it returns false, until `limit` has passed since
/// the connection (when given), at once after `before` when `done`, or until SIGINT or SIGTERM (Ctrl-C, a supervisor's stop): the connection then closes
/// cleanly, and what was printed stays printed (standard output goes out line by line). Returns whether it ended
/// because of such a signal.
@discardableResult
func observe(
    _ connection: ConnectionOptions, role: String, filters: [String], limit: Duration? = nil,
    before: (MQTTClient) throws -> Void = { _ in }, until done: Bool = false, _ body: (MQTTMessage) -> Bool
) async throws -> Bool {
    let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
    let client = try await connection.connecting {
        try MQTTClient(
            configuration: try connection.mqtt(clientID: ConnectionOptions.clientID(role)), logger: ConnectionOptions.logger)
    }
    let stopped = StopFlag()
    // Closing the client finishes its stream: the loop below ends as if its count were reached.
    let stopper = Task {
        for await _ in signals {
            stopped.raise()
            await client.close()
            return
        }
    }
    defer { stopper.cancel() }
    let stream: AsyncStream<MQTTMessage>
    do {
        for filter in filters {
            try client.subscribe(filter, qos: .atLeastOnce)
        }
        stream = try client.startStreaming()
        try await client.waitUntilConnected(timeout: connection.patience)
        try before(client)
    } catch {
        await client.close()
        if stopped.isRaised { return true }
        if let error = error as? MQTTError { throw connection.failure(error) }
        throw error
    }
    if done {
        // What `before` published goes out before the connection closes (close waits for its acknowledgement).
        await client.close()
        return stopped.isRaised
    }
    let timer = limit.map { limit in
        Task {
            try await Task.sleep(for: limit)
            await client.close()
        }
    }
    defer { timer?.cancel() }
    for await message in stream where !body(message) {
        break
    }
    await client.close()
    return stopped.isRaised
}

/// Whether a stop signal came.
final class StopFlag: Sendable {
    private let raised = Atomic(false)

    func raise() {
        raised.store(true, ordering: .relaxed)
    }

    var isRaised: Bool {
        raised.load(ordering: .relaxed)
    }
}

struct State: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print an accessory's state as the bridge retains it (AccessoryControlDevice.current(for:)).")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The accessory id.") var accessory: AccessoryArgument

    func run() async throws {
        let connection = try await connection.resolvingLayout()
        let topic = try connection.filter(.accessoryState).replacingOccurrences(
            of: "/accessories/+/", with: "/accessories/\(accessory.id)/")
        var found = false
        // A retained state arrives at once; none within the timeout means the bridge never published one.
        let stopped = try await observe(connection, role: "state", filters: [topic], limit: connection.patience) {
            message in
            print(Describe.message(message, root: (try? connection.root(of: message.topic)) ?? .default))
            found = true
            return false
        }
        if stopped { throw ExitCode(130) }
        guard found else { throw fail("no state of \(accessory.id) on \(topic)") }
    }
}

struct Source: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Act as a playing device: publish its activity and Head Tracking setting (retained), then print the "
            + "commands it receives.",
        discussion: """
            Run it again to change the device's state: `accessoryctl source 12:34:56:78:9A:BC --head-tracking off \
            --count 0` turns head tracking off and exits (the bridge tells the hubs of the sessions the device hosts); \
            `accessoryctl host` renders the sessions' frames.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The device's Bluetooth address, such as 12:34:56:78:9A:BC.") var address: AddressArgument
    @Option(help: "idle, media or call.") var activity = "media"
    @Option(help: "The accessory the device says it is routed to.") var routedTo: AccessoryArgument?
    @Option(help: "on or off: the person's Head Tracking setting on the device (rule 13).")
    var headTracking = SwitchArgument.off
    @Option(help: "Exit after this many commands; 0 exits once the state is published (default: run until interrupted).")
    var count: Int?

    func run() async throws {
        guard let activity = Activity.allCases.first(where: { $0.description == activity }) else {
            throw ValidationError("--activity must be idle, media or call")
        }
        let root = try connection.root
        let state = SourceReport(
            sequence: UInt64(max(0, WallClock.system.now.unixMilliseconds)), activity: activity,
            routedAccessory: routedTo?.id, headTracking: headTracking.isOn)
        let format = connection.format
        var received = 0
        try await observe(
            connection, role: "source", filters: [Topic.sourceCommands(source: address.address).name(under: root)],
            before: { client in
                try client.publish(
                    MQTTMessage(
                        topic: Topic.sourceState(source: address.address).name(under: root),
                        payload: WireCodec().encode(state, as: format), qos: .atLeastOnce, retain: true,
                        properties: MQTTProperties(contentType: format.contentType)))
                print("source  \(address.address) \(activity), head tracking \(headTracking)")
            }, until: count == 0
        ) { message in
            print(Describe.message(message, root: root))
            received += 1
            return count.map { received < $0 } ?? true
        }
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print commands, results, states, statuses and head-tracking news as they go by, decoded.")

    @OptionGroup var connection: ConnectionOptions
    @Flag(help: "Also print hubs' requests (telemetry) and playing devices' states.") var all = false
    @Option(help: "Exit after this many messages (default: run until interrupted).") var count: Int?

    func run() async throws {
        let connection = try await connection.resolvingLayout()
        var kinds: [Topic.Kind] = [
            .sourceCommands, .result, .accessoryState, .hubStatus, .bridgeStatus, .bridgeLayout, .headTracking,
            .hostHeadTracking,
        ]
        if all { kinds += [.telemetry, .sourceState] }
        var seen = 0
        try await observe(connection, role: "watch", filters: try kinds.map(connection.filter)) { message in
            print(Describe.message(message, root: (try? connection.root(of: message.topic)) ?? .default))
            seen += 1
            return count.map { seen < $0 } ?? true
        }
    }
}

struct Layout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print how the bridge lays out the hubs' topics: a single bridge, or a cluster's slot count.",
        discussion: """
            The bridge retains its layout on R/bridge/layout (docs/scale-out.md, "The layout hubs read"): what \
            `--slots bridge` reads, and what the C SDK's AUDIOHUB_SLOTS_FROM_BRIDGE follows.
            """)

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let root = try connection.root
        let mqtt = try connection.mqtt(clientID: ConnectionOptions.clientID("layout"))
        let layout = try await connection.connecting {
            try await BridgeLayout.read(
                mqtt: mqtt, topicRoot: root, timeout: connection.patience, logger: ConnectionOptions.logger)
        }
        guard let layout else {
            throw fail("no bridge's layout on \(Topic.bridgeLayout.name(under: root)) within \(connection.timeout) s")
        }
        print(Describe.layout(layout))
    }
}
