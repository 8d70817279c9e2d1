import AccessoryControl
import AccessoryModel
import AccessoryWire
import ArgumentParser
import Foundation
import Synchronization
import UnixSignals

/// `accessoryctl host`: a playing device that hosts head-tracking sessions (rule 13), as a renderer would.
struct Host: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Act as a playing device hosting head-tracking sessions: print each session's news, and every second "
            + "each accessory's frames per second and latency.",
        discussion: """
            With --activity or --head-tracking it first retains the device's state (as `accessoryctl source` does). \
            Each second, for each accessory that sent frames: frames a second, the latency from the hub's sending \
            (p50, p99; by the two machines' clocks), and the frames dropped (of another session or hub) and missed \
            (gaps in a session's sequence) so far.
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The device's Bluetooth address, such as 12:34:56:78:9A:BC.") var address: AddressArgument
    @Option(help: "idle, media or call: retain the device's state first.") var activity: String?
    @Option(help: "on or off: the person's Head Tracking setting, retained with the activity (media unless given).")
    var headTracking: SwitchArgument?
    @Option(help: "Exit after this many seconds (default: run until interrupted).") var seconds: Double?

    func run() async throws {
        let activity = try self.activity.map { name in
            guard let activity = Activity.allCases.first(where: { $0.description == name }) else {
                throw ValidationError("--activity must be idle, media or call")
            }
            return activity
        }
        var options = HeadTrackingHost.Options()
        options.topicRoot = try connection.root
        options.payloadFormat = connection.format
        let host = try await connection.connecting {
            try HeadTrackingHost(
                address: address.address, mqtt: try connection.mqtt(clientID: ConnectionOptions.clientID("host")),
                options: options, logger: ConnectionOptions.logger)
        }
        do {
            try await connection.connecting { try await host.start(timeout: connection.patience) }
            if activity != nil || headTracking != nil {
                try host.report(activity ?? .media, headTracking: headTracking?.isOn ?? false)
            }
        } catch {
            await host.stop()
            throw error
        }
        print("host    \(address.address)" + (activity.map { " \($0)" } ?? "")
            + (headTracking.map { ", head tracking \($0)" } ?? ""))

        let meter = FrameMeter()
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        let seconds = seconds
        await withTaskGroup(of: Void.self) { group in
            // The news, and for each accessory that gets a session, its frames, session after session.
            group.addTask {
                await withTaskGroup(of: Void.self) { consumers in
                    var listening = Set<AccessoryID>()
                    for await news in host.sessionNews() {
                        let event = news.event
                        print("session \(news.hub.map { "\($0)/" } ?? "")\(event.session.accessory) "
                            + Describe.headTracking(event))
                        let accessory = event.session.accessory
                        guard event.kind == .activated, listening.insert(accessory).inserted else { continue }
                        consumers.addTask {
                            while !Task.isCancelled {
                                for await frame in host.sensorUpdates(for: accessory) { meter.record(frame) }
                            }
                        }
                    }
                    consumers.cancelAll()
                }
            }
            group.addTask {
                while (try? await Task.sleep(for: .seconds(1))) != nil {
                    for line in meter.report(host) { print(line) }
                }
            }
            group.addTask {
                if let seconds {
                    try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
                } else {
                    for await _ in signals { return }
                }
            }
            if seconds != nil {
                group.addTask {
                    for await _ in signals { return }
                }
            }
            // The time is up, or a signal came.
            await group.next()
            group.cancelAll()
        }
        await host.stop()
    }
}

/// Each accessory's frames since the last report: their latencies.
final class FrameMeter: Sendable {
    private let latencies = Mutex<[AccessoryID: [Duration]]>([:])

    func record(_ frame: HeadTrackingHost.SensorFrame) {
        latencies.withLock { $0[frame.accessory, default: []].append(frame.latency) }
    }

    /// One line per accessory that sent frames since the last report:
    /// `frames  headphones 100/s, latency p50 1.2 ms p99 3.4 ms, dropped 0, missed 0`.
    func report(_ host: HeadTrackingHost) -> [String] {
        let second = latencies.withLock { latencies in
            defer { latencies.removeAll(keepingCapacity: true) }
            return latencies
        }
        return second.sorted { $0.key < $1.key }.map { accessory, latencies in
            let sorted = latencies.sorted()
            let statistics = host.statistics(of: accessory)
            return "frames  \(accessory) \(sorted.count)/s, latency p50 \(Self.milliseconds(Self.percentile(50, of: sorted))) "
                + "p99 \(Self.milliseconds(Self.percentile(99, of: sorted))), dropped \(statistics.dropped), "
                + "missed \(statistics.missed)"
        }
    }

    /// The `p`th percentile of `sorted` (nearest rank).
    static func percentile(_ p: Int, of sorted: [Duration]) -> Duration {
        guard !sorted.isEmpty else { return .zero }
        let rank = (p * sorted.count + 99) / 100
        return sorted[min(sorted.count - 1, max(0, rank - 1))]
    }

    static func milliseconds(_ duration: Duration) -> String {
        String(format: "%.1f ms", Double(duration.components.seconds) * 1000
            + Double(duration.components.attoseconds) / 1e15)
    }
}
