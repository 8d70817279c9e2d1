import CAudioHub
import Foundation
import Synchronization
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Copies of the SDK's views

/// An `audiohub_address` as bytes (empty: none).
func bytes(of address: audiohub_address) -> [UInt8] {
    withUnsafeBytes(of: address.bytes) { Array($0.prefix(min(Int(address.length), 6))) }
}

/// An `audiohub_address` from bytes (at most 6 are stored; `length` says how many were given).
func address(_ bytes: [UInt8]) -> audiohub_address {
    var address = audiohub_address()
    address.length = bytes.count
    withUnsafeMutableBytes(of: &address.bytes) { raw in
        for (index, byte) in bytes.prefix(6).enumerated() { raw[index] = byte }
    }
    return address
}

/// A Swift copy of `audiohub_state` (the C view is valid during its callback only).
struct StateCopy: Equatable, Sendable {
    var accessoryID: String
    var hubID: String
    var registration: UInt32
    var name: String
    var model: String
    var hardwareCapabilities: UInt32
    var capabilities: UInt32
    var placement: UInt32
    var primary: [UInt8]
    var secondary: [UInt8]
    var routedSource: [UInt8]
    var lastSequence: UInt64
    var updatedAtUnixMs: Int64
    var stale: Bool
    var diagnostics: [String]
    var lastError: UInt32
    var lastErrorMessage: String
    /// The configuration's spatial extension: type, subtype, manufacturer, flags, flags mask; empty when none.
    var spatialExtension: [UInt32] = []
}

extension StateCopy {
    init(_ state: audiohub_state) {
        accessoryID = String(cString: state.accessory_id)
        hubID = String(cString: state.hub_id)
        registration = state.registration.rawValue
        name = String(cString: state.name)
        model = String(cString: state.model)
        hardwareCapabilities = state.hardware_capabilities
        capabilities = state.configuration.capabilities
        placement = state.configuration.placement.rawValue
        primary = bytes(of: state.configuration.primary)
        secondary = bytes(of: state.configuration.secondary)
        routedSource = bytes(of: state.routed_source)
        lastSequence = state.last_sequence
        updatedAtUnixMs = state.updated_at_unix_ms
        stale = state.stale
        diagnostics = (0..<state.diagnostics_count).map { String(cString: state.diagnostics[$0]!) }
        lastError = state.last_error.rawValue
        lastErrorMessage = String(cString: state.last_error_message)
        let spatial = state.spatial_extension
        spatialExtension = state.has_spatial_extension
            ? [spatial.component_type, spatial.component_sub_type, spatial.component_manufacturer,
               spatial.component_flags, spatial.component_flags_mask] : []
    }
}

/// A Swift copy of `audiohub_result`.
struct Completion: Sendable {
    var operation: UInt32
    var accessoryID: String
    var status: UInt32
    var error: UInt32
    var message: String
    var duplicate: Bool
    var state: StateCopy?
    var sequence: UInt64
    var requestID: String
    var attempts: UInt32
    var epoch: UInt64
    /// The request's context, as the token `TestHub.request` gave it.
    var token: Int

    init(_ result: audiohub_result) {
        operation = result.operation.rawValue
        accessoryID = String(cString: result.accessory_id)
        status = result.status.rawValue
        error = result.error.rawValue
        message = String(cString: result.message)
        duplicate = result.duplicate
        state = result.state.map { StateCopy($0.pointee) }
        sequence = result.sequence
        requestID = String(cString: result.request_id)
        attempts = result.attempts
        epoch = result.epoch
        token = Int(bitPattern: result.context)
    }

    var succeeded: Bool { status == AUDIOHUB_ERR_SUCCESS.rawValue && error == AUDIOHUB_KIT_NONE.rawValue }
}

/// A C string stored in a fixed array (a tuple of CChar), up to its NUL.
func string<T>(fromCArray array: T) -> String {
    withUnsafeBytes(of: array) { raw in String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self) }
}

/// A Swift copy of `audiohub_head_tracking_session`.
struct SessionCopy: Equatable, Sendable {
    var accessoryID: String
    var sessionID: [UInt8]
    var host: [UInt8]
    var isHeadTrackingActive: Bool
    var restorationID: String
    var epoch: UInt64
    var sequence: UInt64
    var framesSent: UInt64

    init(_ session: audiohub_head_tracking_session) {
        accessoryID = string(fromCArray: session.accessory_id)
        sessionID = withUnsafeBytes(of: session.session_id) { Array($0) }
        host = bytes(of: session.host)
        isHeadTrackingActive = session.is_head_tracking_active
        restorationID = string(fromCArray: session.restoration_id)
        epoch = session.epoch
        sequence = session.sequence
        framesSent = session.frames_sent
    }
}

/// One call of the SDK's head-tracking handler.
enum HeadTrackingCall: Equatable, Sendable {
    case activate(SessionCopy)
    case stateDidChange(SessionCopy, isActive: Bool)
    case invalidate(SessionCopy, reason: UInt32)
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

// MARK: - A hub on the C API

/// What the SDK's callbacks record: given to `audiohub_new` as its userdata.
final class HubRecorder: Sendable {
    let completions = Mutex<[Completion]>([])
    let rebirths = Mutex<[(accessory: String, last: UInt64, received: UInt64, answered: Bool)]>([])
    let connects = Mutex<[Int32]>([])
    /// What the sequence load hook answers, by accessory id.
    let storedSequences = Mutex<[String: UInt64]>([:])
    /// What the save hook was given, in order.
    let savedSequences = Mutex<[(String, UInt64)]>([])
    /// The head-tracking handler's calls, in order.
    let headTracking = Mutex<[HeadTrackingCall]>([])
}

private let completionCallback: audiohub_completion_cb = { _, userdata, result in
    let recorder = Unmanaged<HubRecorder>.fromOpaque(userdata!).takeUnretainedValue()
    let copy = Completion(result!.pointee)
    recorder.completions.withLock { $0.append(copy) }
}

private let rebirthCallback: audiohub_rebirth_cb = { _, userdata, accessory, last, received, answered in
    let recorder = Unmanaged<HubRecorder>.fromOpaque(userdata!).takeUnretainedValue()
    let id = String(cString: accessory!)
    recorder.rebirths.withLock { $0.append((id, last, received, answered)) }
}

private let connectCallback: audiohub_connect_cb = { _, userdata, rc in
    let recorder = Unmanaged<HubRecorder>.fromOpaque(userdata!).takeUnretainedValue()
    recorder.connects.withLock { $0.append(rc) }
}

private let loadSequence: audiohub_sequence_load_cb = { _, userdata, accessory, last in
    let recorder = Unmanaged<HubRecorder>.fromOpaque(userdata!).takeUnretainedValue()
    guard let stored = recorder.storedSequences.withLock({ $0[String(cString: accessory!)] }) else { return false }
    last!.pointee = stored
    return true
}

private let saveSequence: audiohub_sequence_save_cb = { _, userdata, accessory, sequence in
    let recorder = Unmanaged<HubRecorder>.fromOpaque(userdata!).takeUnretainedValue()
    let id = String(cString: accessory!)
    recorder.savedSequences.withLock { $0.append((id, sequence)) }
}

private let activateCallback: @convention(c) (
    OpaquePointer?, UnsafeMutableRawPointer?, UnsafePointer<audiohub_head_tracking_session>?
) -> Void = { _, userdata, session in
    let recorder = Unmanaged<HubRecorder>.fromOpaque(userdata!).takeUnretainedValue()
    let copy = SessionCopy(session!.pointee)
    recorder.headTracking.withLock { $0.append(.activate(copy)) }
}

private let stateCallback: @convention(c) (
    OpaquePointer?, UnsafeMutableRawPointer?, UnsafePointer<audiohub_head_tracking_session>?, Bool
) -> Void = { _, userdata, session, isActive in
    let recorder = Unmanaged<HubRecorder>.fromOpaque(userdata!).takeUnretainedValue()
    let copy = SessionCopy(session!.pointee)
    recorder.headTracking.withLock { $0.append(.stateDidChange(copy, isActive: isActive)) }
}

private let invalidateCallback: @convention(c) (
    OpaquePointer?, UnsafeMutableRawPointer?, UnsafePointer<audiohub_head_tracking_session>?,
    audiohub_head_tracking_reason
) -> Void = { _, userdata, session, reason in
    let recorder = Unmanaged<HubRecorder>.fromOpaque(userdata!).takeUnretainedValue()
    let copy = SessionCopy(session!.pointee)
    recorder.headTracking.withLock { $0.append(.invalidate(copy, reason: reason.rawValue)) }
}

/// One `struct audiohub *` with its own loop thread, recording every callback.
// @unchecked: the handle is an OpaquePointer, which Swift cannot see is thread-safe; audiohub.h states that every
// function used here may be called from any thread, and `destroy` runs once, from deinit.
final class TestHub: @unchecked Sendable {
    let handle: OpaquePointer
    let recorder = HubRecorder()
    let id: String
    private let tokens = Atomic<Int>(0)

    /// A hub `id`; `configure` runs before connecting (options, hooks); `broker` nil: not connected.
    init(
        _ id: String, broker: MosquittoBroker?, url: String? = nil, timeoutMs: Int = 10_000,
        persistSequences: Bool = false, configure: (OpaquePointer) -> Void = { _ in }
    ) throws {
        self.id = id
        var handle: OpaquePointer?
        let rc = audiohub_new(id, Unmanaged.passUnretained(recorder).toOpaque(), &handle)
        guard rc == AUDIOHUB_ERR_SUCCESS, let handle else {
            throw TestFailure("audiohub_new(\(id)): \(String(cString: audiohub_strerror(rc)))")
        }
        self.handle = handle
        try Self.check(audiohub_int_option(handle, AUDIOHUB_OPT_TIMEOUT_MS, timeoutMs))
        try Self.check(audiohub_int_option(handle, AUDIOHUB_OPT_TIMEOUT_MAX_MS, 2000))
        try Self.check(audiohub_int_option(handle, AUDIOHUB_OPT_RECONNECT_MIN_MS, 50))
        try Self.check(audiohub_int_option(handle, AUDIOHUB_OPT_RECONNECT_MAX_MS, 500))
        try Self.check(audiohub_rebirth_callback_set(handle, rebirthCallback))
        try Self.check(audiohub_connection_callbacks_set(handle, connectCallback, nil))
        if persistSequences {
            try Self.check(audiohub_sequence_callbacks_set(handle, loadSequence, saveSequence))
        }
        configure(handle)
        if let broker {
            try Self.check(audiohub_connect(handle, url ?? "mqtt://127.0.0.1:\(broker.port)", nil, nil))
            try Self.check(audiohub_loop_start(handle))
        }
    }

    deinit {
        audiohub_destroy(handle)
    }

    static func check(_ rc: audiohub_err, _ what: String = "") throws {
        guard rc == AUDIOHUB_ERR_SUCCESS else {
            throw TestFailure("\(what) \(String(cString: audiohub_strerror(rc)))")
        }
    }

    /// Makes a request (`body` calls one of the request functions with the callback and context it is given) and
    /// returns the token its completion will carry; throws when the SDK refuses it.
    @discardableResult
    func request(
        _ body: (OpaquePointer, audiohub_completion_cb, UnsafeMutableRawPointer?) -> audiohub_err
    ) throws -> Int {
        let token = tokens.add(1, ordering: .relaxed).newValue
        try Self.check(body(handle, completionCallback, UnsafeMutableRawPointer(bitPattern: token)), "request")
        return token
    }

    /// Waits for the completion of `token`.
    func completion(_ token: Int, timeout: Duration = .seconds(20)) async throws -> Completion {
        let deadline = ContinuousClock.now + timeout
        // Looked at once more after the deadline: a task that could not run for a while must not miss what came.
        while true {
            if let done = recorder.completions.withLock({ $0.first { $0.token == token } }) { return done }
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TestFailure("\(id): no completion for request \(token) within \(timeout)")
    }

    /// Makes a request and waits for its completion.
    func perform(
        _ body: (OpaquePointer, audiohub_completion_cb, UnsafeMutableRawPointer?) -> audiohub_err
    ) async throws -> Completion {
        try await completion(try request(body))
    }

    func completions(of token: Int) -> [Completion] {
        recorder.completions.withLock { $0.filter { $0.token == token } }
    }

    var stats: audiohub_stats {
        var stats = audiohub_stats()
        _ = audiohub_stats_get(handle, &stats, MemoryLayout<audiohub_stats>.size)
        return stats
    }

    func accessory(_ id: String) -> audiohub_accessory? {
        var view = audiohub_accessory()
        return audiohub_accessory_get(handle, id, &view, MemoryLayout<audiohub_accessory>.size) == AUDIOHUB_ERR_SUCCESS
            ? view : nil
    }

    /// Waits until the hub is connected and subscribed.
    func waitUntilConnected(timeout: Duration = .seconds(10)) async throws {
        try await waitUntil("\(id) connected", timeout: timeout) { audiohub_is_connected(handle) }
    }

    /// Waits until nothing is queued or in flight.
    func waitUntilIdle(timeout: Duration = .seconds(20)) async throws {
        try await waitUntil("\(id) idle", timeout: timeout) { stats.queued == 0 }
    }

    // MARK: Head tracking

    /// Sets the head-tracking handler, whose calls `recorder.headTracking` records.
    func recordHeadTracking() throws {
        var handler = audiohub_head_tracking_handler(
            activate: activateCallback, state_did_change: stateCallback, invalidate: invalidateCallback)
        try Self.check(
            audiohub_head_tracking_handler_set(handle, &handler, MemoryLayout<audiohub_head_tracking_handler>.size),
            "handler")
    }

    /// Waits until the handler was called `count` times, and returns its calls.
    func headTrackingCalls(count: Int, timeout: Duration = .seconds(20)) async throws -> [HeadTrackingCall] {
        try await waitUntil("\(id): \(count) head-tracking calls", timeout: timeout) {
            recorder.headTracking.withLock { $0.count >= count }
        }
        return recorder.headTracking.withLock { $0 }
    }

    /// The session in force for `accessory` (audiohub_head_tracking_get), or nil.
    func session(_ accessory: String) -> SessionCopy? {
        var view = audiohub_head_tracking_session()
        return audiohub_head_tracking_get(handle, accessory, &view, MemoryLayout<audiohub_head_tracking_session>.size)
            == AUDIOHUB_ERR_SUCCESS ? SessionCopy(view) : nil
    }

    /// audiohub_head_tracking_send of `data`.
    func send(_ accessory: String, _ data: [UInt8]) -> audiohub_err {
        data.withUnsafeBytes { audiohub_head_tracking_send(handle, accessory, $0.baseAddress, $0.count) }
    }
}

// MARK: - Processes

/// The executables built beside this test bundle (`swift build --build-tests` builds them all).

/// A real mosquitto and the real bridge process (`accessory-bridge`) on it.
final class BridgeFixture: Sendable {
    /// Queue limits as in deploy/: the bridge's session keeps telemetry while it is away, and answers at once.
    static let queues = "max_queued_messages 1000000\nmax_inflight_messages 0\n"

    let broker: MosquittoBroker
    /// Options given to every start of the bridge after the fixture's own.
    let bridgeArguments: [String]
    private let bridge = Mutex<ChildProcess?>(nil)
    private let starts = Atomic<Int>(0)

    /// `startsBridge` false: the broker alone, until ``startBridge()``.
    init(
        persistence: Bool = false, extraConfig: String = "", bridgeArguments: [String] = [], startsBridge: Bool = true
    ) async throws {
        broker = try await MosquittoBroker(persistence: persistence, extraConfig: Self.queues + extraConfig)
        self.bridgeArguments = bridgeArguments
        if startsBridge { try await startBridge() }
    }

    deinit {
        bridge.withLock { $0?.signal(SIGKILL) }
    }

    /// Starts the bridge process and waits until it says it is online (its retained status).
    func startBridge() async throws {
        let number = starts.add(1, ordering: .relaxed).newValue
        let offset = broker.logLength
        let process = try ChildProcess(
            executable: try BuiltProducts.path("accessory-bridge"),
            arguments: ["--broker", "mqtt://127.0.0.1:\(broker.port)", "--http-port", "0", "--client-id", "sdk-bridge", "--log-level", "info"]
                + bridgeArguments,
            outputPath: broker.directory.appendingPathComponent("bridge-\(number).log").path)
        bridge.withLock { $0 = process }
        // The bridge subscribes to telemetry once its rebuild is done: then it answers.
        try await broker.waitForLog("sdk-bridge 1 audio/hubs/+/accessories/+/telemetry", after: offset, timeout: .seconds(30))
    }

    /// SIGKILL: no goodbye, nothing flushed.
    func killBridge() async throws {
        let process = bridge.withLock { $0 }
        process?.signal(SIGKILL)
        _ = try await process?.exit()
    }

    /// SIGSTOP / SIGCONT: the bridge keeps its connection but answers nothing meanwhile. Returns once the kernel says
    /// the process is stopped (or no longer is).
    func pauseBridge(_ paused: Bool) async throws {
        guard let process = bridge.withLock({ $0 }) else { throw TestFailure("no bridge to pause") }
        process.signal(paused ? SIGSTOP : SIGCONT)
        try await waitUntil(paused ? "the bridge stopped" : "the bridge going on") { process.isStopped == paused }
    }

    func stop() async throws {
        let process = bridge.withLock { $0 }
        process?.signal(SIGTERM)
        _ = try await process?.exit()
    }

    /// The bridge's logs so far.
    func bridgeLogs() -> String {
        (1...max(1, starts.load(ordering: .relaxed))).map {
            (try? String(contentsOf: broker.directory.appendingPathComponent("bridge-\($0).log"), encoding: .utf8)) ?? ""
        }.joined(separator: "\n")
    }
}
