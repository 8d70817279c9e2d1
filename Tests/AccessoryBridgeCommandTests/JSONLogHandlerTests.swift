@testable import accessory_bridge
import Foundation
import Logging
import Testing

/// `--log-format json`: one JSON object a line, keys sorted, every value a string, the time in RFC 3339 with
/// milliseconds (UTC).
@Suite struct JSONLogHandlerTests {
    func line(
        _ message: String, metadata: Logger.Metadata = [:], seconds: Int = 1_795_689_774, nanoseconds: Int = 123_456_789
    ) -> String {
        let bytes = JSONLogHandler.line(
            time: timespec(tv_sec: seconds, tv_nsec: nanoseconds), level: .info, label: "accessory-bridge",
            message: message, metadata: metadata)
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test func aLineIsOneObjectWithItsKeysSorted() {
        #expect(
            line("serving a slot", metadata: ["slot": "5", "epoch": .stringConvertible(7), "start_ms": "67"])
                == #"{"epoch":"7","label":"accessory-bridge","level":"info","message":"serving a slot","slot":"5","#
                + #""start_ms":"67","time":"2026-11-26T10:42:54.123Z"}"#)
    }

    @Test func theTimeIsUTCWithMillisecondsAndLeadingZeros() {
        #expect(line("m", seconds: 1_799_118_245, nanoseconds: 7_000_000).hasSuffix(#""time":"2027-01-05T03:04:05.007Z"}"#))
        #expect(line("m", seconds: 0, nanoseconds: 999_999_999).hasSuffix(#""time":"1970-01-01T00:00:00.999Z"}"#))
    }

    @Test func stringsAreEscapedAsJSONSays() throws {
        let message = "a \"quoted\" path C:\\x, a tab\tand a line\nbreak, \u{1}, é and 🎧"
        let text = line(message, metadata: ["error": "broker said \"no\"\n"])
        #expect(text.contains(#""message":"a \"quoted\" path C:\\x, a tab\u0009and a line\u000abreak, \u0001, é and 🎧""#))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String])
        #expect(object["message"] == message)
        #expect(object["error"] == "broker said \"no\"\n")
    }

    @Test func metadataCannotReplaceTheLinesOwnFields() throws {
        let text = line("the real message", metadata: ["message": "forged", "level": "critical", "time": "never", "x": "1"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String])
        #expect(object["message"] == "the real message")
        #expect(object["level"] == "info")
        #expect(object["time"] == "2026-11-26T10:42:54.123Z")
        #expect(object["x"] == "1")
        #expect(object.count == 5)
    }
}
