import CMosquitto
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The `struct mosquitto *` of one client.
// @unchecked Sendable: the pointer is used from several threads only the way libmosquitto allows in threaded mode
// (`mosquitto_threaded_set`): the network thread alone connects and runs the loop; other threads only publish,
// subscribe and disconnect, and only under `ClientCore.library`, whose flag turns false before
// `mosquitto_destroy`, which runs after the network thread was joined (or on that thread, after its loop).
struct MosquittoHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// The handler of a client's network thread, which thread that is, and what only that thread uses.
// @unchecked Sendable: `handler` and `receiving` are written once, by MQTTClient.start() before it creates the network
// thread (which orders the writes before everything the thread does), and read only on that thread, and by release()
// after it ended. `thread` is written by the network thread first thing (a publishing session's by its receiving
// session's, before it runs it) and only compared with the caller's thread after that: a thread that reads it while
// it is being written is not the network thread, and reads a value that is not its own. `connack` and the rest are
// read and written on the network thread only.
final class LoopContext: @unchecked Sendable {
    var handler: (any MQTTClientHandler)?
    var thread: pthread_t?
    /// The flags of a CONNACK success whose handling in libmosquitto is not over (see `ClientCore.finishConnecting()`).
    var connack: Int32?
    /// A publishing session's: the session it publishes for, whose network thread runs it and hands its events on
    /// (written before that thread starts, like `handler`).
    weak var receiving: ClientCore?
    /// A receiving session's (on its network thread): which of the two sessions are connected, and whether the
    /// receiving one resumed its session.
    var receivingUp = false
    var publishingUp = false
    var sessionPresent = false
    /// A receiving session's (on its network thread): since when it has not read, waiting for its publishing
    /// session's queue to shrink.
    var pausedSince: ContinuousClock.Instant?
    /// A receiving session's (on its network thread): its publishing session's connection, run beside its own.
    var link: PublishingLink?
    /// How many packets libmosquitto handed to a callback (on the network thread): whether a read found one.
    var packetsHandled = 0

    /// Whether the caller is the network thread.
    var isCurrent: Bool {
        guard let thread else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }
}

/// Everything an ``MQTTClient`` shares with its network thread and libmosquitto's callbacks; it is the `obj`
/// userdata of `mosquitto_new`, retained through `Unmanaged` until ``release()``.
final class ClientCore: Sendable {
    let configuration: MQTTConfiguration
    let logger: Logger
    /// The handler, given to ``MQTTClient/start(_:)`` before the network thread starts and called only on it.
    let loop = LoopContext()
    let handle: MosquittoHandle
    let state = Mutex(ClientState())
    /// `true` while `handle` may be used by API calls; held during each such call, so that ``release()`` waits
    /// for them. libmosquitto is never called with `state` held, and the callbacks never take this lock.
    let library = Mutex(true)
    /// Wakes the network thread from its `poll`.
    let wakePipe: WakePipe
    /// The session that publishes for this one, when there is one (see ``MQTTClient/init(configuration:publishingSession:logger:)``).
    let publishing: ClientCore?
    /// A publishing session's: how many messages `state.pending` holds, read by its receiving session before each
    /// packet without taking the lock.
    let waiting = Atomic(0)

    init(configuration: MQTTConfiguration, publishing: MQTTConfiguration? = nil, logger: Logger) throws(MQTTError) {
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "mqtt.client_id"] = "\(configuration.clientID)"
        self.logger = logger
        wakePipe = try WakePipe()
        let publishingCore = try publishing.map { configuration throws(MQTTError) in
            try ClientCore(configuration: configuration, logger: logger)
        }
        do {
            handle = try MosquittoHandle.make(configuration)
        } catch {
            publishingCore?.release()
            throw error
        }
        self.publishing = publishingCore
        // From here on libmosquitto holds a reference: balanced in release().
        mosquitto_user_data_set(handle.pointer, Unmanaged.passRetained(self).toOpaque())
        installCallbacks()
    }

    /// This session and its publishing session, if any.
    var sessions: [ClientCore] { [self] + (publishing.map { [$0] } ?? []) }

    /// The session that publishes.
    var publisher: ClientCore { publishing ?? self }

    static func from(_ userdata: UnsafeMutableRawPointer?) -> ClientCore {
        Unmanaged<ClientCore>.fromOpaque(userdata!).takeUnretainedValue()
    }

    /// ``from(_:)`` in a callback for a packet libmosquitto read, counted in ``LoopContext/packetsHandled``.
    static func forPacket(_ userdata: UnsafeMutableRawPointer?) -> ClientCore {
        let core = from(userdata)
        core.loop.packetsHandled &+= 1
        return core
    }

    var stopRequested: Bool {
        state.withLock { $0.stopRequested }
    }

    /// Runs `body` with the handle unless the client was closed.
    func withHandle<Result>(_ body: (OpaquePointer) throws(MQTTError) -> Result) throws(MQTTError) -> Result {
        try library.withLock { (open: inout Bool) throws(MQTTError) -> Result in
            guard open else { throw MQTTError.closed }
            return try body(handle.pointer)
        }
    }

    /// Destroys the libmosquitto handle and drops libmosquitto's reference. Runs once, after the network loop.
    func release() {
        library.withLock { open in
            open = false
            mosquitto_destroy(handle.pointer)
        }
        Unmanaged.passUnretained(self).release()
        loop.handler?.closed()
        // The handler often holds the client: let go of it.
        loop.handler = nil
    }

    func onEvent(_ event: MQTTEvent) {
        if let receiving = loop.receiving {
            receiving.sessionEvent(event, from: .publishing)
        } else if publishing != nil {
            sessionEvent(event, from: .receiving)
        } else {
            loop.handler?.event(event)
        }
    }

    // MARK: Subscriptions

    /// Sends SUBSCRIBE for `subscription`; on the network thread (connect callback) or under `library`.
    /// Returns the message id, or `nil` when not connected (the next connect sends it).
    func sendSubscribe(_ subscription: Subscription, on pointer: OpaquePointer) throws(MQTTError) -> Int32? {
        var mid: Int32 = 0
        let options = subscription.noLocal ? Int32(MQTT_SUB_OPT_NO_LOCAL.rawValue) : 0
        let rc = mosquitto_subscribe_v5(pointer, &mid, subscription.filter, subscription.qos.rawValue, options, nil)
        if rc == MosquittoLibrary.noConnection { return nil }
        guard rc == MosquittoLibrary.success else { throw MQTTError.library(rc) }
        return mid
    }

    /// Remembers which filter a SUBSCRIBE carried, or reports its SUBACK if that came first.
    func recordSubscribe(mid: Int32, filter: String) {
        let early: [Int32]? = state.withLock { state in
            if let codes = state.earlySubacks.removeValue(forKey: mid) { return codes }
            state.pendingSubscribes[mid] = [filter]
            return nil
        }
        if let early { reportSubscribeResult(filters: [filter], codes: early) }
    }

    private func reportSubscribeResult(filters: [String], codes: [Int32]) {
        for (filter, code) in zip(filters, codes) where code >= 0x80 {
            let error = MQTTError(kind: .subscriptionRefused, code: code, message: MosquittoLibrary.reasonText(code))
            logger.warning(
                "MQTT subscription refused",
                metadata: ["mqtt.filter": "\(filter)", "mqtt.reason_code": "\(code)", "mqtt.error": "\(error.message)"]
            )
            onEvent(.subscriptionRefused(filter: filter, error))
        }
    }

    // MARK: Callbacks (on the network thread)

    private func installCallbacks() {
        let pointer = handle.pointer
        mosquitto_connect_v5_callback_set(pointer) { _, userdata, reason, flags, _ in
            ClientCore.forPacket(userdata).connected(reason: reason, flags: flags)
        }
        mosquitto_disconnect_v5_callback_set(pointer) { _, userdata, code, _ in
            ClientCore.from(userdata).disconnected(code: code)
        }
        mosquitto_message_v5_callback_set(pointer) { _, userdata, message, properties in
            guard let message else { return }
            let core = ClientCore.forPacket(userdata)
            core.finishConnecting()
            core.received(message.pointee, properties)
        }
        mosquitto_subscribe_v5_callback_set(pointer) { _, userdata, mid, count, codes, _ in
            let copied = codes.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(count, 0)))) } ?? []
            let core = ClientCore.forPacket(userdata)
            core.finishConnecting()
            core.subscribeAcknowledged(mid: mid, codes: copied)
        }
        mosquitto_publish_v5_callback_set(pointer) { _, userdata, mid, reason, _ in
            let core = ClientCore.forPacket(userdata)
            core.finishConnecting()
            core.published(mid: mid, reason: reason)
        }
        // libmosquitto formats a log line for every packet when a log callback is set, whatever its level: only when
        // those lines would be logged (measured: 2% of the bridge's time under load).
        if logger.logLevel <= .debug {
            mosquitto_log_callback_set(pointer) { _, userdata, level, line in
                guard let line else { return }
                ClientCore.from(userdata).libraryLogged(level: level, line)
            }
        }
    }

    private func connected(reason: Int32, flags: Int32) {
        guard reason == 0 else {
            let error = MQTTError.connectionRefused(reason: reason)
            var metadata: Logger.Metadata = ["mqtt.reason_code": "\(reason)", "mqtt.error": "\(error.message)"]
            if let hint = error.hint { metadata["mqtt.hint"] = "\(hint)" }
            logger.warning("MQTT connection refused", metadata: metadata)
            attemptFailed(error)
            onEvent(.connectionRefused(error))
            return
        }
        loop.connack = flags
        let subscriptions = state.withLock { state in
            state.connectedSinceBackoff = true
            state.pendingSubscribes.removeAll()
            state.earlySubacks.removeAll()
            return state.subscriptions
        }
        // Calling libmosquitto from its own callback only queues the packets: no deadlock.
        for subscription in subscriptions {
            do {
                if let mid = try sendSubscribe(subscription, on: handle.pointer) {
                    recordSubscribe(mid: mid, filter: subscription.filter)
                }
            } catch {
                logger.error(
                    "MQTT resubscribe failed", metadata: ["mqtt.filter": "\(subscription.filter)", "mqtt.error": "\(error)"]
                )
            }
        }
        // The rest waits for finishConnecting(): after this callback returns, libmosquitto sends again the messages
        // that were in flight when the last connection ended, and nothing published later may overtake them.
    }

    /// Remembers why an attempt to connect failed. Before the first connection, a failure that trying again cannot
    /// mend (``MQTTError/isPermanent``: credentials, authorization, TLS) ends the wait of whoever waits for it; the
    /// client still retries.
    private func attemptFailed(_ error: MQTTError) {
        let waiters = state.withLock { state in
            state.lastFailure = error
            return !state.hasConnected && error.isPermanent ? state.connectionWaiters.removeAll() : []
        }
        for waiter in waiters { waiter.resume(returning: .failure(error)) }
    }

    /// Opens the connection to everything else once libmosquitto's handling of a CONNACK is over — it then queued
    /// again the messages that were in flight — at the first callback or turn of the loop after it: the client counts
    /// as connected, waiters are released, the handler hears of it, and what waited leaves. MQTT keeps a client's
    /// messages in order only if this comes after those: a hub's message sent while the broker was away would
    /// otherwise reach it behind the next one, and be refused as out of order.
    func finishConnecting() {
        guard let flags = loop.connack else { return }
        loop.connack = nil
        // Waiters are released after the SUBSCRIBEs of the CONNACK's callback: what they publish next goes out behind
        // them, so a message published to a filter subscribed before `start()` comes back (the bridge's rebuild
        // marker relies on it).
        let (subscriptions, waiters) = state.withLock { state in
            state.isConnected = true
            state.hasConnected = true
            state.lastFailure = nil
            return (state.subscriptions.count, state.connectionWaiters.removeAll())
        }
        let sessionPresent = flags & 1 != 0
        logger.info(
            "MQTT connected",
            metadata: ["mqtt.session_present": "\(sessionPresent)", "mqtt.subscriptions": "\(subscriptions)"]
        )
        onEvent(.connected(sessionPresent: sessionPresent))
        for waiter in waiters { waiter.resume(returning: .success(())) }
        // What waited for the connection leaves now, behind the SUBSCRIBEs and what the handler just published.
        sendPending()
    }

    private func disconnected(code: Int32) {
        loop.connack = nil
        let (wasConnected, requested, drained) = state.withLock { state in
            defer { state.isConnected = false }
            // Nothing is acknowledged without a connection: whoever waits for that stops waiting.
            return (state.isConnected, state.stopRequested, state.drainWaiters.removeAll())
        }
        for waiter in drained { waiter.resume() }
        guard wasConnected else {
            logger.debug("MQTT connection attempt ended", metadata: ["mqtt.code": "\(code)"])
            return
        }
        if requested {
            logger.info("MQTT disconnected")
            onEvent(.disconnected(nil))
        } else {
            let error = MQTTError.disconnected(code: code)
            logger.warning("MQTT connection lost", metadata: ["mqtt.code": "\(code)", "mqtt.error": "\(error.message)"])
            onEvent(.disconnected(error))
        }
    }

    private func received(_ message: mosquitto_message, _ properties: OpaquePointer?) {
        let payload: [UInt8] =
            if message.payloadlen > 0, let bytes = message.payload {
                [UInt8](UnsafeRawBufferPointer(start: bytes, count: Int(message.payloadlen)))
            } else {
                []
            }
        loop.handler?.received(
            MQTTMessage(
                topic: String(cString: message.topic),
                payload: payload,
                qos: QoS(rawValue: message.qos) ?? .atMostOnce,
                retain: message.retain,
                properties: properties.map { MQTTProperties(copying: $0) } ?? .none
            )
        )
    }

    private func subscribeAcknowledged(mid: Int32, codes: [Int32]) {
        let filters: [String]? = state.withLock { state in
            if let filters = state.pendingSubscribes.removeValue(forKey: mid) { return filters }
            state.earlySubacks[mid] = codes
            return nil
        }
        if let filters { reportSubscribeResult(filters: filters, codes: codes) }
    }

    private func published(mid: Int32, reason: Int32) {
        let drained = state.withLock { state in
            state.unacknowledged.remove(mid) != nil && state.unacknowledged.isEmpty ? state.drainWaiters.removeAll() : []
        }
        for waiter in drained { waiter.resume() }
        sendPending()
        guard reason >= 0x80 else { return }
        logger.warning(
            "MQTT publish refused by the broker",
            metadata: [
                "mqtt.mid": "\(mid)", "mqtt.reason_code": "\(reason)",
                "mqtt.error": "\(MosquittoLibrary.reasonText(reason))",
            ]
        )
    }

    private func libraryLogged(level: Int32, _ line: UnsafePointer<CChar>) {
        let logLevel: Logger.Level =
            switch level {
            case MOSQ_LOG_ERR: .error
            case MOSQ_LOG_WARNING: .warning
            case MOSQ_LOG_NOTICE: .notice
            case MOSQ_LOG_INFO: .info
            case MOSQ_LOG_DEBUG: .debug
            default: .trace
            }
        guard logger.logLevel <= logLevel else { return }
        logger.log(level: logLevel, "libmosquitto", metadata: ["mqtt.library_log": "\(String(cString: line))"])
    }

    // MARK: The network thread

    /// Connects, runs libmosquitto's loop, and reconnects after a growing delay until a stop is requested.
    ///
    /// Not `mosquitto_loop_start`: libmosquitto 2.0.11's threaded loop (`mosquitto_loop_forever`) ends for good on
    /// a refused MQTT 5 CONNACK (it maps every reason code above 5 to `MOSQ_ERR_PROTOCOL`, a "fatal" error), on
    /// a DNS failure and on TLS errors; this loop retries after every failure, with the backoff documented on
    /// ``MQTTConfiguration``. The CONNECT properties given to the first `mosquitto_connect_bind_v5` are kept by
    /// libmosquitto and sent again by `mosquitto_reconnect`, also after a failed first attempt.
    func runNetworkLoop() {
        let pointer = handle.pointer
        loop.thread = pthread_self()
        if let publishing {
            // This thread runs the publishing session too: what the handler publishes is written by it, after each
            // packet, with no other thread to wake (two threads cost the bridge 13-18 µs per report).
            publishing.loop.thread = pthread_self()
            loop.link = PublishingLink(publishing)
            loop.link?.connectIfDue()
        }
        wakeHandlerIfDue()
        var failure = connectFirst(pointer)
        var delay = configuration.reconnectDelay
        while true {
            if let failure {
                var metadata: Logger.Metadata = [
                    "mqtt.host": "\(configuration.host)", "mqtt.port": "\(configuration.port)",
                    "mqtt.error": "\(failure)", "mqtt.retry_in": "\(delay)",
                ]
                if let hint = failure.hint { metadata["mqtt.hint"] = "\(hint)" }
                logger.warning("MQTT connect failed; retrying", metadata: metadata)
                attemptFailed(failure)
            } else {
                serviceConnection(pointer)
            }
            let resetBackoff: Bool? = state.withLock { state in
                if state.stopRequested { return nil }
                defer { state.connectedSinceBackoff = false }
                return state.connectedSinceBackoff
            }
            guard let resetBackoff else { break }
            if resetBackoff { delay = configuration.reconnectDelay }
            logger.debug("MQTT reconnecting after a delay", metadata: ["mqtt.delay": "\(delay)"])
            waitBeforeReconnecting(delay)
            if stopRequested { break }
            delay = min(delay * 2, max(configuration.maximumReconnectDelay, configuration.reconnectDelay))
            let rc = mosquitto_reconnect(pointer)
            failure = rc == MosquittoLibrary.success ? nil : MQTTError.library(rc)
        }
        if let link = loop.link {
            link.shutDown()
            link.core.loopExited()
        }
        loopExited()
    }

    /// The first attempt, the one that passes the CONNECT properties (session expiry interval).
    func connectFirst(_ pointer: OpaquePointer) -> MQTTError? {
        var properties: OpaquePointer?
        defer { mosquitto_property_free_all(&properties) }
        if let sessionExpiry = configuration.sessionExpiry {
            let rc = mosquitto_property_add_int32(
                &properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), wholeSeconds(sessionExpiry)
            )
            if rc != MosquittoLibrary.success { return MQTTError.library(rc) }
        }
        let rc = mosquitto_connect_bind_v5(
            pointer, configuration.host, Int32(configuration.port), keepAliveSeconds(configuration.keepAlive), nil,
            properties
        )
        return rc == MosquittoLibrary.success ? nil : MQTTError.library(rc)
    }

    /// Runs libmosquitto's loop while the socket is open. When a stop is requested, sends DISCONNECT (reason 0,
    /// so no will) and waits up to two seconds for it to leave.
    private func serviceConnection(_ pointer: OpaquePointer) {
        var stopDeadline: ContinuousClock.Instant?
        var rc = MosquittoLibrary.success
        while rc == MosquittoLibrary.success {
            rc = serviceOnce(pointer, timeout: loopTimeoutMilliseconds())
            if rc == MosquittoLibrary.success { finishConnecting() }
            wakeHandlerIfDue()
            guard rc == MosquittoLibrary.success, stopRequested else { continue }
            if let stopDeadline {
                if ContinuousClock.now >= stopDeadline {
                    logger.warning("MQTT DISCONNECT not sent in time")
                    break
                }
            } else {
                stopDeadline = .now + .seconds(2)
                _ = mosquitto_disconnect_v5(pointer, Int32(MQTT_RC_NORMAL_DISCONNECTION.rawValue), nil)
            }
        }
        connectionEnded(rc)
    }

    /// A connection that ended without libmosquitto's disconnect callback still counts as ended.
    func connectionEnded(_ rc: Int32) {
        loop.connack = nil
        let stale = state.withLock { state in
            defer { state.isConnected = false }
            return state.isConnected && !state.stopRequested
        }
        if stale {
            onEvent(.disconnected(MQTTError.disconnected(code: rc)))
        }
    }

    /// How long `mosquitto_loop` may wait in `select`: a second, or less when the handler's wake-up is sooner.
    private func loopTimeoutMilliseconds() -> Int32 {
        guard let wait = loop.handler?.timeUntilWake() else { return 1000 }
        return Int32(clamping: max(0, min(1000, (wait + .microseconds(999)).wholeMillisecondsRoundedDown)))
    }

    /// Calls the handler's `wake()` when its wake-up time came.
    private func wakeHandlerIfDue() {
        guard let handler = loop.handler, let wait = handler.timeUntilWake(), wait <= .zero else { return }
        handler.wake()
    }

    /// Waits `delay` before the next connection attempt (less when a stop is requested), waking the handler when
    /// its time comes meanwhile.
    private func waitBeforeReconnecting(_ delay: Duration) {
        let end = ContinuousClock.now + delay
        while !stopRequested {
            let remaining = end - ContinuousClock.now
            guard remaining > .zero else { return }
            let wait = min(remaining, max(.zero, loop.handler?.timeUntilWake() ?? remaining))
            let milliseconds = Int32(clamping: (wait + .microseconds(999)).wholeMillisecondsRoundedDown)
            if loop.link != nil {
                // The publishing session goes on meanwhile.
                _ = serviceOnce(nil, timeout: milliseconds)
            } else {
                wakePipe.wait(milliseconds: milliseconds)
            }
            wakeHandlerIfDue()
        }
    }

    /// The most packets read per wake-up of `poll`.
    static let packetsPerWakeup = 64

    /// One turn of the loop, as `mosquitto_loop` does it but with `poll`, waking on this client's own pipe (other
    /// threads' publishes and stop requests). libmosquitto's `mosquitto_loop_read`, `_write` and `_misc` do the work,
    /// as its documentation describes for an external loop.
    ///
    /// A session alone never stops reading to push back on a handler that publishes faster than the broker
    /// acknowledges: the acknowledgements arrive on the same socket, and the bound is
    /// ``MQTTConfiguration/maximumPendingMessages``. With a publishing session, ``mayRead()`` decides.
    private func serviceOnce(_ pointer: OpaquePointer?, timeout: Int32) -> Int32 {
        var descriptors: [pollfd] = []
        if let pointer {
            let socket = mosquitto_socket(pointer)
            guard socket >= 0 else { return MosquittoLibrary.noConnection }
            let reading = mayRead()
            descriptors.append(
                pollfd(
                    fd: socket,
                    events: Int16(reading ? POLLIN : 0) | Int16(mosquitto_want_write(pointer) ? POLLOUT : 0),
                    revents: 0))
        }
        let pipe = descriptors.count
        descriptors.append(pollfd(fd: wakePipe.readEnd, events: Int16(POLLIN), revents: 0))
        let link = loop.link
        let linked = link?.addDescriptors(to: &descriptors)
        let timeout = min(timeout, link?.millisecondsUntilNextAttempt() ?? timeout)
        if poll(&descriptors, nfds_t(descriptors.count), timeout) < 0 {
            let code = cmosquitto_errno()
            return code == EINTR ? MosquittoLibrary.success : MosquittoLibrary.errno
        }
        if descriptors[pipe].revents != 0 { wakePipe.drain() }
        defer {
            if let link, let linked {
                link.service(descriptors, at: linked)
                link.connectIfDue()
            }
        }
        guard let pointer else { return MosquittoLibrary.success }
        // A closed or failed socket is reported (and read, to learn why) even while reading waits.
        if descriptors[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0,
            let rc = readWaitingPackets(pointer, while: mayRead, link: link)
        {
            return rc
        }
        if let rc = writeIfWanted(pointer) { return rc }
        return mosquitto_loop_misc(pointer)
    }

    /// Reads the packets waiting on `pointer`'s socket, while `mayGoOn` allows another, writing what handling each
    /// one queued (its own and, with a publishing session, `link`'s) before reading the next; returns the code that
    /// ends the connection, or `nil`.
    ///
    /// libmosquitto 2.0 reads one packet per call while nothing of its own is queued (QoS 0, as in the bridge's
    /// start-up read of a million retained states), and stops after any packet whose handling queued one (a PUBACK, a
    /// publish): read on while each call hands a packet to a callback, rather than a poll per packet. Not until
    /// `errno` says EAGAIN: libmosquitto writes a byte to its own wake-up socket pair for every packet it queues, and
    /// with nobody reading that pair (this loop polls its own pipe) the write fails with EAGAIN, so every QoS 1
    /// packet looked like the last (`make bench-e2e`, flood: 2.8 polls a report before, 1 after; throughput 0.90 →
    /// 1.0 of the relay's). A read that handles nothing (no data, part of a packet, a PINGRESP) ends the batch; `poll`
    /// tells whether more waits. At most ``packetsPerWakeup``, so that the wake pipe and deadlines get their turn.
    ///
    /// What the handler published for a packet is written before the next is read, as when each had a wake-up of its
    /// own (writing only after 256 packets, the p99 at 50% load went from 5-18 ms to 39-75 ms). Once a second read
    /// has handed over a packet, the sockets are corked (``holdWrites(_:on:)``) until the batch ends: the kernel then
    /// sends what the batch wrote in full segments, one transmission instead of one per packet (flood: CPU per
    /// report 72 → 52 µs, the broker's 82 → 70 µs). A batch of one, the usual case at a steady pace, is not corked.
    func readWaitingPackets(
        _ pointer: OpaquePointer, while mayGoOn: () -> Bool = { true }, link: PublishingLink? = nil
    ) -> Int32? {
        func hold(_ on: Bool) {
            Self.holdWrites(on, on: pointer)
            link?.holdWrites(on)
        }
        var holding = false
        defer { if holding { hold(false) } }
        for index in 0..<Self.packetsPerWakeup {
            if index > 0, !mayGoOn() { break }
            let handled = loop.packetsHandled
            let rc = mosquitto_loop_read(pointer, 1)
            guard rc == MosquittoLibrary.success, mosquitto_socket(pointer) >= 0 else {
                return rc == MosquittoLibrary.success ? MosquittoLibrary.noConnection : rc
            }
            let drained = loop.packetsHandled == handled
            if index > 0, !drained, !holding {
                holding = true
                hold(true)
            }
            if let rc = writeIfWanted(pointer) { return rc }
            link?.write()
            if drained { break }
        }
        return nil
    }

    /// TCP_CORK on `pointer`'s socket (when it has one): while held, what is written waits in the kernel for a full
    /// segment; released, it leaves at once. Ignored by a socket that is not TCP.
    static func holdWrites(_ hold: Bool, on pointer: OpaquePointer) {
        let socket = mosquitto_socket(pointer)
        guard socket >= 0 else { return }
        cmosquitto_cork(socket, hold)
    }

    /// Writes what libmosquitto has queued, if anything; returns the code that ends the connection, or `nil`.
    func writeIfWanted(_ pointer: OpaquePointer) -> Int32? {
        guard mosquitto_want_write(pointer) else { return nil }
        let rc = mosquitto_loop_write(pointer, 1)
        guard rc == MosquittoLibrary.success, mosquitto_socket(pointer) >= 0 else {
            return rc == MosquittoLibrary.success ? MosquittoLibrary.noConnection : rc
        }
        return nil
    }

    func loopExited() {
        let (waiters, release) = state.withLock { state in
            state.loopExited = true
            return (state.loopExitWaiters.removeAll(), state.releaseWhenLoopExits)
        }
        logger.debug("MQTT network loop ended")
        if release { self.release() }
        for waiter in waiters { waiter.resume() }
    }
}

/// MQTT keep-alive in whole seconds; libmosquitto requires at least 5.
func keepAliveSeconds(_ keepAlive: Duration) -> Int32 {
    Int32(clamping: max(5, min(Int64(UInt16.max), keepAlive.components.seconds)))
}

extension Duration {
    /// Whole milliseconds, rounded toward zero.
    var wholeMillisecondsRoundedDown: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}


extension MosquittoHandle {
    /// `mosquitto_new` and every option of `configuration`, MQTT 5, threaded mode.
    static func make(_ configuration: MQTTConfiguration) throws(MQTTError) -> MosquittoHandle {
        MosquittoLibrary.initialized
        guard !configuration.clientID.isEmpty else { throw MQTTError.invalidArgument("empty client identifier") }
        guard !configuration.host.isEmpty else { throw MQTTError.invalidArgument("empty broker host") }
        guard (1...65535).contains(configuration.port) else {
            throw MQTTError.invalidArgument("broker port \(configuration.port) out of range")
        }
        guard configuration.keepAlive >= .seconds(5), configuration.keepAlive <= .seconds(65535) else {
            throw MQTTError.invalidArgument("keep-alive must be between 5 and 65535 seconds")
        }
        guard configuration.reconnectDelay > .zero else {
            throw MQTTError.invalidArgument("the reconnect delay must be positive")
        }
        guard (1...65535).contains(configuration.maximumInflightMessages) else {
            throw MQTTError.invalidArgument("maximum inflight messages must be between 1 and 65535")
        }
        guard (1...65535).contains(configuration.maximumIncomingInflightMessages) else {
            throw MQTTError.invalidArgument("maximum incoming inflight messages must be between 1 and 65535")
        }
        // MQTT 5: clean_session is the CONNECT "clean start" flag.
        guard let pointer = mosquitto_new(configuration.clientID, configuration.cleanStart, nil) else {
            throw MQTTError.library(MosquittoLibrary.errno)
        }
        do throws(MQTTError) {
            try MosquittoLibrary.check(mosquitto_int_option(pointer, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5))
            // Our own thread runs the loop: packets from other threads are queued, and the loop woken.
            try MosquittoLibrary.check(mosquitto_threaded_set(pointer, true))
            try MosquittoLibrary.check(mosquitto_int_option(pointer, MOSQ_OPT_TCP_NODELAY, configuration.tcpNoDelay ? 1 : 0))
            // The client keeps the window itself (see ClientCore.submit); libmosquitto's is the same.
            try MosquittoLibrary.check(
                mosquitto_int_option(pointer, MOSQ_OPT_SEND_MAXIMUM, Int32(configuration.maximumInflightMessages))
            )
            try MosquittoLibrary.check(
                mosquitto_int_option(
                    pointer, MOSQ_OPT_RECEIVE_MAXIMUM, Int32(configuration.maximumIncomingInflightMessages)
                )
            )
            if configuration.username != nil || configuration.password != nil {
                try MosquittoLibrary.check(mosquitto_username_pw_set(pointer, configuration.username, configuration.password))
            }
            if let tls = configuration.tls {
                // libmosquitto says only "invalid arguments" for a file it cannot read: name the file and why.
                for (what, path) in [("CA file", tls.caFile), ("certificate file", tls.certificateFile),
                                     ("key file", tls.keyFile)] {
                    guard let path, access(path, R_OK) != 0 else { continue }
                    throw MQTTError.invalidArgument(
                        "the \(what) \(path) cannot be read: \(MosquittoLibrary.systemErrorText(cmosquitto_errno()))")
                }
                try MosquittoLibrary.check(mosquitto_tls_set(pointer, tls.caFile, nil, tls.certificateFile, tls.keyFile, nil))
            }
            if let will = configuration.will {
                try setWill(will, on: pointer)
            }
        } catch {
            mosquitto_destroy(pointer)
            throw error
        }
        return MosquittoHandle(pointer: pointer)
    }

    private static func setWill(_ will: MQTTMessage, on pointer: OpaquePointer) throws(MQTTError) {
        try validatePublishTopic(will.topic)
        guard will.payload.count <= maximumPayloadSize else { throw MQTTError.invalidArgument("will payload too large") }
        let properties = try OutgoingProperties(will.properties)
        let list = properties.list
        let rc = will.payload.withUnsafeBytes { bytes in
            mosquitto_will_set_v5(
                pointer, will.topic, Int32(bytes.count), bytes.baseAddress, will.qos.rawValue, will.retain, list
            )
        }
        guard rc == MosquittoLibrary.success else { throw MQTTError.library(rc) }
        // On success libmosquitto owns (and frees) the list.
        _ = properties.handOver()
    }
}

/// MQTT's largest payload.
let maximumPayloadSize = 268_435_455

/// `mosquitto_pub_topic_check2`: a topic to publish to has no wildcards.
func validatePublishTopic(_ topic: String) throws(MQTTError) {
    let length = topic.utf8.count
    guard length > 0, mosquitto_pub_topic_check2(topic, length) == MosquittoLibrary.success else {
        throw MQTTError.invalidArgument("invalid topic to publish to: \"\(topic)\"")
    }
}

/// `mosquitto_sub_topic_check2`: wildcards only as whole levels, `#` last.
func validateSubscriptionFilter(_ filter: String) throws(MQTTError) {
    let length = filter.utf8.count
    guard length > 0, mosquitto_sub_topic_check2(filter, length) == MosquittoLibrary.success else {
        throw MQTTError.invalidArgument("invalid subscription filter: \"\(filter)\"")
    }
}
