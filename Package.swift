// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "AudioAccessoryBridge",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "AccessoryModel", targets: ["AccessoryModel"]),
        .library(name: "AccessoryWire", targets: ["AccessoryWire"]),
        .library(name: "CAccessoryWire", targets: ["CAccessoryWire"]),
    ],
    dependencies: [
        // Pinned exactly: the committed generated code is tied to this version (see `make generate`).
        .package(url: "https://github.com/apple/swift-protobuf.git", exact: "1.39.0"),
    ],
    targets: [
        // Pure value types and state machines: AudioAccessoryKit's model and the routing engine.
        .target(name: "AccessoryModel"),

        // The wire contract in Swift: generated messages, wire <-> model mapping, topics, payload formats.
        .target(
            name: "AccessoryWire",
            dependencies: [
                "AccessoryModel",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            exclude: ["Generated/schemas.sha256"]
        ),

        // The same contract in C (protoc-c output), for hubs.
        .target(
            name: "CAccessoryWire",
            dependencies: ["CProtobufC"],
            exclude: ["Generated/schemas.sha256"],
            publicHeadersPath: "Generated"
        ),
        .systemLibrary(
            name: "CProtobufC",
            pkgConfig: "libprotobuf-c",
            providers: [.apt(["libprotobuf-c-dev"])]
        ),

        // Release-build throughput benchmark: decode -> model -> routing -> encode on one core.
        .executableTarget(
            name: "pipeline-benchmark",
            dependencies: ["AccessoryModel", "AccessoryWire"],
            path: "Benchmarks/PipelineBenchmark"
        ),

        .testTarget(name: "AccessoryModelTests", dependencies: ["AccessoryModel", "TestSupport"]),
        .testTarget(
            name: "AccessoryWireTests",
            dependencies: ["AccessoryWire", "CWireFixtures", "TestSupport"],
            exclude: ["Vectors"]
        ),
        // What several test targets share (a seeded random number generator).
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        // C helpers for the cross-language tests: builds each message with protobuf-c, and renders
        // protobuf-c's decoding as canonical JSON.
        .target(name: "CWireFixtures", dependencies: ["CAccessoryWire"], path: "Tests/CWireFixtures"),
    ],
    swiftLanguageModes: [.v6]
)
