import Foundation
import Testing
import TestSupport

/// Rules the schemas must keep, read from the .proto files themselves so that a new field cannot break them unseen.
@Suite struct SchemaRulesTests {
    struct Field {
        var message: String
        var type: String
        var name: String
        var number: Int
    }

    /// The fields of every message in Schemas/, with their types (oneof members included).
    static func fields() throws -> [Field] {
        var fields: [Field] = []
        let field = try Regex(#"^\s*(repeated\s+)?([A-Za-z0-9_.]+)\s+([a-z0-9_]+)\s*=\s*([0-9]+)\s*;"#)
        for file in try RepositoryFiles.protoFiles() {
            var stack: [String] = []
            for line in try RepositoryFiles.text("Schemas/" + file).split(separator: "\n") {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                if let match = code.firstMatch(of: /^\s*(message|oneof|enum)\s+(\w+)\s*\{/) {
                    stack.append(match.1 == "message" ? String(match.2) : (match.1 == "oneof" ? stack.last ?? "" : "enum"))
                    if code.contains("}") { stack.removeLast() }
                    continue
                }
                if code.contains("}") { stack.removeLast(); continue }
                guard let message = stack.last, message != "enum", let match = code.firstMatch(of: field),
                    let number = Int(match.output[4].substring ?? "")
                else { continue }
                let repeated = match.output[1].substring != nil
                fields.append(Field(message: message, type: (repeated ? "repeated " : "") + String(match.output[2].substring ?? ""),
                    name: String(match.output[3].substring ?? ""), number: number))
            }
        }
        return fields
    }

    static let scalarVarints: Set<String> = ["bool", "int32", "int64", "uint32", "uint64", "sint32", "sint64"]

    /// The first byte of a field's key.
    static func firstKeyByte(_ field: Field, enums: Set<String>) -> Int {
        let type = field.type.replacingOccurrences(of: "repeated ", with: "")
        let wireType: Int
        if field.type.hasPrefix("repeated ") && (scalarVarints.contains(type) || enums.contains(type)) {
            wireType = 2  // packed
        } else if scalarVarints.contains(type) || enums.contains(type) {
            wireType = 0
        } else if ["fixed64", "sfixed64", "double"].contains(type) {
            wireType = 1
        } else if ["fixed32", "sfixed32", "float"].contains(type) {
            wireType = 5
        } else {
            wireType = 2  // string, bytes, messages
        }
        let key = field.number << 3 | wireType
        return key < 0x80 ? key : (key & 0x7F) | 0x80
    }

    @Test func inboundMessagesCanNeverLookLikeJSON() throws {
        let fields = try Self.fields()
        var enums = Set<String>()
        for file in try RepositoryFiles.protoFiles() {
            for match in try RepositoryFiles.text("Schemas/" + file).matches(of: /enum\s+(\w+)\s*\{/) {
                enums.insert(String(match.1))
            }
        }
        #expect(enums.isSuperset(of: ["Capability", "Placement", "Activity"]))
        // What hubs and playing devices publish, and everything nested in it.
        let inbound: Set<String> = [
            "AccessoryTelemetry", "SourceState", "HubStatus", "AccessoryControls",
            "Paired", "Unpaired", "Register", "Configuration", "PlacementReport", "SourcesReport",
        ]
        let top = fields.filter {
            ["AccessoryTelemetry", "SourceState", "HubStatus", "AccessoryControls"].contains($0.message)
        }
        #expect(top.count >= 14, "the parser found the fields")
        #expect(Set(fields.map(\.message)).isSuperset(of: inbound.subtracting(["Unpaired"])))
        // Only the first field of a top-level message can start a payload.
        let forbidden: Set<Int> = [0x09, 0x0A, 0x0D, 0x20, 0x7B]  // \t \n \r space {
        for field in top {
            let byte = Self.firstKeyByte(field, enums: enums)
            #expect(!forbidden.contains(byte), "\(field.message).\(field.name) = \(field.number) encodes as 0x\(String(byte, radix: 16))")
        }
    }

    @Test func noProto3Optional() throws {
        for file in try RepositoryFiles.protoFiles() {
            let text = try RepositoryFiles.text("Schemas/" + file)
            #expect(text.firstMatch(of: /(?m)^\s*optional\s/) == nil, "\(file): protoc-c 1.4.1 rejects proto3 optional")
            #expect(text.contains("syntax = \"proto3\";"), "\(file)")
            #expect(text.contains("package audioaccessory.v1;"), "\(file)")
        }
    }
}
