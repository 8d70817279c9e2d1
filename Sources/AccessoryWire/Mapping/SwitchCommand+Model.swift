import AccessoryModel

extension Audioaccessory_V1_SwitchCommand {
    /// The wire form of `command` (its source is the topic's).
    init(_ command: SwitchCommand) {
        self.init()
        commandID = command.id
        sequence = command.sequence
        accessoryID = command.accessoryID.rawValue
        action = .init(command.action)
        reason = .init(command.reason)
        issuedAtUnixMs = command.issuedAt.unixMilliseconds
        epoch = command.epoch
    }

    /// The model command, for the source named by its topic.
    func command(for source: BluetoothAddress) throws(AccessoryControlError) -> SwitchCommand {
        guard let accessory = AccessoryID(accessoryID) else {
            throw .invalidRequest(reason: "accessory_id '\(accessoryID)' must be \(IdentifierGrammar.description)")
        }
        return SwitchCommand(
            id: commandID, sequence: sequence, source: source, accessoryID: accessory,
            action: try action.action(field: "action"), reason: try reason.reason(field: "reason"),
            issuedAt: Timestamp(unixMilliseconds: issuedAtUnixMs), epoch: epoch)
    }
}
