@testable import AccessoryWire
import Testing

@Suite struct PayloadFormatTests {
    @Test(arguments: [
        ("application/json", PayloadFormat.json), ("Application/JSON; charset=utf-8", .json), (" application/json ", .json),
        ("application/protobuf", .protobuf), ("application/x-protobuf", .protobuf),
        ("application/vnd.google.protobuf", .protobuf), ("application/octet-stream", .protobuf),
    ])
    func theContentTypeDecides(_ contentType: String, _ format: PayloadFormat) throws {
        // Even against the payload's looks: the content type is what the sender says.
        #expect(try PayloadFormat.detect(contentType: contentType, payload: Array("{}".utf8)) == format)
        #expect(try PayloadFormat.detect(contentType: contentType, payload: [0x08, 0x01]) == format)
    }

    @Test(arguments: [
        ("{\"sequence\":1}", PayloadFormat.json), ("  \n\t\r{}", .json), ("", .protobuf), ("[1]", .protobuf),
        ("\u{08}\u{01}", .protobuf), (" x{", .protobuf),
    ])
    func withoutAContentTypeTheFirstNonBlankByteDecides(_ payload: String, _ format: PayloadFormat) throws {
        #expect(try PayloadFormat.detect(contentType: nil, payload: Array(payload.utf8)) == format)
        #expect(try PayloadFormat.detect(contentType: "", payload: Array(payload.utf8)) == format)
    }

    @Test func otherContentTypesAreRefused() {
        let error = #expect(throws: WireError.self) {
            try PayloadFormat.detect(contentType: "text/plain", payload: Array("{}".utf8))
        }
        #expect(error?.kind == .unsupportedContentType)
        #expect(error?.reason.contains("content type 'text/plain' is neither JSON") == true)
    }

    @Test func outboundContentTypes() {
        #expect(PayloadFormat.json.contentType == "application/json")
        #expect(PayloadFormat.protobuf.contentType == "application/protobuf")
        for format in PayloadFormat.allCases {
            #expect(
                (format == .json ? PayloadFormat.jsonContentTypes : PayloadFormat.protobufContentTypes)
                    .contains(format.contentType))
        }
    }
}
