import Testing
import TestSupport

@testable import AccessoryModel

/// Random sequences of events (seeded, so a failure replays) with the routing invariants checked after every event.
@Suite struct RoutingInvariantTests {
    enum Event: CustomStringConvertible {
        case accessory(before: RoutingAccessory?, after: RoutingAccessory, routedBefore: BluetoothAddress?)
        case source(BluetoothAddress, SourceReport)
        case tick

        var description: String {
            switch self {
            case .accessory(_, let after, _):
                "accessory \(after.id) \(after.registration) \(after.capabilities) \(after.placement.map(\.description) ?? "nil") "
                    + "sources \(after.sources) stale \(after.isStale)"
            case .source(let source, let report):
                "source \(source) \(report.activity.map(\.description) ?? "nil") seq \(report.sequence) "
                    + "routed \(report.routedAccessory?.rawValue ?? "-")"
            case .tick: "tick"
            }
        }
    }

    static let accessoryIDs = (0..<4).map { AccessoryID("acc-\($0)")! }
    static let sourceAddresses = (0..<4).map { BluetoothAddress(rawValue: 0xA0_0000_0000 + UInt64($0))! }

    @Test(arguments: 0..<24)
    func invariantsHoldAfterEveryEvent(seed: Int) async throws {
        try await inTheBackground {
            var random = SeededGenerator(seed: UInt64(seed) &* 0x2545_F491_4F6C_DD1D)
            var h = RoutingHarness(resumeWindow: .seconds(15))
            var inForce: [BluetoothAddress: AccessoryID] = [:]  // what each simulated device has
            var lastSequence: [BluetoothAddress: UInt64] = [:]  // of commands, per source
            var reportSequence: [BluetoothAddress: UInt64] = [:]
            var commandIDs = Set<String>()
            var displaced = Set<String>()  // "source accessory" pairs rule 6 paused: what rule 11 may bring back

            for id in Self.accessoryIDs {
                h.register(id, capabilities: [.all, .audioSwitching].randomElement(using: &random)!, placement: .offHead)
            }

            for step in 0..<1500 {
                let event = Self.randomEvent(h: h, inForce: inForce, reportSequence: &reportSequence, using: &random)
                Self.apply(event, to: &h, inForce: &inForce, using: &random)
                let context = Comment(rawValue: "seed \(seed) step \(step): \(event)\ncommands: \(h.last.commands)")
                Self.checkInvariants(h, after: event, inForce: &inForce, lastSequence: &lastSequence, displaced: &displaced,
                    commandIDs: &commandIDs, context)
            }
        }
    }

    /// The counts the statistics read (sources by activity, routes) are kept, and the routes consistent, through a
    /// restart: retained accessory and source states taken back in any order, the sources no accessory needs
    /// forgotten, then live events.
    @Test(arguments: 0..<12)
    func countsKeptThroughARestore(seed: Int) async throws {
        try await inTheBackground {
            var random = SeededGenerator(seed: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1)
            var h = RoutingHarness(resumeWindow: .seconds(15))
            // More addresses than accessories list: a restored source no accessory lists is forgotten at the end.
            let addresses = Self.sourceAddresses + [BluetoothAddress(rawValue: 0xB0_0000_0000)!]
            func check(_ moment: String) {
                #expect(h.engine.sourcesByActivity == h.engine.walkedSourcesByActivity, "seed \(seed), \(moment)")
                let routes = h.engine.routes
                #expect(h.engine.routeCount == routes.count, "seed \(seed), \(moment)")
                #expect(Set(routes.values).count == routes.count, "one source per accessory; seed \(seed), \(moment)")
                for (source, id) in routes {
                    #expect(h.engine.routedSource(for: id) == source, "seed \(seed), \(moment)")
                }
            }
            // Retained states in any order, now and then the same accessory's or source's more than once with different
            // content (delivered again after another bridge wrote it): the last one wins.
            for step in 0..<60 {
                if Bool.random(using: &random) {
                    let count = Int.random(in: 0...2, using: &random)
                    let sources = SourcePair(addresses.shuffled(using: &random).prefix(count))
                    let view = RoutingAccessory(
                        id: Self.accessoryIDs.randomElement(using: &random)!,
                        registration: Registration.allCases.randomElement(using: &random)!,
                        capabilities: [.all, .audioSwitching, .placement].randomElement(using: &random)!,
                        placement: Placement.allCases.randomElement(using: &random), sources: sources,
                        isStale: Int.random(in: 0..<5, using: &random) == 0)
                    h.engine.restore(view, routedSource: sources.randomElement(using: &random), at: h.now)
                    h.views[view.id] = view
                } else {
                    let routed = Bool.random(using: &random) ? Self.accessoryIDs.randomElement(using: &random) : nil
                    let report = SourceReport(
                        sequence: UInt64(step), activity: Activity.allCases.randomElement(using: &random),
                        routedAccessory: routed)
                    h.engine.restoreSource(report, from: addresses.randomElement(using: &random)!, at: h.now)
                }
                check("restore step \(step)")
            }
            h.engine.restoringFinished()
            check("restoring finished")
            for id in Self.accessoryIDs where h.views[id] == nil { h.register(id, placement: .offHead) }
            var inForce: [BluetoothAddress: AccessoryID] = [:]
            var reportSequence: [BluetoothAddress: UInt64] = [:]
            for step in 0..<300 {
                let event = Self.randomEvent(h: h, inForce: inForce, reportSequence: &reportSequence, using: &random)
                Self.apply(event, to: &h, inForce: &inForce, using: &random)
                check("live step \(step)")
            }
        }
    }

    /// Runs `event` on the harness; a device's report of its route is what the simulated device then has.
    static func apply(
        _ event: Event, to h: inout RoutingHarness, inForce: inout [BluetoothAddress: AccessoryID],
        using random: inout SeededGenerator
    ) {
        switch event {
        case .accessory(_, let after, _): h.change(after)
        case .source(let source, let report):
            if let routed = report.routedAccessory { inForce[source] = routed }
            h.source(source, report.activity, sequence: report.sequence, routedTo: report.routedAccessory)
        case .tick:
            h.advance(.milliseconds(Int64.random(in: 0...20_000, using: &random)))
            h.tick()
        }
    }

    static func randomEvent(
        h: RoutingHarness, inForce: [BluetoothAddress: AccessoryID], reportSequence: inout [BluetoothAddress: UInt64],
        using random: inout SeededGenerator
    ) -> Event {
        let roll = Int.random(in: 0..<100, using: &random)
        if roll < 8 { return .tick }
        if roll < 45 {
            let source = sourceAddresses.randomElement(using: &random)!
            let activity: Activity? = [nil, .idle, .idle, .media, .media, .call].randomElement(using: &random)!
            var routed: AccessoryID? = nil
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<3: routed = inForce[source]  // a truthful device repeats what it has
            case 3: routed = accessoryIDs.randomElement(using: &random)  // routed by hand
            default: break
            }
            var sequence: UInt64 = 0
            switch Int.random(in: 0..<4, using: &random) {
            case 0: sequence = 0
            case 1:
                // A repeat of the last sequenced report: ignored, so it must not move the simulated device either.
                sequence = reportSequence[source, default: 0]
                if sequence != 0 { routed = nil }
            default:
                sequence = reportSequence[source, default: 0] + 1
                reportSequence[source] = sequence
            }
            return .source(source, SourceReport(sequence: sequence, activity: activity, routedAccessory: routed))
        }
        let id = accessoryIDs.randomElement(using: &random)!
        let before = h.views[id]!
        var after = before
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<40:
            after.placement = [nil, .inEar, .onHead, .overTheEar, .offHead, .offHead].randomElement(using: &random)!
        case 40..<70:
            let count = Int.random(in: 0...2, using: &random)
            after = RoutingAccessory(
                id: id, registration: before.registration, capabilities: before.capabilities,
                placement: before.placement, sources: SourcePair(sourceAddresses.shuffled(using: &random).prefix(count)),
                isStale: before.isStale, automaticSwitching: before.automaticSwitching)
        case 70..<80:
            after.registration = [.registered, .registered, .registered, .paired, .invalidated, .unpaired]
                .randomElement(using: &random)!
        case 80..<88:
            after.isStale.toggle()
        case 88..<94:
            after.capabilities = [.all, .all, .audioSwitching, .placement].randomElement(using: &random)!
        default:
            // Rule 12: the person's controls (a connection change above drops the pin, as if unpinned with it).
            let pinned = Bool.random(using: &random) ? sourceAddresses.randomElement(using: &random) : nil
            after = RoutingAccessory(
                id: id, registration: before.registration, capabilities: before.capabilities,
                placement: before.placement, sources: before.connected, isStale: before.isStale,
                automaticSwitching: Int.random(in: 0..<4, using: &random) > 0, pinnedSource: pinned)
        }
        return .accessory(before: before, after: after, routedBefore: h.engine.routedSource(for: id))
    }

    static func checkInvariants(
        _ h: RoutingHarness, after event: Event, inForce: inout [BluetoothAddress: AccessoryID],
        lastSequence: inout [BluetoothAddress: UInt64], displaced: inout Set<String>, commandIDs: inout Set<String>,
        _ context: Comment
    ) {
        // Rule 3: a source routes to at most one accessory; an accessory from at most one source.
        let routes = h.engine.routes
        #expect(Set(routes.values).count == routes.count, context)
        #expect(h.engine.routeCount == routes.count, "the kept count the statistics read; \(context)")
        #expect(
            h.engine.sourcesByActivity == h.engine.walkedSourcesByActivity, "the kept counts by activity; \(context)")
        for id in accessoryIDs {
            #expect(h.engine.routedSource(for: id) == routes.first { $0.value == id }?.key, context)
        }
        // Never routed to an accessory that is not worn, or that does not list the source.
        for (source, id) in routes {
            let view = h.views[id]
            #expect(view?.isWorn == true, context)
            #expect(view?.sources.contains(source) == true, context)
            #expect(view?.automaticSwitching == true, "rule 12: off means the engine lets go; \(context)")
        }

        let commands = h.last.commands
        for (index, command) in commands.enumerated() {
            // Rule 10: unique ids, increasing per-source sequences.
            #expect(commandIDs.insert(command.id).inserted, context)
            #expect(command.sequence > lastSequence[command.source, default: 0], context)
            lastSequence[command.source] = command.sequence
            #expect(command.issuedAt == h.now, context)

            // Rule 9: nothing repeats what the device has; pauses and releases only off the accessory it has.
            switch command.action {
            case .routeToAccessory:
                #expect(inForce[command.source] != command.accessoryID, context)
                #expect(h.views[command.accessoryID]?.isWorn == true, "routes go to worn accessories; \(context)")
                inForce[command.source] = command.accessoryID
            case .pause, .release:
                #expect(inForce[command.source] == command.accessoryID, context)
                inForce[command.source] = nil
            case .resume:
                // After its ROUTE, or without one when the device reported that route itself (rule 9).
                #expect(inForce[command.source] == command.accessoryID, "RESUME where it is routed; \(context)")
            }

            // Rule 11: nothing is resumed that a call did not displace.
            let pair = "\(command.source) \(command.accessoryID)"
            if command.action == .pause, command.reason == .sourceActivated { displaced.insert(pair) }
            if command.reason == .interruptionEnded, command.action != .release {
                #expect(displaced.contains(pair), "an interruption ended for what was never displaced; \(context)")
            }

            // Every command's reason matches its rule.
            let engine = h.engine
            #expect(reasonMatchesRule(command, at: index, of: commands, after: event, activity: engine.activity(of:)),
                context)
        }
    }

    /// Whether `command` is one the rule named by its reason can issue for `event`.
    static func reasonMatchesRule(
        _ command: SwitchCommand, at index: Int, of commands: [SwitchCommand], after event: Event,
        activity: (BluetoothAddress) -> Activity
    ) -> Bool {
        switch event {
        case .tick:
            return false  // time alone never issues commands
        case .source(let source, let report):
            // Rule 11: the reporting source's call ended: it is released, and what it displaced comes back.
            if command.reason == .interruptionEnded {
                switch command.action {
                case .release: return command.source == source && activity(source) == .idle
                case .routeToAccessory, .resume: return command.source != source
                case .pause: return false
                }
            }
            // Rule 6 otherwise. A call never loses its accessory to media.
            guard command.reason == .sourceActivated else { return false }
            switch command.action {
            case .routeToAccessory: return command.source == source
            case .pause where command.source == source:
                // Rule 3: the device says it is routed to an accessory another source holds.
                return report.routedAccessory == command.accessoryID
            case .pause:
                let displacedIsCall = activity(command.source) == .call
                return command.source != source && (!displacedIsCall || activity(source) == .call)
            case .resume, .release: return false
            }
        case .accessory(let before, let after, let routedBefore):
            // Rule 12: with automatic switching off, nothing at all.
            guard command.accessoryID == after.id, after.automaticSwitching else { return false }
            // Turned back on, the accessory is as if just put on.
            let wasWorn = (before?.isWorn ?? false) && (before?.automaticSwitching ?? true)
            let listed = after.sources.contains(command.source)
            let routedWasDisconnected = routedBefore.map { !after.sources.contains($0) } ?? false
            switch (command.action, command.reason) {
            case (.release, .registrationEnded):
                return command.source == routedBefore && after.registration != .registered
            case (.release, .accessoryIneligible):
                return command.source == routedBefore && after.registration == .registered && !after.takesPart
            case (.pause, .takenOff):
                return command.source == routedBefore && wasWorn && !after.isWorn && after.takesPart && listed
            case (.pause, .sourceDisconnected):
                return command.source == routedBefore && after.takesPart && !listed
            case (.routeToAccessory, .sourceDisconnected):
                return routedWasDisconnected && after.isWorn && listed && activity(command.source).isActive
            case (.routeToAccessory, .putOn), (.resume, .putOn): return !wasWorn && after.isWorn && listed
            case (.routeToAccessory, .interruptionEnded), (.resume, .interruptionEnded):
                return routedWasDisconnected && after.isWorn && listed
            case (.pause, .controlsChanged):
                return command.source == routedBefore && after.takesPart && !listed
                    && after.connected.contains(command.source)
            case (.routeToAccessory, .controlsChanged):
                return before?.connected == after.connected && after.isWorn && listed
                    && activity(command.source).isActive
            case (.routeToAccessory, .sourceActivated):
                return wasWorn && after.isWorn && listed && !(before?.sources.contains(command.source) ?? false)
                    && activity(command.source).isActive
            default: return false
            }
        }
    }
}
