import AccessoryModel
import AccessoryWire

/// The format each party reads what the bridge sends it in: the format it last spoke. A hub's rebirth requests and
/// session news go in the format of its last telemetry or status, a playing device's commands and session news in
/// the format of its last state report, and a party not heard from since the bridge (or the slot) started gets the
/// bridge's default (`--payload-format`). So a hub on the C SDK, which reads protobuf, is served by a bridge whose
/// default is JSON for the people reading by hand, and a person publishing JSON with mosquitto_pub reads JSON back.
///
/// Only the parties that last spoke the other format are kept: a fleet in the default format costs nothing. A hub is
/// kept only while the bridge keeps something of it (``BridgeStateMachine/knows(_:)``), so that telemetry from made-up
/// hubs about accessories that do not exist leaves nothing here either; a playing device is kept as the routing keeps
/// every device that reported.
struct ReaderFormats {
    let defaultFormat: PayloadFormat
    private var hubs: Set<HubID> = []
    private var sources: Set<BluetoothAddress> = []

    init(defaultFormat: PayloadFormat) {
        self.defaultFormat = defaultFormat
    }

    /// A message from `hub`, decoded in `format`: what the bridge sends the hub from now on, this message's own
    /// news and rebirth request included, goes in it. Call ``settled(_:known:)`` once the message is handled.
    mutating func heard(_ hub: HubID, in format: PayloadFormat) {
        Self.note(hub, speaks: format != defaultFormat, in: &hubs)
    }

    /// The message from `hub` is handled: a hub the bridge keeps nothing of (`known` false, asked only of a hub kept
    /// here: a request about an accessory that does not exist) is not kept here either.
    mutating func settled(_ hub: HubID, known: @autoclosure () -> Bool) {
        if !hubs.isEmpty, hubs.contains(hub), !known() {
            hubs.remove(hub)
        }
    }

    /// A state report from the playing device `source`, decoded in `format`.
    mutating func heard(_ source: BluetoothAddress, in format: PayloadFormat) {
        Self.note(source, speaks: format != defaultFormat, in: &sources)
    }

    /// The format `hub` reads.
    func format(of hub: HubID) -> PayloadFormat {
        hubs.isEmpty || !hubs.contains(hub) ? defaultFormat : defaultFormat.other
    }

    /// The format the playing device `source` reads.
    func format(of source: BluetoothAddress) -> PayloadFormat {
        sources.isEmpty || !sources.contains(source) ? defaultFormat : defaultFormat.other
    }

    private static func note<Party: Hashable>(_ party: Party, speaks other: Bool, in set: inout Set<Party>) {
        if other {
            set.insert(party)
        } else if !set.isEmpty {
            set.remove(party)
        }
    }
}

extension PayloadFormat {
    /// The one format that is not this one.
    fileprivate var other: PayloadFormat {
        switch self {
        case .protobuf: .json
        case .json: .protobuf
        }
    }
}
