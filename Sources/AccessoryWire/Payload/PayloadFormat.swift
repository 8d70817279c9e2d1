import Foundation

/// How a payload is encoded: binary protobuf, or the canonical protobuf JSON mapping (for people testing by hand).
public enum PayloadFormat: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case protobuf
    case json

    /// The MQTT 5 content type the bridge sends with this format.
    public var contentType: String {
        switch self {
        case .protobuf: "application/protobuf"
        case .json: "application/json"
        }
    }

    /// Content types read as JSON (parameters such as `; charset=utf-8` are ignored, case does not matter).
    public static let jsonContentTypes: Set<String> = ["application/json"]
    /// Content types read as protobuf.
    public static let protobufContentTypes: Set<String> = [
        "application/protobuf", "application/x-protobuf", "application/vnd.google.protobuf",
        "application/octet-stream",
    ]

    /// The format of an inbound payload: the MQTT 5 content type when there is one, else JSON when the first
    /// non-blank byte is `{`, else protobuf.
    ///
    /// No inbound message of the contract can start with a blank byte or `{` in binary protobuf (see types.proto),
    /// so the guess is never wrong for a payload that decodes at all.
    public static func detect(contentType: String?, payload: some Collection<UInt8>) throws(WireError) -> PayloadFormat {
        if let contentType, !contentType.isEmpty {
            // The bridge's and the SDK's own spellings, without Foundation's trimming and lowercasing (a measurable
            // share of the bridge's time under load).
            if contentType == PayloadFormat.protobuf.contentType { return .protobuf }
            if contentType == PayloadFormat.json.contentType { return .json }
            let mediaType = (contentType.split(separator: ";", maxSplits: 1).first ?? "")
                .trimmingCharacters(in: .whitespaces).lowercased()
            if jsonContentTypes.contains(mediaType) { return .json }
            if protobufContentTypes.contains(mediaType) { return .protobuf }
            throw WireError(
                .unsupportedContentType,
                "content type '\(contentType)' is neither JSON (application/json) nor protobuf (application/protobuf)")
        }
        let first = payload.first { !isBlank($0) }
        return first == UInt8(ascii: "{") ? .json : .protobuf
    }

    public var description: String { rawValue }

    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n")
            || byte == UInt8(ascii: "\r")
    }
}
