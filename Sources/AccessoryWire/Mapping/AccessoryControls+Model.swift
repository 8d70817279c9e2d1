import AccessoryModel

extension Audioaccessory_V1_AccessoryControls {
    init(_ request: ControlsRequest) {
        self.init()
        requestID = request.requestID
        switch request.controls.automaticSwitching {
        case nil: switching = .unspecified
        case true?: switching = .automatic
        case false?: switching = .off
        }
        switch request.controls.pin {
        case nil: pinnedSource = ""
        case .automatic?: pinnedSource = "automatic"
        case .source(let source)?: pinnedSource = source.description
        }
    }

    /// The request; an unknown switching value or a pinned source that is not an address is an error.
    func request() throws(AccessoryControlError) -> ControlsRequest {
        var controls = AccessoryControls()
        switch switching {
        case .unspecified: break
        case .automatic: controls.automaticSwitching = true
        case .off: controls.automaticSwitching = false
        case .UNRECOGNIZED(let raw):
            throw .invalidRequest(reason: "switching is \(raw), which is not a known Switching")
        }
        if !pinnedSource.isEmpty {
            if pinnedSource.lowercased() == "automatic" {
                controls.pin = .automatic
            } else if let source = BluetoothAddress(pinnedSource) ?? BluetoothAddress(topicID: pinnedSource) {
                controls.pin = .source(source)
            } else {
                throw .invalidRequest(
                    reason: "pinned_source '\(pinnedSource)' must be \"automatic\" or a Bluetooth address such as "
                        + "12:34:56:78:9A:BC")
            }
        }
        return ControlsRequest(requestID: requestID, controls: controls)
    }
}
