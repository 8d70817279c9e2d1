/// A restart: the engine takes back the routes and the devices' reports that the retained states give, without
/// running a rule.
extension RoutingEngine {

    /// Takes an accessory back as it was published before a restart — with the route it had — without running any
    /// rule: nothing is sent. The route is kept only when it is still possible (worn, listed, source free).
    /// A head-tracking session it names (`headTracking`) is taken back with its id; ``reconcileHeadTracking(at:)``
    /// ends it afterwards if it no longer follows the route.
    public mutating func restore(
        _ view: RoutingAccessory, routedSource: BluetoothAddress?, headTracking session: HeadTrackingSession? = nil,
        at now: Timestamp
    ) {
        if let session { headTracking.restore(session) }
        if let known = table.kept(view.id), let previous = table.accessories[known].routedSource {
            // A second retained state of the same accessory (delivered again, or written meanwhile by another bridge)
            // replaces the first: the route comes from it alone. Left in place, a route the new state no longer names
            // would outlive the accessory's row.
            table.setRoute(of: previous, to: nil)
            table.accessories[known].routedSource = nil
        }
        let row: Int
        if !view.takesPart {
            // Rule 1: none of routing's business (any route an earlier retained state of it gave was dropped above).
            return
        } else if let known = table.kept(view.id) {
            row = known
            updateListings(of: row, from: table.accessories[row].view.sources, to: view.sources)
            table.accessories[row].view = view
        } else {
            row = table.addAccessory(view)
            updateListings(of: row, from: [], to: view.sources)
        }
        table.accessories[row].wornSince = view.isWorn ? now : nil
        guard let address = routedSource, view.isWorn, view.sources.contains(address) else { return }
        let source = sourceRow(address)
        let routedTo = table.sources[source].routedAccessory
        guard routedTo == nil || routedTo == row else { return }
        table.setRoute(of: source, to: row)
        // The bridge sent the route before it stopped: the device has it, unless it says otherwise.
        if !table.sources[source].reportedRoute {
            setInForce(source, view.id)
        }
        table.accessories[row].routedSource = source
    }

    /// Takes a playing device's retained state back after a restart, without running any rule: nothing is sent. What
    /// a device says it is routed to wins over what the bridge remembers sending, in whichever order the two arrive.
    /// Call ``restoringFinished()`` once every state is in.
    public mutating func restoreSource(_ report: SourceReport, from address: BluetoothAddress, at now: Timestamp) {
        let source = sourceRow(address)
        table.sources[source].lastReportSequence = max(table.sources[source].lastReportSequence, report.sequence)
        headTracking.restoreHost(address, headTracking: report.headTracking)
        if let activity = report.activity {
            table.setActivity(activity, of: source)
            if activity.isActive {
                let since = restoredActiveSince ?? now
                restoredActiveSince = since
                table.sources[source].activeSince = since
            }
        }
        if let routed = report.routedAccessory {
            setInForce(source, routed)
            table.sources[source].reportedRoute = true
        }
    }

    /// Ends restoring: forgets the sources routing does not need (see ``restoreSource(_:from:at:)``, which keeps
    /// every source until now so that the order in which states arrive does not matter).
    public mutating func restoringFinished() {
        restoredActiveSince = nil
        for index in table.sources.indices {
            table.sources[index].reportedRoute = false
        }
        for address in table.sources.map(\.address) {
            pruneSource(address)
        }
    }
}
