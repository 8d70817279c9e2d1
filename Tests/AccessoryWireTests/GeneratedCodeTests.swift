import Foundation
import Testing
import TestSupport

/// The generated code must match Schemas/: each generated folder records the digest of the schemas it came from,
/// and `make generate` rewrites both.
@Suite struct GeneratedCodeTests {
    /// `sha256sum` over the schemas, as scripts/generate.sh writes it.
    static func currentDigest() throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sha256sum"] + (try RepositoryFiles.protoFiles())
        process.currentDirectoryURL = RepositoryFiles.url("Schemas")
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return String(decoding: output, as: UTF8.self)
    }

    @Test(arguments: ["Sources/AccessoryWire/Generated", "Sources/CAccessoryWire/Generated"])
    func generatedCodeIsUpToDateWithTheSchemas(_ folder: String) throws {
        let recorded = try RepositoryFiles.text(folder + "/schemas.sha256")
        let current = try Self.currentDigest()
        #expect(!current.isEmpty)
        #expect(
            recorded == current,
            "Schemas/ changed since \(folder) was generated: run 'make generate' and commit the result")
    }

    @Test func everySchemaHasGeneratedSwiftAndC() throws {
        for proto in try RepositoryFiles.protoFiles() {
            let base = String(proto.dropLast(".proto".count))
            let swift = "Sources/AccessoryWire/Generated/" + base.replacingOccurrences(of: "/", with: "_") + ".pb.swift"
            let c = "Sources/CAccessoryWire/Generated/" + base + ".pb-c.c"
            #expect(FileManager.default.fileExists(atPath: RepositoryFiles.url(swift).path), "\(swift)")
            #expect(FileManager.default.fileExists(atPath: RepositoryFiles.url(c).path), "\(c)")
        }
    }
}
