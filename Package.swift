// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "AudioAccessoryBridge",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "AccessoryModel", targets: ["AccessoryModel"]),
        .library(name: "BridgeCore", targets: ["BridgeCore"]),
        .library(name: "AccessoryWire", targets: ["AccessoryWire"]),
        .library(name: "CAccessoryWire", targets: ["CAccessoryWire"]),
        .library(name: "MQTTClient", targets: ["MQTTClient"]),
        .library(name: "AccessoryBridge", targets: ["AccessoryBridge"]),
        .library(name: "AccessoryControl", targets: ["AccessoryControl"]),
        .executable(name: "accessory-bridge", targets: ["accessory-bridge"]),
        .executable(name: "accessoryctl", targets: ["accessoryctl"]),
    ],
    dependencies: [
        // Pinned exactly: the committed generated code is tied to this version (see `make generate`).
        .package(url: "https://github.com/apple/swift-protobuf.git", exact: "1.39.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        // Only for the operations endpoint (/metrics, /health/*): see BridgeHTTP. swift-nio comes with it; BridgeHTTP
        // names it for NIOCore's IOError (a port already in use).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Only for etcd's JSON gateway (the cluster: see Etcd); swift-nio-ssl comes with it, for etcd over TLS.
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.0"),
    ],
    targets: [
        // Pure value types and state machines: AudioAccessoryKit's model and the routing engine.
        .target(name: "AccessoryModel"),

        // Pure too: everything the bridge decides (ownership, sequences, routing, deadlines) as one state machine that
        // returns actions.
        .target(
            name: "BridgeCore",
            dependencies: [
                "AccessoryModel", .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
            ]
        ),

        // Pure too: what home automation is owed (JSON views and events, availability, Home Assistant discovery) as a
        // state machine that returns what to publish.
        .target(name: "HomeAutomation", dependencies: ["AccessoryModel", "AccessoryWire"]),

        // Pure too: one bridge's part in a cluster (membership, rendezvous assignment, claims, self-fencing) as a state
        // machine that returns what to ask etcd and which slots to start or stop; the store it needs, as a protocol.
        .target(name: "Cluster", dependencies: ["AccessoryModel"]),

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

        // libmosquitto, as a system library; MQTTClient is the only Swift module that imports it (the C hub SDK,
        // CAudioHub, and hub-sim use it too).
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        // The C library's calls that libmosquitto makes, stood in front of for the sessions MQTTClient runs: a
        // session's reads buffered (one read(2) for what has arrived rather than three or four a packet), its writes
        // gathered (one write(2) for what a turn writes rather than one a packet), and a handle made without its
        // wake-up socket pair (its headers explain how, and why).
        .target(name: "CMosquittoInterpose", dependencies: ["CMosquitto"]),
        // glibc's malloc.h, for malloc_trim (the Glibc module does not export it).
        .systemLibrary(name: "CMalloc"),
        // An async MQTT 5 client over libmosquitto.
        .target(
            name: "MQTTClient",
            dependencies: [
                "CMosquitto", "CMosquittoInterpose", .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "OrderedCollections", package: "swift-collections"),
            ]
        ),

        // The bridge: MQTT in, model and routing, MQTT out, as one Service.
        .target(
            name: "AccessoryBridge",
            dependencies: [
                "AccessoryModel", "BridgeCore", "HomeAutomation", "AccessoryWire", "MQTTClient",
                .target(name: "CMalloc", condition: .when(platforms: [.linux])),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"), .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // etcd's v3 API through its JSON gateway, with async-http-client: the cluster's store.
        .target(
            name: "Etcd",
            dependencies: [
                "Cluster",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A bridge as a member of a cluster: runs the cluster's state machine against etcd and serves the slots it
        // owns, each an AccessoryBridgeService with a session of its own.
        .target(
            name: "BridgeCluster",
            dependencies: [
                "AccessoryBridge", "AccessoryModel", "AccessoryWire", "Cluster", "Etcd", "HomeAutomation", "MQTTClient",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"), .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The operations endpoint as a Service: /metrics (Prometheus text), /health/live, /health/ready.
        .target(
            name: "BridgeHTTP",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "accessory-bridge",
            dependencies: [
                "AccessoryBridge", "AccessoryModel", "AccessoryWire", "BridgeCluster", "BridgeHTTP", "Etcd", "MQTTClient",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // AudioAccessoryKit's AccessoryControlDevice API over MQTT, for Swift hubs and companion software.
        .target(
            name: "AccessoryControl",
            dependencies: [
                "AccessoryModel", "AccessoryWire", "MQTTClient", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "accessoryctl",
            dependencies: [
                "AccessoryControl", "AccessoryModel", "AccessoryWire", "MQTTClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),

        // The seeds' code samples, compiled against AccessoryControl and run against a real bridge.
        .executableTarget(
            name: "companion-example",
            dependencies: [
                "AccessoryControl", "AccessoryModel", "MQTTClient", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/CompanionApp"
        ),

        // libFuzzer over decode -> model -> routing, with the bridge's output checked against the contract (`make fuzz`,
        // Fuzz/README.md). A plain build replays inputs instead: `pipeline-fuzzer FILE...`.
        .executableTarget(
            name: "pipeline-fuzzer",
            dependencies: [
                "AccessoryBridge", "AccessoryModel", "AccessoryWire", "MQTTClient",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            path: "Fuzz/PipelineFuzzer"
        ),

        // Release-build throughput benchmark: decode -> model -> routing -> encode on one core.
        .executableTarget(
            name: "pipeline-benchmark",
            dependencies: [
                "AccessoryBridge", "AccessoryModel", "AccessoryWire", "MQTTClient",
                .product(name: "Logging", package: "swift-log"), .product(name: "Metrics", package: "swift-metrics"),
            ],
            path: "Benchmarks/PipelineBenchmark"
        ),

        .testTarget(name: "AccessoryModelTests", dependencies: ["AccessoryModel", "TestSupport"]),
        .testTarget(name: "BridgeCoreTests", dependencies: ["BridgeCore", "AccessoryModel", "TestSupport"]),
        .testTarget(name: "HomeAutomationTests", dependencies: ["HomeAutomation", "AccessoryModel", "AccessoryWire"]),
        .testTarget(name: "ClusterTests", dependencies: ["Cluster", "AccessoryModel", "TestSupport"]),
        // The cluster end to end: etcd, mosquitto, bridges as processes, hub-sim; `make test` runs it after the others.
        .testTarget(
            name: "ClusterIntegrationTests",
            dependencies: [
                "Cluster", "TestSupport", "AccessoryControl", "AccessoryModel", "AccessoryWire", "Etcd", "MQTTClient",
                "HeadTrackingFixtures", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "AccessoryWireTests",
            dependencies: ["AccessoryWire", "CWireFixtures", "TestSupport"],
            exclude: ["Vectors"]
        ),
        .testTarget(name: "MQTTClientTests", dependencies: ["MQTTClient", "TestSupport"]),
        .testTarget(
            name: "AccessoryBridgeTests",
            dependencies: [
                "AccessoryBridge", "HomeAutomation", "TestSupport",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "AccessoryBridgeCommandTests",
            dependencies: [
                "accessory-bridge", .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The client library's logic without a broker: head-tracking sessions, their errors and their fence.
        .testTarget(
            name: "AccessoryControlTests",
            dependencies: [
                "AccessoryControl", "AccessoryModel", "AccessoryWire", "MQTTClient", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The bridge, its client and its tools against a real mosquitto.
        .testTarget(
            name: "BridgeIntegrationTests",
            dependencies: [
                "AccessoryBridge", "AccessoryControl", "AccessoryModel", "AccessoryWire", "MQTTClient", "TestSupport",
                "HeadTrackingFixtures", .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // What several test targets share: a seeded random number generator, a real mosquitto and a real etcd on free
        // ports, child processes that end with their test, the built products' paths, waits for a condition, a log
        // recorder.
        .target(
            name: "TestSupport",
            dependencies: [.product(name: "Logging", package: "swift-log")],
            path: "Tests/TestSupport"
        ),
        // What the head-tracking suites share: a hub's handlers' calls, a host's frames and news, collected.
        .target(
            name: "HeadTrackingFixtures",
            dependencies: ["AccessoryControl", "TestSupport"],
            path: "Tests/HeadTrackingFixtures"
        ),
        // C helpers for the cross-language tests: builds each message with protobuf-c, and renders
        // protobuf-c's decoding as canonical JSON.
        .target(name: "CWireFixtures", dependencies: ["CAccessoryWire"], path: "Tests/CWireFixtures"),

        // The C hub SDK (include/audiohub.h): C99 on libmosquitto and libprotobuf-c, no Swift at run time. Firmware
        // authors build it with plain make (`make install PREFIX=...`); SwiftPM builds it for the tests and hub-sim.
        .target(
            name: "CAudioHub",
            dependencies: ["CAccessoryWire", "CMosquitto", "CProtobufC"],
            exclude: ["audiohub.pc.in"],
            linkerSettings: [.linkedLibrary("mosquitto"), .linkedLibrary("protobuf-c"), .linkedLibrary("pthread")]
        ),
        // hub-sim: H hubs x A accessories on the SDK, against a bridge (`make hub-sim` prints its path).
        .executableTarget(
            name: "hub-sim", dependencies: ["CAudioHub", "CAccessoryWire", "CMosquitto"], path: "Sources/hub-sim",
            linkerSettings: [.linkedLibrary("m")]
        ),
        // The SDK's private wire functions (Sources/CAudioHub/src/audiohub_internal.h, linked from its include/), for
        // the cross-language tests; the header is never installed.
        .target(name: "CAudioHubInternal", dependencies: ["CAudioHub"], path: "Tests/CAudioHubInternal"),
        // The SDK against Swift's golden vectors, a real mosquitto and the real bridge; hub-sim end to end.
        .testTarget(
            name: "HubSDKTests",
            dependencies: [
                "CAudioHub", "CAudioHubInternal", "AccessoryWire", "MQTTClient", "TestSupport",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"), .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
