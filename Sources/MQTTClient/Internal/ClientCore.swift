import CMosquitto
import Logging
import Synchronization

/// Everything an ``MQTTClient`` shares with its network thread and libmosquitto's callbacks, for one session (one
/// libmosquitto handle, one connection); it is the `obj` userdata of `mosquitto_new`, retained through `Unmanaged`
/// until ``release()``.
///
/// Where each concern lives: the handle and its options in MosquittoHandle.swift; libmosquitto's callbacks in
/// Callbacks.swift; subscriptions in Subscriptions.swift; the connection's lifecycle in ``ConnectionStateMachine``, its
/// actions run by Connecting.swift; the network thread's loop in NetworkLoop.swift, a session's turn in it in Turn.swift
/// and its socket's reads and writes in SocketReader.swift and SocketWriter.swift; what waits to be published in
/// Outbound.swift; a second, publishing session in PublishingSession.swift.
final class ClientCore: Sendable {
    let configuration: MQTTConfiguration
    let logger: Logger
    /// What only the network thread touches (checked there): the handler, the connection's state machine, the loop.
    let loop: LoopContext
    let handle: MosquittoHandle
    let state = Mutex(ClientState())
    /// `true` while `handle` may be used by API calls; held during each such call, so that ``release()`` waits
    /// for them. Taken before `state` when both are held (a publish: `mosquitto_publish_v5` only queues, and never
    /// calls back). The network loop calls libmosquitto holding neither, so its callbacks may take both.
    let library = Mutex(true)
    /// The loop that runs the session (``NetworkLoop``); a publishing session's is its receiving session's.
    let networkLoop: NetworkLoop?
    /// The session waits for a turn another thread asked for (``wake()``).
    let woken = Atomic(false)
    /// The session that publishes for this one, when there is one (see ``MQTTClient/init(configuration:publishingSession:loops:logger:)``).
    let publishing: ClientCore?
    /// A publishing session's: how many messages `state.pending` holds, read by its receiving session before each
    /// packet without taking the lock.
    let waiting = Atomic(0)
    /// How many messages were handed to libmosquitto since it last wrote (``writeIfWanted(_:gathering:)``): more than one
    /// leave in one segment.
    let publishedSinceWrite = Atomic(0)
    /// While set, the session reads nothing past its CONNACK (``MQTTClient/holdReading()``).
    let readingHeld = Atomic(false)
    /// Its socket's reads, buffered (``SocketReader``); `nil` with TLS.
    let reader: SocketReader?
    /// Its socket's writes, gathered (``SocketWriter``); `nil` with TLS.
    let writer: SocketWriter?

    /// - Parameter networkLoop: the loop that runs it (`nil`: a publishing session).
    init(
        configuration: MQTTConfiguration, publishing: MQTTConfiguration? = nil, networkLoop: NetworkLoop?,
        logger: Logger
    ) throws(MQTTError) {
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "mqtt.client_id"] = "\(configuration.clientID)"
        self.logger = logger
        loop = LoopContext(
            policy: .init(
                reconnectDelay: configuration.reconnectDelay, maximumReconnectDelay: configuration.maximumReconnectDelay))
        self.networkLoop = networkLoop
        reader = configuration.tls == nil ? SocketReader() : nil
        writer = configuration.tls == nil ? SocketWriter() : nil
        let publishingCore = try publishing.map { configuration throws(MQTTError) in
            try ClientCore(configuration: configuration, networkLoop: nil, logger: logger)
        }
        do {
            handle = try MosquittoHandle.make(configuration)
        } catch {
            publishingCore?.release()
            throw error
        }
        self.publishing = publishingCore
        networkLoop?.assign()
        // From here on libmosquitto holds a reference: balanced in release().
        mosquitto_user_data_set(handle.pointer, Unmanaged.passRetained(self).toOpaque())
        installCallbacks()
    }

    /// This session and its publishing session, if any.
    var sessions: [ClientCore] { [self] + (publishing.map { [$0] } ?? []) }

    /// The session that publishes.
    var publisher: ClientCore { publishing ?? self }

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
        // Its loop may still hold it among the sessions to wake (which would keep both).
        networkLoop?.unassign(self)
        loop.handler?.closed()
        // The handler often holds the client: let go of it.
        loop.handler = nil
    }

    /// A connection event, to the handler; a publishing session's go to its receiving session, which tells the
    /// handler of one connection (``sessionEvent(_:from:)``).
    func onEvent(_ event: MQTTEvent) {
        if let receiving = loop.receiving {
            receiving.sessionEvent(event, from: .publishing)
        } else if publishing != nil {
            sessionEvent(event, from: .receiving)
        } else {
            loop.handler?.event(event)
        }
    }

    func loopExited() {
        let (waiters, release) = state.withLock { state in
            state.loopExited = true
            return (state.loopExitWaiters.removeAll(), state.releaseWhenLoopExits)
        }
        logger.debug("MQTT network loop let go of the session")
        if release { self.release() }
        for waiter in waiters { waiter.resume() }
    }
}
