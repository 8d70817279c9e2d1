import AccessoryModel
import MQTTClient

/// One fuzz input, read as a short script for a fresh bridge: an optional restore of retained states, an optional
/// fixed set-up, then MQTT messages and clock changes. Every byte string is a valid script (a record cut short by
/// the end of the input is simply not run), so libFuzzer's mutations always reach the bridge.
///
/// ```
/// input   := header restore? record*
/// header  := 1 byte  bit 0: run the set-up first (``PipelineHarness/setUp``: two accessories paired, registered
///                           and given sources on hub-1, source 123456789abc playing media)
///                    bit 1: the bridge's default payload format is JSON (else protobuf)
///                    bit 2: a restore block follows
/// restore := count (1 byte, low 2 bits: 0...3 entries), then per entry:
///            selector (1 byte; bit 0 clear: accessories/{accessory[(s >> 1) & 3]}/state,
///                              bit 0 set:   sources/{source[(s >> 1) & 3]}/state)  content  slice
/// record  := op (1 byte), by op & 7:
///            0, 1, 2  telemetry on hubs/{hub[(op >> 3) & 1]}/accessories/{accessory[(op >> 4) & 3]}   content slice
///            3        hub status on hubs/{hub[(op >> 3) & 1]}/status                                 content slice
///            4        source state on sources/{source[(op >> 3) & 3]}/state                           content slice
///            5        time: 1 byte a; the clock advances a × 100 ms (a < 128) or (a - 128) × 2 s; then tick()
///            6        any topic: content slice(topic) slice(payload); the topic is the slice's bytes, after
///                     "audio/" unless op bit 3 is set
///            7        the wall clock steps back: 1 byte a; a × 10 ms; then tick()
/// content := 1 byte  bits 0-2: content type (``contentTypes``); bit 3: a response topic and correlation data
/// slice   := length (2 bytes, little endian; clamped to what is left) and that many bytes
/// ```
///
/// `Fuzz/make-corpus.sh` writes seeds in this format.
struct FuzzInput {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// The next byte, or `nil` at the end.
    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// A length-prefixed run of bytes; shorter when the input ends first.
    mutating func slice() -> [UInt8] {
        let low = Int(byte() ?? 0)
        let high = Int(byte() ?? 0)
        let count = min(low | high << 8, bytes.count - offset)
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    /// The MQTT 5 properties a content byte selects.
    static func properties(_ content: UInt8) -> MQTTProperties {
        MQTTProperties(
            contentType: contentTypes[Int(content & 7)],
            responseTopic: content & 8 != 0 ? responseTopic : nil,
            correlationData: content & 8 != 0 ? [content] : nil)
    }

    /// Absent, the two the bridge sends, variants it must read the same way, and ones it must refuse.
    static let contentTypes: [String?] = [
        nil, "application/json", "application/protobuf", "Application/JSON; charset=utf-8",
        "application/octet-stream", "", "text/plain", "application/x-protobuf",
    ]

    /// Where requests with a response topic want their results copied.
    static let responseTopic = "replies/fuzz"

    static let hubs = [HubID("hub-1")!, HubID("hub-2")!]
    /// `acc-7f3a` is the accessory of the golden vectors.
    static let accessories = [
        AccessoryID("acc-7f3a")!, AccessoryID("headphones")!, AccessoryID("earbuds")!, AccessoryID("Speaker_2")!,
    ]
    /// The first three are the addresses of the golden vectors.
    static let sources = [
        BluetoothAddress("12:34:56:78:9A:BC")!, BluetoothAddress("DE:F0:01:23:45:67")!,
        BluetoothAddress("A1:B2:C3:D4:E5:F6")!, BluetoothAddress("00:00:00:00:00:2A")!,
    ]
}
