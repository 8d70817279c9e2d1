/// This release of AudioAccessoryBridge: what the bridge announces in its BridgeStatus and the tools print for
/// `--version`. The one place the number is written.
public enum Release {
    public static let version = "0.1.0"
}
