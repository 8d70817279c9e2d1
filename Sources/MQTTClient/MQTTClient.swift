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

/// An MQTT 5 client over libmosquitto, with automatic reconnection.
///
/// - Everything the client calls — messages, connection changes, wake-ups — goes to one ``MQTTClientHandler``, given
///   to ``start(_:)``, on the client's network thread (its own `poll` loop over libmosquitto's read, write and misc
///   calls), one call at a time: that thread can own the handler's state.
///   Messages arrive already copied into Swift values. (libmosquitto acknowledges a QoS 1 message before the call.)
/// - Subscriptions are remembered and sent again after every (re)connect.
/// - After a lost connection the client reconnects by itself, waiting ``MQTTConfiguration/reconnectDelay`` and
///   doubling it up to ``MQTTConfiguration/maximumReconnectDelay``. It also retries when the broker is unreachable
///   at ``start(_:)``, refuses the connection, or its name does not resolve.
/// - Every libmosquitto return code becomes an ``MQTTError``; connection changes are ``MQTTEvent``s, delivered in
///   order on the network thread.
///
/// Call ``close()`` (or, outside async code, ``syncClose()``) before the last reference goes away.
public final class MQTTClient: Sendable {
    private let core: ClientCore

    /// Creates the libmosquitto client and applies the configuration; does not connect (see ``start(_:)``).
    ///
    /// With `publishingSession` (see ``MQTTConfiguration/publishingSession``), what ``publish(_:)`` queues leaves
    /// through a second connection of its own, which the same network thread runs, and the first one only receives.
    /// That lets the client push back: while
    /// more than half of ``MQTTConfiguration/maximumPendingMessages`` wait to be published, it stops reading what it
    /// receives, until a quarter wait (reading a packet every half keep-alive meanwhile, so that the connection stays
    /// up). What it does not read waits at the broker, which acknowledged it to its sender; on one connection the
    /// acknowledgements of what it publishes would wait behind that too. The handler hears of one connection: up once
    /// both are, down when either goes; ``MQTTEvent/queueDrained`` is the publishing session's.
    ///
    /// With `loops`, the client's connections are run by one of the group's network loops, beside other clients'
    /// (the loop with the fewest clients); without, by a network thread of its own.
    public init(
        configuration: MQTTConfiguration, publishingSession: MQTTConfiguration? = nil, loops: MQTTLoopGroup? = nil,
        logger: Logger
    ) throws(MQTTError) {
        let networkLoop: NetworkLoop
        if let loops { networkLoop = loops.leastBusy() } else { networkLoop = try NetworkLoop() }
        core = try ClientCore(
            configuration: configuration, publishing: publishingSession, networkLoop: networkLoop, logger: logger)
    }

    deinit {
        assert(core.sessions.allSatisfy { $0.state.withLock { $0.lifecycle == .closed } }, "MQTTClient released without close()")
    }

    /// Starts connecting (and reconnecting) in the background, calling `handler` on the network thread; returns at
    /// once. Use ``waitUntilConnected()`` or the events to know when the connection is up.
    ///
    /// A client starts once: after ``disconnect()`` make a new one.
    public func start(_ handler: some MQTTClientHandler) throws(MQTTError) {
        try core.start(handler)
    }

    /// ``start(_:)`` with a handler made of closures, each called on the network thread.
    public func start(
        onEvent: @escaping @Sendable (MQTTEvent) -> Void = { _ in },
        onMessage: @escaping @Sendable (MQTTMessage) -> Void
    ) throws(MQTTError) {
        try start(ClosureHandler(onMessage: onMessage, onEvent: onEvent, onClose: {}))
    }

    /// Waits for the first successful connection after ``start()`` (retries continue meanwhile); throws when the
    /// client was closed, or when an attempt failed in a way that trying again cannot mend.
    ///
    /// Returns at once when the client has connected before. Throws (code `MOSQ_ERR_NO_CONN`) when the client is
    /// closed, and (kind ``MQTTError/Kind/disconnected``) when ``disconnect()`` or ``close()`` comes before the
    /// first connection, or when the task is cancelled. Throws the attempt's error when it is
    /// ``MQTTError/isPermanent`` (the broker refused the credentials or the authorization, TLS failed): the client
    /// goes on retrying, and a new wait waits for the next attempts.
    public func waitUntilConnected() async throws(MQTTError) {
        for session in core.sessions { try await session.waitUntilConnected() }
    }

    /// ``waitUntilConnected()``, giving up after `timeout`: then it throws ``MQTTError/Kind/notConnected``, whose
    /// message names why the last attempt failed ("Connection refused", "bad user name or password", …). The client
    /// goes on retrying. `nil`: as long as it takes.
    public func waitUntilConnected(timeout: Duration?) async throws(MQTTError) {
        guard let timeout else { return try await waitUntilConnected() }
        let core = core
        let result = await withTaskGroup(of: Result<Void, MQTTError>?.self) { group in
            group.addTask {
                do throws(MQTTError) {
                    for session in core.sessions { try await session.waitUntilConnected() }
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                // nil: the time is up (or the wait was cancelled, which the other task reports).
                try? await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            while let next = await group.next() {
                if let next { return next }
                if Task.isCancelled { continue }
                let lastFailure = core.sessions.lazy.compactMap { $0.state.withLock { $0.lastFailure } }.first
                return .failure(
                    .notConnected(
                        host: core.configuration.host, port: core.configuration.port, after: timeout,
                        lastFailure: lastFailure))
            }
            return .failure(.cancelledWhileConnecting)
        }
        try result.get()
    }

    /// From now on the client reads nothing its broker sends past a CONNACK: what arrives for its session waits at
    /// the broker (a persistent session keeps it) until ``resumeReading()``. Keep-alives still go out. A cluster's
    /// slot connects its session this way, which cuts an old owner off, then rebuilds, then reads.
    public func holdReading() {
        core.readingHeld.store(true, ordering: .releasing)
    }

    /// Reads again what ``holdReading()`` left at the broker. What another task did before this call (restoring
    /// the handler's state, say) happens before the handler's next call on the network thread.
    public func resumeReading() {
        core.readingHeld.store(false, ordering: .releasing)
        core.wake()
    }

    /// Makes the network thread ask its handler's ``MQTTClientHandler/timeUntilWake()`` again now: for a handler that
    /// another thread gave work. Callable from any thread.
    public func wakeHandler() {
        core.wake()
    }

    /// Whether the connection is up.
    public var isConnected: Bool {
        core.sessions.allSatisfy { $0.state.withLock { $0.isConnected } }
    }

    /// Subscribes now if connected, and after every reconnect. `noLocal`: do not receive this client's own messages.
    ///
    /// Subscribing again to the same filter replaces its QoS and `noLocal`. A refusal by the broker arrives as
    /// ``MQTTEvent/subscriptionRefused(filter:_:)``.
    public func subscribe(_ filter: String, qos: QoS = .atLeastOnce, noLocal: Bool = false) throws(MQTTError) {
        try validateSubscriptionFilter(filter)
        let subscription = Subscription(filter: filter, qos: qos, noLocal: noLocal)
        let (previous, connected) = try core.state.withLock {
            (state: inout ClientState) throws(MQTTError) -> (Subscription?, Bool) in
            guard state.lifecycle != .closed else { throw MQTTError.closed }
            let previous = state.subscriptions.updateValue(subscription, forKey: filter)
            return (previous, state.isConnected)
        }
        guard connected else { return }
        do {
            let mid = try core.withHandle { pointer throws(MQTTError) in
                try core.sendSubscribe(subscription, on: pointer)
            }
            if let mid { core.recordSubscribe(mid: mid, filter: filter) }
            // Queued: the network thread writes it in a turn.
            core.wake()
        } catch {
            core.state.withLock { state in
                if let previous {
                    state.subscriptions[filter] = previous
                } else {
                    state.subscriptions.removeValue(forKey: filter)
                }
            }
            throw error
        }
    }

    /// Unsubscribes now if connected, and no longer subscribes after a reconnect. A filter not subscribed is ignored.
    public func unsubscribe(_ filter: String) throws(MQTTError) {
        let connected = try core.state.withLock { (state: inout ClientState) throws(MQTTError) -> Bool in
            guard state.lifecycle != .closed else { throw MQTTError.closed }
            guard state.subscriptions.removeValue(forKey: filter) != nil else { return false }
            return state.isConnected
        }
        guard connected else { return }
        try core.withHandle { pointer throws(MQTTError) in
            let rc = mosquitto_unsubscribe(pointer, nil, filter)
            // Not connected after all: the next connection does not subscribe it.
            guard rc == MosquittoLibrary.success || rc == MosquittoLibrary.noConnection else {
                throw MQTTError.library(rc)
            }
        }
        core.wake()
    }

    /// Queues a message for sending; libmosquitto sends it, and retries it until the broker acknowledges it.
    ///
    /// A QoS 1 or 2 message waits, in order, while the send window is full or the connection down (at most
    /// ``MQTTConfiguration/maximumPendingMessages``; beyond, it throws ``MQTTError/Kind/queueFull``). A QoS 0 message
    /// cannot wait: it throws `MOSQ_ERR_NO_CONN` while disconnected. A topic with wildcards throws
    /// ``MQTTError/Kind/invalidArgument``.
    public func publish(_ message: MQTTMessage) throws(MQTTError) {
        try validatePublishTopic(message.topic)
        guard message.payload.count <= maximumPayloadSize else {
            throw MQTTError.invalidArgument("payload larger than \(maximumPayloadSize) bytes")
        }
        try core.publisher.submit(message)
    }

    /// QoS > 0 messages waiting beyond the send window, or for the next connection.
    public var pendingMessages: Int {
        core.publisher.state.withLock { $0.pending.count }
    }

    /// QoS > 0 messages handed to the broker whose acknowledgement has not been read yet (at most the send window,
    /// ``MQTTConfiguration/maximumInflightMessages``).
    public var messagesInFlight: Int {
        core.publisher.state.withLock { $0.unacknowledged.count }
    }

    /// Stops reopening the connection, as a shutdown begins: it stays open for what is still to be published and
    /// acknowledged, but one that ends from now on (the broker going away first) ends the client, and that is no
    /// failure (``MQTTEvent/disconnected(_:)`` with `nil`). ``disconnect()`` does this first. Callable from any
    /// thread.
    public func drain() {
        for session in core.sessions { session.drain() }
    }

    /// Waits (up to two seconds) until the broker has acknowledged every QoS > 0 message published so far, then sends
    /// DISCONNECT (the broker does not publish the will) and stops reconnecting.
    ///
    /// Returns when the network loop has let go of the client, or after three more seconds. (Waiting first matters:
    /// libmosquitto 2.0 treats an acknowledgement that arrives after its DISCONNECT was requested as a protocol error
    /// and drops the connection without sending it, so the broker would publish the will.)
    public func disconnect() async {
        drain()
        let publisher = core.publisher
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await publisher.waitUntilAcknowledged() }
            group.addTask { try? await Task.sleep(for: .seconds(2)) }
            await group.next()
            group.cancelAll()
        }
        for session in core.sessions { await session.stop() }
    }

    /// Disconnects if needed and releases libmosquitto's resources, without blocking a thread. Idempotent.
    public func close() async {
        await disconnect()
        for session in core.sessions {
            // Waits for the loop to let go of the session without blocking (a TCP connect in progress can take long),
            // so that closing it returns at once.
            await session.waitForLoopExit()
            session.closeAfterItsLoop()
        }
    }

    /// ``close()`` for code that cannot await: disconnects if needed and releases libmosquitto's resources.
    /// Idempotent.
    ///
    /// Blocks until the network loop has let go of the client: at most a few seconds, or as long as a TCP connect in
    /// progress takes; from async code, use the async ``close()``. Called from a handler (on the loop's thread), it
    /// returns at once and the loop releases libmosquitto when it lets go of the client.
    @available(*, noasync, message: "blocks until the network loop lets go of the client: use the async close()")
    public func syncClose() {
        for session in core.sessions { session.closeAfterItsLoop() }
    }
}

extension ClientCore {
    /// Starts the network thread (and the publishing session's first, with its events relayed to this one).
    func start(_ handler: (any MQTTClientHandler)?) throws(MQTTError) {
        try state.withLock { (state: inout ClientState) throws(MQTTError) in
            switch state.lifecycle {
            case .idle:
                break
            case .running, .draining:
                throw MQTTError.invalidArgument("the client is already started")
            case .stopped:
                throw MQTTError.invalidArgument("the client was disconnected; a client starts only once")
            case .closed:
                throw MQTTError.closed
            }
            state.lifecycle = .running
            state.loopExited = false
            loop.handler = handler
            do throws(MQTTError) {
                if let publishing {
                    publishing.loop.receiving = self
                    try publishing.start(nil)
                }
                // A publishing session has no loop of its own: its receiving session's runs it.
                if loop.receiving == nil { try networkLoop?.add(self) }
            } catch {
                state.lifecycle = .idle
                state.loopExited = true
                throw error
            }
        }
        logger.debug(
            "MQTT client started", metadata: ["mqtt.host": "\(configuration.host)", "mqtt.port": "\(configuration.port)"])
    }

    /// Waits for this session's first successful connection (see ``MQTTClient/waitUntilConnected()``).
    func waitUntilConnected() async throws(MQTTError) {
        let id = state.withLock { $0.connectionWaiters.makeID() }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, MQTTError>, Never>) in
                let immediate: Result<Void, MQTTError>? = state.withLock { state in
                    if state.lifecycle == .closed { return .failure(.closed) }
                    if state.hasConnected { return .success(()) }
                    if state.lifecycle == .stopped { return .failure(.stoppedBeforeConnecting) }
                    if !state.connectionWaiters.add(id, continuation) { return .failure(.cancelledWhileConnecting) }
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            state.withLock { $0.connectionWaiters.cancel(id) }?.resume(returning: .failure(.cancelledWhileConnecting))
        }
        try result.get()
    }

    /// Stops reconnecting, and the network loop lets go of the session once it sent DISCONNECT (the broker does not
    /// publish the will). Returns when it has, or after three seconds.
    func stop() async {
        let (waiters, running) = state.withLock { state in
            switch state.lifecycle {
            case .idle, .running, .draining:
                state.lifecycle = .stopped
            case .stopped, .closed:
                break
            }
            return (state.connectionWaiters.removeAll(), !state.loopExited)
        }
        for waiter in waiters { waiter.resume(returning: .failure(.stoppedBeforeConnecting)) }
        guard running else { return }
        logger.debug("MQTT disconnecting")
        requestStop()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForLoopExit() }
            group.addTask { try? await Task.sleep(for: .seconds(3)) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Closes this session: stops it, waits until its loop has let go of it (unless called on that loop's thread)
    /// and releases libmosquitto.
    func closeAfterItsLoop() {
        typealias Closing = (waiters: [CheckedContinuation<Result<Void, MQTTError>, Never>], byTheLoop: Bool, running: Bool)
        let closing = state.withLock { state -> Closing? in
            guard state.lifecycle != .closed else { return nil }
            state.lifecycle = .closed
            // On the loop's thread (the handler closes its client), or a publishing session whose receiving
            // session's loop still runs it: the loop releases libmosquitto when it lets go of the session.
            if !state.loopExited, loop.isCurrent || loop.receiving != nil { state.releaseWhenLoopExits = true }
            return (state.connectionWaiters.removeAll(), state.releaseWhenLoopExits, !state.loopExited)
        }
        guard let closing else { return }
        for waiter in closing.waiters { waiter.resume(returning: .failure(.stoppedBeforeConnecting)) }
        if closing.running { requestStop() }
        if closing.byTheLoop { return }
        // At most a few seconds (a DISCONNECT's time), or as long as a TCP connect in progress takes.
        while !state.withLock({ $0.loopExited }) { usleep(1_000) }
        release()
        logger.debug("MQTT client closed")
    }

    /// The client drains before it stops: the network thread keeps the connection for the acknowledgements, but does
    /// not reopen one that ends.
    func drain() {
        let draining = state.withLock { state in
            guard state.lifecycle == .running else { return false }
            state.lifecycle = .draining
            return true
        }
        if draining { wake() }
    }

    /// Gives the session a turn: it sees the stop, and its state machine sends DISCONNECT and ends.
    private func requestStop() {
        wake()
    }

    /// Suspends until no QoS > 0 message awaits the broker's acknowledgement, or the connection is down (nothing can
    /// be acknowledged then), or the task is cancelled.
    func waitUntilAcknowledged() async {
        let id = state.withLock { $0.drainWaiters.makeID() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = state.withLock { state in
                    state.unacknowledged.isEmpty || !state.isConnected || !state.drainWaiters.add(id, continuation)
                }
                if done { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.drainWaiters.cancel(id) }?.resume()
        }
    }

    /// Suspends until the network loop has ended (or the task is cancelled).
    func waitForLoopExit() async {
        let id = state.withLock { $0.loopExitWaiters.makeID() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = state.withLock { state in
                    state.loopExited || !state.loopExitWaiters.add(id, continuation)
                }
                if done { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.loopExitWaiters.cancel(id) }?.resume()
        }
    }
}
