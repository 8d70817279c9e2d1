import CMosquitto
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A client with a publishing session (``MQTTClient/init(configuration:publishingSession:loops:logger:)``) is two
/// ``ClientCore``s: the receiving one, which the handler belongs to and whose network thread runs both connections
/// (the publishing one's through a ``PublishingLink``), and the publishing one, whose events that thread hands on
/// to the handler. The receiving one reads only while the publishing one's queue has room.
extension ClientCore {
    enum Session: CaseIterable {
        case receiving
        case publishing
    }

    /// One value for each session's socket.
    struct Sockets<Value> {
        var receiving: Value
        var publishing: Value

        subscript(session: Session) -> Value {
            get { session == .receiving ? receiving : publishing }
            set {
                switch session {
                case .receiving: receiving = newValue
                case .publishing: publishing = newValue
                }
            }
        }
    }

    // MARK: Events

    /// On the network thread (libmosquitto calls back only from its loop functions, which that thread alone runs,
    /// for both sessions): the handler hears of one connection, up once both sessions are and down when either goes
    /// (a session that comes back alone makes it up again).
    func sessionEvent(_ event: MQTTEvent, from session: Session) {
        switch event {
        case .connected(let sessionPresent):
            let wasUp = loop.receivingUp && loop.publishingUp
            switch session {
            case .receiving:
                loop.receivingUp = true
                loop.sessionPresent = sessionPresent
            case .publishing:
                loop.publishingUp = true
            }
            if !wasUp, loop.receivingUp, loop.publishingUp {
                loop.handler?.event(.connected(sessionPresent: loop.sessionPresent))
            }
        case .disconnected(let error):
            let wasUp = loop.receivingUp && loop.publishingUp
            switch session {
            case .receiving: loop.receivingUp = false
            case .publishing: loop.publishingUp = false
            }
            if wasUp { loop.handler?.event(.disconnected(error)) }
        case .connectionRefused, .subscriptionRefused, .queueDrained:
            loop.handler?.event(event)
        }
    }

    // MARK: Pushing back

    /// On the network thread, before reading a packet of the receiving session: whether it may. Always without a
    /// publishing session. With one: not while more than half of its queue's bound waits, until a quarter does
    /// (the same thread hands that queue on, so the next turn of the loop sees it shrink); meanwhile one packet
    /// every half keep-alive, so that the broker and libmosquitto keep the connection (both close it after a
    /// keep-alive and a half without a packet).
    func mayRead() -> Bool {
        // Held (MQTTClient.holdReading): the CONNACK is read, nothing after it.
        if readingHeld.load(ordering: .acquiring), loop.machine.phase != .connecting { return false }
        guard let publishing else { return true }
        let limit = publishing.configuration.maximumPendingMessages
        let waiting = publishing.waiting.load(ordering: .relaxed)
        guard let pausedSince = loop.pausedSince else {
            guard waiting > limit / 2 else { return true }
            loop.pausedSince = .now
            logger.debug(
                "MQTT reading paused: the publishing session's queue is past half its bound",
                metadata: ["mqtt.waiting": "\(waiting)"])
            return false
        }
        if waiting <= limit / 4 {
            loop.pausedSince = nil
            logger.debug(
                "MQTT reading resumed",
                metadata: ["mqtt.paused_ms": "\(Int((ContinuousClock.now - pausedSince) / .milliseconds(1)))"])
            return true
        }
        guard ContinuousClock.now - pausedSince >= configuration.keepAlive / 2 else { return false }
        loop.pausedSince = .now
        return true
    }
}

/// The publishing session's connection, run in its receiving session's turns on their loop, by the same
/// ``ConnectionStateMachine`` (its own instance: the same backoff, the same DISCONNECT on a stop): reading
/// acknowledgements, writing what the handler published. Used on that loop's thread only.
final class PublishingLink {
    let core: ClientCore
    /// The receiving session ended: this one stops too.
    private var stopping = false

    init(_ core: ClientCore) {
        self.core = core
    }

    private var pointer: OpaquePointer { core.handle.pointer }

    /// Whether the connection is open or being made (its socket is then the one to watch).
    private var connecting: Bool { core.loop.machine.phase.hasConnection }

    /// The session stopped, and its connection is closed (or its DISCONNECT's time is up).
    var isOver: Bool { stopping && (core.loop.finished || !connecting) }

    /// The first attempt.
    func start() {
        core.perform(core.loop.machine.start())
    }

    /// What the session's socket waits for, while the connection is open or being made, and when its next turn is due
    /// for what the broker sent meanwhile.
    func interest(at now: ContinuousClock.Instant) -> (socket: Poller.Interest?, due: ContinuousClock.Instant?) {
        let socket = mosquitto_socket(pointer)
        guard !isOver, connecting, socket >= 0 else { return (nil, nil) }
        let waiting = acknowledgementsMayWait
        let interest = Poller.Interest(
            descriptor: socket, read: waiting == nil, write: core.wantsToWrite, connection: core.loop.connections)
        // What its reader holds is read at the start of the next turn (``readWhatArrived()``): that turn is due now.
        if core.holdsBytes { return (interest, now) }
        guard let waiting, waiting.inFlight else { return (interest, nil) }
        let delay = core.configuration.acknowledgementDelay
        return (interest, now + (waiting.messagesWait ? delay / Self.delayDivisorWhileMessagesWait : delay))
    }

    /// How much sooner than ``MQTTConfiguration/acknowledgementDelay`` acknowledgements are read while messages wait
    /// for room in the send window: the turn that reads them writes what they made room for.
    static let delayDivisorWhileMessagesWait = 5

    /// Whether what the broker sends this session (acknowledgements, mostly) may wait for the receiving session's next
    /// turn rather than wake the loop (`nil`: it may not), and if so, whether anything is in flight and whether
    /// messages wait for room in the send window. They may whenever the connection is up and running: a report's
    /// acknowledgements then cost no turn of their own, they are read at the start of the next message's turn, and at
    /// the latest ``MQTTConfiguration/acknowledgementDelay`` after the last turn (``delayDivisorWhileMessagesWait``
    /// times sooner while messages wait for room). Connecting, draining and stopping read at once; a socket the broker
    /// closed, or that failed, wakes the loop whatever it waits for. Read at once whenever the window was half full, as they were until 2026-12-01,
    /// a loop that fell behind took a wake-up, a read and a write for each, and fell further behind. (What it is
    /// worth: docs/performance-history.md, "Acknowledgements in the next turn".)
    private var acknowledgementsMayWait: (inFlight: Bool, messagesWait: Bool)? {
        let machine = core.loop.machine
        guard !stopping, machine.isConnected, !machine.draining, !machine.stopRequested else { return nil }
        return core.state.withLock { (!$0.unacknowledged.isEmpty, !$0.pending.isEmpty) }
    }

    /// At the start of the receiving session's turn, before it writes anything: what the broker sent this connection
    /// meanwhile, asked for or not. Read before writing, so that a connection the broker closed after acknowledging
    /// the last messages ends with those acknowledged (they are not sent again on the next connection).
    func readWhatArrived() {
        guard !isOver, core.loop.machine.isConnected, mosquitto_socket(pointer) >= 0 else { return }
        if let rc = core.readWaitingPackets(pointer) { ended(rc) }
    }

    /// In the receiving session's turn: reads what arrived while not connected (connected, ``readWhatArrived()`` read
    /// at the turn's start), writes what waits, keeps the connection alive.
    func service(_ ready: Poller.Readiness) {
        guard !isOver, connecting else { return }
        guard mosquitto_socket(pointer) >= 0 else {
            ended(MosquittoLibrary.noConnection)
            return
        }
        var rc = MosquittoLibrary.success
        if !core.loop.machine.isConnected, !ready.isDisjoint(with: [.readable, .failed]) || core.holdsBytes,
            let failed = core.readWaitingPackets(pointer)
        {
            rc = failed
        }
        if rc == MosquittoLibrary.success, let failed = core.writeIfWanted(pointer) { rc = failed }
        if rc == MosquittoLibrary.success { rc = mosquitto_loop_misc(pointer) }
        if rc == MosquittoLibrary.success {
            core.finishConnecting()
        } else {
            ended(rc)
        }
    }

    /// The time passed: an attempt may be due.
    func tick() {
        guard !isOver else { return }
        core.perform(core.loop.machine.tick(at: .now))
    }

    /// Writes what the handler just published (after each packet the receiving session read), in one segment when
    /// `gathering` (``ClientCore/writeIfWanted(_:gathering:)``).
    func write(gathering: Bool) {
        guard connecting, mosquitto_socket(pointer) >= 0, let rc = core.writeIfWanted(pointer, gathering: gathering)
        else { return }
        ended(rc)
    }

    /// The receiving session ended: a DISCONNECT (the broker does not publish the will), given up to its timeout to
    /// leave (the next turns run it). Once.
    func stop() {
        guard !stopping else { return }
        stopping = true
        core.state.withLock { state in
            if state.lifecycle == .running || state.lifecycle == .draining { state.lifecycle = .stopped }
        }
        core.perform(core.loop.machine.stop(at: .now))
    }

    private func ended(_ rc: Int32) {
        core.loop.connack = nil
        core.perform(core.loop.machine.connectionEnded(MQTTError.disconnected(code: rc), at: .now))
    }
}
