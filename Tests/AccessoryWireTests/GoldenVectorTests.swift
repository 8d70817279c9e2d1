@testable import AccessoryWire
import CWireFixtures
import Foundation
import SwiftProtobuf
import Testing

/// Cross-language golden vectors: the Swift encoding of every sample of ``WireSamples`` is committed
/// under `Vectors/<name>.binpb`; protobuf-c (through the C fixtures in Tests/CWireFixtures) must read
/// each file to the same values, and what protobuf-c packs must decode in Swift to the same message.
///
/// `make vectors` (`AUDIO_UPDATE_VECTORS=1`) rewrites the files from the Swift samples instead of
/// comparing them.
@Suite struct GoldenVectorTests {
    static let sampleNames = WireSamples.all.map(\.name)

    // MARK: Swift -> file

    @Test("The Swift encoding of a sample equals its golden file", arguments: sampleNames)
    func swiftEncodingMatchesGoldenFile(name: String) throws {
        let sample = try #require(WireSamples.sample(named: name))
        let encoded: [UInt8] = try sample.serializedBytes()
        let golden = try Vectors.bytes(named: name)
        #expect(golden == encoded, "run `make vectors` if the change of Vectors/\(name).binpb is intended")
    }

    @Test("Vectors/ holds exactly one golden file per sample")
    func vectorDirectoryHoldsExactlyTheSamples() throws {
        if Vectors.updating {
            for name in Self.sampleNames { _ = try Vectors.bytes(named: name) }
            for stale in try Vectors.fileNames().subtracting(Self.sampleNames) {
                try FileManager.default.removeItem(at: Vectors.url(named: stale))
            }
        }
        #expect(try Vectors.fileNames() == Set(Self.sampleNames))
        #expect(Set(Self.sampleNames).count == Self.sampleNames.count, "sample names must be unique")
    }

    // MARK: Swift file -> C

    @Test("protobuf-c reads a golden file to the values of the Swift sample", arguments: sampleNames)
    func protobufCDecodesGoldenFile(name: String) throws {
        let sample = try #require(WireSamples.sample(named: name))
        let fullName = type(of: sample).protoMessageName
        let golden = try Vectors.bytes(named: name)

        let json = try #require(CFixtures.describeJSON(fullName, golden), "protobuf-c failed to unpack")
        let decoded = try decodeJSON(like: sample, json)
        #expect(decoded.isEqualTo(message: sample), "protobuf-c read: \(json)")
    }

    @Test("protobuf-c's JSON of a golden file is character for character swift-protobuf's", arguments: sampleNames)
    func protobufCJSONEqualsSwiftJSON(name: String) throws {
        // Both render canonical proto3 JSON without whitespace, fields in number order (swift-protobuf
        // is pinned exactly in Package.swift, so its formatting cannot drift under this test).
        let sample = try #require(WireSamples.sample(named: name))
        let golden = try Vectors.bytes(named: name)
        let json = try #require(CFixtures.describeJSON(type(of: sample).protoMessageName, golden))
        #expect(json == (try sample.jsonString()))
    }

    @Test("protobuf-c's JSON writes bytes as padded standard base64")
    func bytesAreRenderedAsPaddedStandardBase64() throws {
        // Bluetooth addresses are 6 bytes, which never need padding; these lengths do.
        let report = Audioaccessory_V1_SourcesReport.with {
            $0.primary = Data([0xFB, 0xFF])
            $0.secondary = Data([0xFF, 0xE0, 0x00, 0x3E])
        }
        let json = CFixtures.describeJSON(Audioaccessory_V1_SourcesReport.protoMessageName,
                                          try report.serializedBytes())
        #expect(json == #"{"primary":"+/8=","secondary":"/+AAPg=="}"#)
    }

    // MARK: C -> Swift

    @Test("What protobuf-c packs decodes in Swift to the sample, byte for byte", arguments: sampleNames)
    func swiftDecodesProtobufCPacking(name: String) throws {
        let sample = try #require(WireSamples.sample(named: name))
        let packed = try #require(CFixtures.pack(name), "the C fixtures do not know \(name)")

        let decoded = try decodeBinary(like: sample, packed)
        #expect(decoded.isEqualTo(message: sample), "Swift read: \(decoded.textFormatString())")
        // Both encoders write fields in field number order, repeated enums packed, and nothing else.
        let encoded: [UInt8] = try sample.serializedBytes()
        #expect(packed == encoded)
        // The C API refuses a buffer one byte too small rather than truncating.
        let tooSmallCapacity = packed.count - 1
        var tooSmall = [UInt8](repeating: 0, count: tooSmallCapacity)
        #expect(cwf_pack_sample(name, &tooSmall, tooSmallCapacity) == 0)
    }

    @Test("cwf_pack_sample knows no sample that Swift does not")
    func unknownSampleNameIsRefused() {
        let capacity = 4096
        var buffer = [UInt8](repeating: 0, count: capacity)
        #expect(cwf_pack_sample("no_such_sample", &buffer, capacity) == 0)
    }

    // MARK: Coverage

    @Test("Every message and field of the schemas appears in the samples, and nothing else does")
    func samplesCoverTheSchemas() throws {
        let schema = try Schema.load()
        #expect(schema.messages.count >= 13, "the schema parser found too few messages")

        let instances = try WireSamples.all.flatMap { try MessageInstance.walk($0.message) }
        let sampledTypes = Set(instances.map(\.typeName))
        #expect(Set(schema.messages.keys).subtracting(sampledTypes).isEmpty,
                "messages of the schemas without a sample (add one to WireSamples and the C fixtures)")
        #expect(sampledTypes.subtracting(schema.messages.keys).isEmpty,
                "sampled messages the schema parser did not find")

        for (typeName, message) in schema.messages {
            let exercised = instances.filter { $0.typeName == typeName }
                .reduce(into: Set<Int>()) { $0.formUnion($1.fieldCounts.keys) }
            let missing = Set(message.fields.keys).subtracting(exercised)
            #expect(missing.isEmpty, "\(typeName): fields \(missing.sorted()) are in no sample")
        }
    }

    @Test("Every field of a sample holds a non-default value", arguments: sampleNames)
    func sampleIsFullyPopulated(name: String) throws {
        let schema = try Schema.load()
        let sample = try #require(WireSamples.sample(named: name))
        for instance in try MessageInstance.walk(sample) {
            let message = try #require(schema.messages[instance.typeName])
            let counts = instance.fieldCounts
            for (number, field) in message.fields where field.oneof == nil {
                let count = counts[number, default: 0]
                if field.isRepeated {
                    #expect(count >= 2, "\(name): \(instance.typeName).\(field.name) needs two elements")
                } else {
                    #expect(count == 1, "\(name): \(instance.typeName).\(field.name) is at its default")
                }
            }
            for oneof in Set(message.fields.values.compactMap(\.oneof)) {
                let set = message.fields.filter { $0.value.oneof == oneof && counts[$0.key] != nil }
                #expect(set.count == 1, "\(name): \(instance.typeName).\(oneof) must have one member set")
            }
            #expect(Set(counts.keys).isSubset(of: message.fields.keys), "\(name): unknown fields")
            #expect(!instance.hasUnknownFields, "\(name): \(instance.typeName) carries unknown fields")
        }
    }

    @Test("Every message protobuf-c describes round-trips through its JSON")
    func everyCMessageNameRoundTrips() throws {
        let schema = try Schema.load()
        let names = CFixtures.messageNames()
        #expect(Set(names) == Set(schema.messages.keys))
        #expect(Set(names).count == names.count)

        let instances = try WireSamples.all.flatMap { try MessageInstance.walk($0.message) }
        for name in names {
            let instance = try #require(instances.first { $0.typeName == name }, "no sample of \(name)")
            let bytes: [UInt8] = try instance.message.serializedBytes()
            let json = try #require(CFixtures.describeJSON(name, bytes), "protobuf-c failed on \(name)")
            let decoded = try decodeJSON(like: instance.message, json)
            #expect(decoded.isEqualTo(message: instance.message), "\(name): protobuf-c read \(json)")
        }
    }

    // MARK: Negative checks

    @Test("protobuf-c refuses truncated bytes and unknown message names")
    func truncatedBytesAreRefused() throws {
        let fullName = Audioaccessory_V1_AccessoryState.protoMessageName
        let golden = try Vectors.bytes(named: "accessory_state")
        #expect(CFixtures.describeJSON(fullName, golden) != nil)
        #expect(CFixtures.describeJSON(fullName, Array(golden.dropLast())) == nil)
        #expect(CFixtures.describeJSON("audioaccessory.v1.NoSuchMessage", golden) == nil)
    }
}

// MARK: - Helpers

/// Decodes binary bytes into a message of the same type as `sample`.
private func decodeBinary<M: SwiftProtobuf.Message>(like sample: M, _ bytes: [UInt8]) throws -> M {
    try M(serializedBytes: bytes)
}

/// Decodes proto3 JSON into a message of the same type as `sample`; unknown keys are an error.
private func decodeJSON<M: SwiftProtobuf.Message>(like sample: M, _ json: String) throws -> M {
    try M(jsonString: json)
}

/// The golden files under Vectors/, next to this source file.
private enum Vectors {
    /// `AUDIO_UPDATE_VECTORS=1`: write the files from the samples instead of comparing them.
    static let updating = ProcessInfo.processInfo.environment["AUDIO_UPDATE_VECTORS"] == "1"

    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Vectors", isDirectory: true)

    static func url(named name: String) -> URL {
        directory.appendingPathComponent("\(name).binpb")
    }

    /// The committed bytes of the sample `name`; when updating, first (over)writes them from the
    /// Swift sample (atomically, as parameterized tests run in parallel).
    static func bytes(named name: String) throws -> [UInt8] {
        if updating {
            let sample = try #require(WireSamples.sample(named: name))
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try (sample.serializedBytes() as Data).write(to: url(named: name), options: .atomic)
        }
        return try [UInt8](Data(contentsOf: url(named: name)))
    }

    /// The sample names that have a file.
    static func fileNames() throws -> Set<String> {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        return Set(files.filter { $0.hasSuffix(".binpb") }.map { String($0.dropLast(".binpb".count)) })
    }
}

/// Swift wrappers of the C fixtures.
private enum CFixtures {
    /// The sample `name` as protobuf-c packs it, or nil when C does not know the name.
    static func pack(_ name: String) -> [UInt8]? {
        let capacity = 4096
        var buffer = [UInt8](repeating: 0, count: capacity)
        let count = cwf_pack_sample(name, &buffer, capacity)
        return count == 0 ? nil : Array(buffer.prefix(count))
    }

    /// protobuf-c's decoding of `bytes` as a `fullName` message, as canonical JSON; nil when it fails.
    static func describeJSON(_ fullName: String, _ bytes: [UInt8]) -> String? {
        guard let json = cwf_describe_json(fullName, bytes, bytes.count) else { return nil }
        defer { cwf_free(json) }
        return String(validatingCString: json)
    }

    static func messageNames() -> [String] {
        var count = 0
        guard let names = cwf_message_names(&count) else { return [] }
        return (0..<count).compactMap { names[$0].map { String(cString: $0) } }
    }
}

/// One message inside a sample (the sample itself or a nested message), with the number of values
/// each of its fields holds. A traversal visits only fields that are not at their default.
private struct MessageInstance {
    var message: any SwiftProtobuf.Message
    var fieldCounts: [Int: Int]
    var hasUnknownFields: Bool

    var typeName: String { type(of: message).protoMessageName }

    /// `root` and every message nested in it, depth first.
    static func walk(_ root: any SwiftProtobuf.Message) throws -> [MessageInstance] {
        var counter = FieldCounter()
        try root.traverse(visitor: &counter)
        let instance = MessageInstance(
            message: root, fieldCounts: counter.counts, hasUnknownFields: counter.sawUnknown)
        return try [instance] + counter.nested.flatMap { try walk($0) }
    }
}

/// Counts the values of each field of one message; repeated fields reach the singular methods once
/// per element through the Visitor's default implementations.
private struct FieldCounter: SwiftProtobuf.Visitor {
    var counts: [Int: Int] = [:]
    var nested: [any SwiftProtobuf.Message] = []
    var sawUnknown = false

    private mutating func count(_ fieldNumber: Int, _ values: Int = 1) {
        counts[fieldNumber, default: 0] += values
    }

    mutating func visitSingularDoubleField(value: Double, fieldNumber: Int) throws { count(fieldNumber) }
    mutating func visitSingularInt64Field(value: Int64, fieldNumber: Int) throws { count(fieldNumber) }
    mutating func visitSingularUInt64Field(value: UInt64, fieldNumber: Int) throws { count(fieldNumber) }
    mutating func visitSingularBoolField(value: Bool, fieldNumber: Int) throws { count(fieldNumber) }
    mutating func visitSingularStringField(value: String, fieldNumber: Int) throws { count(fieldNumber) }
    mutating func visitSingularBytesField(value: Data, fieldNumber: Int) throws { count(fieldNumber) }

    mutating func visitSingularEnumField<E: SwiftProtobuf.Enum>(value: E, fieldNumber: Int) throws {
        count(fieldNumber)
    }

    mutating func visitSingularMessageField<M: SwiftProtobuf.Message>(value: M, fieldNumber: Int) throws {
        count(fieldNumber)
        nested.append(value)
    }

    mutating func visitMapField<KeyType, ValueType: MapValueType>(
        fieldType: _ProtobufMap<KeyType, ValueType>.Type,
        value: _ProtobufMap<KeyType, ValueType>.BaseType,
        fieldNumber: Int
    ) throws {
        count(fieldNumber, value.count)
    }

    mutating func visitMapField<KeyType, ValueType>(
        fieldType: _ProtobufEnumMap<KeyType, ValueType>.Type,
        value: _ProtobufEnumMap<KeyType, ValueType>.BaseType,
        fieldNumber: Int
    ) throws where ValueType.RawValue == Int {
        count(fieldNumber, value.count)
    }

    mutating func visitMapField<KeyType, ValueType>(
        fieldType: _ProtobufMessageMap<KeyType, ValueType>.Type,
        value: _ProtobufMessageMap<KeyType, ValueType>.BaseType,
        fieldNumber: Int
    ) throws {
        count(fieldNumber, value.count)
        nested.append(contentsOf: value.values.map { $0 as any SwiftProtobuf.Message })
    }

    mutating func visitUnknown(bytes: Data) throws { sawUnknown = true }
}

/// The messages declared in Schemas/audioaccessory/v1/*.proto, read with a small tokenizer that
/// knows what these schemas use: package, import, option, enum, message (nested too), oneof and
/// plain or repeated fields (no maps).
private struct Schema {
    struct Field {
        var name: String
        var isRepeated: Bool
        /// The oneof this field belongs to, if any.
        var oneof: String?
    }

    struct Message {
        var fields: [Int: Field] = [:]
    }

    /// By full name, e.g. "audioaccessory.v1.AccessoryTelemetry".
    var messages: [String: Message] = [:]

    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Schemas/audioaccessory/v1", isDirectory: true)

    static func load() throws -> Schema {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".proto") }
        #expect(!files.isEmpty, "no .proto files in \(directory.path)")
        var schema = Schema()
        for file in files {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            try schema.parse(text, file: file)
        }
        return schema
    }

    struct ParseError: Error, CustomStringConvertible {
        var description: String
    }

    private enum Scope {
        case message(String)
        case oneof(String)
        case other
    }

    private mutating func parse(_ text: String, file: String) throws {
        let withoutComments = text.replacing(#/\/\/[^\n]*/#, with: "")
        let tokens = withoutComments.matches(of: #/"[^"]*"|[A-Za-z_][A-Za-z0-9_.]*|[0-9]+|[{}=;<>,\[\]()]/#)
            .map { String($0.output) }
        var package = ""
        var scopes: [Scope] = []
        var index = 0

        func fail(_ reason: String) -> ParseError {
            ParseError(description: "\(file): \(reason) near token \(index)")
        }
        func skipStatement() {
            while index < tokens.count, tokens[index] != ";" { index += 1 }
            index += 1
        }
        func currentMessage() -> String? {
            for scope in scopes.reversed() {
                if case .message(let name) = scope { return name }
            }
            return nil
        }

        while index < tokens.count {
            let token = tokens[index]
            switch token {
            case "package":
                package = tokens[index + 1]
                skipStatement()
            case "message":
                let parent = currentMessage() ?? package
                let name = "\(parent).\(tokens[index + 1])"
                guard tokens[index + 2] == "{" else { throw fail("message without a body") }
                messages[name] = messages[name] ?? Message()
                scopes.append(.message(name))
                index += 3
            case "oneof":
                guard tokens[index + 2] == "{" else { throw fail("oneof without a body") }
                scopes.append(.oneof(tokens[index + 1]))
                index += 3
            case "enum", "service", "extend":
                // Skip the whole block.
                while index < tokens.count, tokens[index] != "{" { index += 1 }
                var depth = 0
                repeat {
                    if tokens[index] == "{" { depth += 1 }
                    if tokens[index] == "}" { depth -= 1 }
                    index += 1
                } while depth > 0 && index < tokens.count
            case "}":
                guard scopes.popLast() != nil else { throw fail("unbalanced }") }
                index += 1
            case "syntax", "import", "option", "reserved", "extensions", ";":
                skipStatement()
            default:
                guard let message = currentMessage() else { throw fail("unexpected \(token)") }
                var oneof: String?
                if case .oneof(let name) = scopes.last { oneof = name }
                let isRepeated = token == "repeated"
                if isRepeated || token == "optional" { index += 1 }
                // type name = number ;
                if tokens[index] == "map" { throw fail("map fields are not supported") }
                guard index + 4 < tokens.count, tokens[index + 2] == "=", let number = Int(tokens[index + 3])
                else { throw fail("cannot read the field \(token)") }
                messages[message]!.fields[number] = Field(
                    name: tokens[index + 1], isRepeated: isRepeated, oneof: oneof)
                skipStatement()
            }
        }
        guard scopes.isEmpty else { throw fail("unclosed block") }
    }
}
