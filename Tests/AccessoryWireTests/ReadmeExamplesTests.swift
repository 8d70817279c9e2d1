@testable import AccessoryWire
import Foundation
import SwiftProtobuf
import Testing
import TestSupport

/// The JSON examples of README.md and docs/ (docs/wire-contract.md has them) are part of the contract people copy:
/// each must decode, strictly (no unknown field), as the message its code block names.
@Suite struct ReadmeExamplesTests {
    struct Example: CustomTestStringConvertible, Sendable {
        var message: String
        var json: String
        var file: String
        var line: Int
        var testDescription: String { "\(message) at \(file):\(line)" }
    }

    /// Code blocks opened with ```` ```json audioaccessory.v1.Message ````, in README.md and every docs/*.md.
    static let examples: [Example] = {
        guard let files = try? RepositoryFiles.markdownFiles() else { return [] }
        var examples: [Example] = []
        for file in files {
            guard let text = try? RepositoryFiles.text(file) else { continue }
            for block in RepositoryFiles.codeBlocks(in: text, info: "json ") {
                examples.append(Example(
                    message: block.info, json: block.lines.joined(separator: "\n"), file: file, line: block.line))
            }
        }
        return examples
    }()

    static let types: [String: any SwiftProtobuf.Message.Type] = Dictionary(
        WireSamples.all.map { (type(of: $0.message).protoMessageName, type(of: $0.message)) }, uniquingKeysWith: { a, _ in a })

    @Test func theDocsHaveExamplesOfEveryMessageAPersonPublishesOrReads() {
        let named = Set(Self.examples.map(\.message))
        #expect(named.isSuperset(of: [
            "audioaccessory.v1.AccessoryTelemetry", "audioaccessory.v1.RequestResult", "audioaccessory.v1.AccessoryState",
            "audioaccessory.v1.SourceState", "audioaccessory.v1.SwitchCommand", "audioaccessory.v1.HubStatus",
            "audioaccessory.v1.BridgeStatus",
        ]))
        #expect(Self.examples.count >= 12)
    }

    @Test(arguments: examples)
    func decodesStrictly(_ example: Example) throws {
        let type = try #require(Self.types[example.message], "unknown message \(example.message)")
        let message = try type.init(jsonString: example.json)
        // Non-trivial: every example says something.
        #expect(try message.jsonString() != "{}", "\(example.json)")
        #expect(try PayloadFormat.detect(contentType: nil, payload: Array(example.json.utf8)) == .json)
    }
}
