import CMosquitto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a receiving session does on its ``NetworkLoop``'s thread: join, take turns (read, write, keep alive, hand the
/// events to the ``ConnectionStateMachine``), say what its sockets wait for and when it is next due, and leave. Its
/// publishing session, if any, takes its turns with it (``PublishingLink``).
extension ClientCore {
    /// The session joined its loop: the handler starts, and so does the first attempt to connect.
    func joinedTheLoop() {
        loop.state.claim()
        loop.handler?.started()
        if let publishing {
            // The same thread runs the publishing session: what the handler publishes is written by it, after each
            // packet, with no other thread to wake (docs/performance-history.md, "One network thread for both sessions").
            publishing.loop.state.claim()
            loop.link = PublishingLink(publishing)
            loop.link?.start()
        }
        wakeHandlerIfDue()
        perform(loop.machine.start())
    }

    /// The loop let go of the session (its state machine ended, and its publishing session's).
    func leftTheLoop() {
        if let link = loop.link { link.core.loopExited() }
        loopExited()
    }

    /// Gives the session a turn soon: for another thread that gave it work (a message to write, a stop, a wake-up of
    /// its handler). A publishing session's turn is its receiving session's.
    func wake() {
        // On the loop's thread, in the session's turn (the handler publishing): the turn looks at everything again
        // before it ends. The hot path: nothing else is read.
        let current = loop.isCurrent
        if current, loop.turning { return }
        if let receiving = loop.receiving { return receiving.wake() }
        if current {
            if !woken.exchange(true, ordering: .relaxed) { networkLoop?.wake(self, signal: false) }
        } else if !woken.exchange(true, ordering: .relaxed) {
            networkLoop?.wake(self, signal: true)
        }
    }

    /// One turn, after the loop's wait: `ready` is what it found on each session's socket. Returns whether the
    /// session is over (both state machines ended).
    func turn(_ ready: Sockets<Poller.Readiness>) -> Bool {
        setTurning(true)
        defer { setTurning(false) }
        loop.link?.readWhatArrived()
        if !loop.finished {
            takeLifecycleRequests()
            switch loop.machine.phase {
            case .idle, .closed:
                loop.finished = true
            case .backingOff:
                // The publishing session goes on meanwhile.
                break
            case .connecting, .opening, .connected, .disconnecting:
                let rc = service(handle.pointer, ready.receiving)
                if rc == MosquittoLibrary.success {
                    finishConnecting()
                } else {
                    // A connection that ended without libmosquitto's disconnect callback still counts as ended.
                    loop.connack = nil
                    perform(loop.machine.connectionEnded(MQTTError.disconnected(code: rc), at: .now))
                }
            }
        }
        if let link = loop.link {
            // The receiving session ended: the publishing one sends its DISCONNECT (the broker does not publish the
            // will), and has until its timeout.
            if loop.finished { link.stop() }
            link.service(ready.publishing)
            link.tick()
        }
        if !loop.finished {
            // A stop or drain the handler asked for in this turn (closing its client): its ``wake()`` gave no turn.
            takeLifecycleRequests()
            wakeHandlerIfDue()
            perform(loop.machine.tick(at: .now))
        }
        return loop.finished && loop.link?.isOver != false
    }

    /// Hands a stop or drain asked for (``MQTTClient/disconnect()``, ``MQTTClient/close()``) to the state machines.
    private func takeLifecycleRequests() {
        let (stopping, draining) = state.withLock { ($0.stopRequested, $0.lifecycle == .draining) }
        if stopping, !loop.machine.stopRequested {
            perform(loop.machine.stop(at: .now))
        } else if draining, !loop.machine.draining {
            perform(loop.machine.drain())
            if let link = loop.link { link.core.perform(link.core.loop.machine.drain()) }
        }
    }

    /// In a turn, for both sessions (a publishing session's ``wake()`` reads its own flag).
    private func setTurning(_ turning: Bool) {
        loop.turning = turning
        loop.link?.core.loop.turning = turning
    }

    /// What the session's sockets wait for now (the receiving one's, the publishing one's) and when its next turn is
    /// due: the handler's wake-up, a state machine's deadline, a paused session's next read, or
    /// ``MQTTConfiguration/idleTurn``.
    func interest() -> (sockets: Sockets<Poller.Interest?>, due: ContinuousClock.Instant) {
        let now = ContinuousClock.now
        var idle = configuration.idleTurn
        if let link = loop.link { idle = min(idle, link.core.configuration.idleTurn) }
        var due = now + idle
        var receiving: Poller.Interest?
        loop.readsHeldBytes = false
        if !loop.finished {
            if let wait = loop.handler?.timeUntilWake() { due = min(due, now + wait) }
            if let deadline = loop.machine.nextDeadline { due = min(due, deadline) }
            let socket = mosquitto_socket(handle.pointer)
            if loop.machine.phase.hasConnection, socket >= 0 {
                let reads = mayRead()
                // What waits to be written (``writesWait()``) waits for no socket, but for its time.
                let wantsWrite = wantsToWrite
                if !wantsWrite || !writesMayWait { loop.writesWaitSince = nil }
                if let since = loop.writesWaitSince { due = min(due, since + configuration.acknowledgementDelay) }
                receiving = .init(
                    descriptor: socket, read: reads, write: wantsWrite && loop.writesWaitSince == nil,
                    connection: loop.connections)
                // Paused, it reads a packet every half keep-alive (``mayRead()``).
                if let pausedSince = loop.pausedSince { due = min(due, pausedSince + configuration.keepAlive / 2) }
                // What its reader holds waits for no socket; it is read only when it may be (``mayRead()`` decides
                // once here, as it does for the socket).
                loop.readsHeldBytes = reads && holdsBytes
                if loop.readsHeldBytes { due = now }
            }
        }
        var publishing: Poller.Interest?
        if let link = loop.link {
            let (socket, acknowledgementsDue) = link.interest(at: now)
            publishing = socket
            if let deadline = link.core.loop.machine.nextDeadline { due = min(due, deadline) }
            if let acknowledgementsDue { due = min(due, acknowledgementsDue) }
        }
        return (Sockets(receiving: receiving, publishing: publishing), due)
    }

    /// Whether the session's reader holds bytes of its socket that libmosquitto has not read: a batch that ended on a
    /// packet no callback saw (a PINGRESP), at its most packets or paused, left them there rather than in the socket,
    /// and no wait of the loop would say they are there.
    var holdsBytes: Bool { reader?.holdsBytes(of: handle.pointer) ?? false }

    /// Whether `descriptor` is still the socket of `session` (this one, or its publishing session): a closed socket's
    /// number may be another session's by now.
    func owns(_ descriptor: Int32, _ session: Session) -> Bool {
        let core = session == .receiving ? self : publishing
        guard let core else { return false }
        return mosquitto_socket(core.handle.pointer) == descriptor
    }

    /// Calls the handler's `wake()` when its wake-up time came.
    private func wakeHandlerIfDue() {
        guard let handler = loop.handler, let wait = handler.timeUntilWake(), wait <= .zero else { return }
        handler.wake()
    }

    /// The most packets read per turn.
    static let packetsPerWakeup = 64

    /// The receiving session's part of a turn, as `mosquitto_loop` does it but after the loop's wait:
    /// libmosquitto's `mosquitto_loop_read`, `_write` and `_misc` do the work, as its documentation describes for an
    /// external loop.
    ///
    /// A session alone never stops reading to push back on a handler that publishes faster than the broker
    /// acknowledges: the acknowledgements arrive on the same socket, and the bound is
    /// ``MQTTConfiguration/maximumPendingMessages``. With a publishing session, ``mayRead()`` decides.
    private func service(_ pointer: OpaquePointer, _ ready: Poller.Readiness) -> Int32 {
        guard mosquitto_socket(pointer) >= 0 else { return MosquittoLibrary.noConnection }
        // A closed or failed socket is reported (and read, to learn why) even while reading waits.
        let readsHeldBytes = loop.readsHeldBytes
        loop.readsHeldBytes = false
        if !ready.isDisjoint(with: [.readable, .failed]) || readsHeldBytes,
            let rc = readWaitingPackets(pointer, while: mayRead, link: loop.link)
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
    /// publish): read on while each call hands a packet to a callback, rather than a wait per packet. Not until
    /// `errno` says EAGAIN: `errno` after libmosquitto's call is not its socket's (it was its wake-up socket pair's,
    /// which every queued packet wrote a byte to and nobody read, so every QoS 1 packet looked like the last; the
    /// handles here have no pair now, ``MosquittoHandle/make(_:)``). A read that handles nothing (no data, part of a
    /// packet, a PINGRESP) ends the batch unless the session's ``SocketReader`` still holds bytes; the next wait tells
    /// whether more waits (and ``interest()`` makes the session due at once for what the reader holds). At most
    /// ``packetsPerWakeup``, so that the other sessions, the wake pipe and deadlines get their turn. Each read goes
    /// through the reader: one read(2) for what has arrived, where libmosquitto alone makes three or four a packet.
    ///
    /// What the handler published for a packet is written before the next is read, as when each had a wake-up of its
    /// own (writing later, after many packets, raised the tail). Once a second read has handed over a packet, both
    /// sessions' writes are held (``holdWrites(_:)``) until the batch ends: what the batch wrote then leaves in one
    /// write(2) a socket (for TLS, corked: in full segments), one transmission instead of one per packet. A batch of
    /// one, the usual case at a steady pace, is not held, but what its packet made the handler publish leaves in one
    /// segment (``writeIfWanted(_:gathering:)``), and so does a batch's first packet's: it leaves at once, before the
    /// next is read. Held with the rest of its batch, it waited for the batch's end
    /// while the broker, on the other core, had nothing to do, and a burst's tail grew. (What each of these is
    /// worth: docs/performance-history.md, "The read loop".)
    func readWaitingPackets(
        _ pointer: OpaquePointer, while mayGoOn: () -> Bool = { true }, link: PublishingLink? = nil
    ) -> Int32? {
        func hold(_ on: Bool) {
            holdWrites(on)
            link?.core.holdWrites(on)
        }
        // Held already, for the loop's batch of turns.
        var holding = loop.writesHeld
        let mine = !holding
        defer { if holding, mine { hold(false) } }
        for index in 0..<Self.packetsPerWakeup {
            if index > 0, !mayGoOn() { break }
            let handled = loop.packetsHandled
            let rc = reader?.loopRead(pointer) ?? mosquitto_loop_read(pointer, 1)
            guard rc == MosquittoLibrary.success, mosquitto_socket(pointer) >= 0 else {
                return rc == MosquittoLibrary.success ? MosquittoLibrary.noConnection : rc
            }
            let drained = loop.packetsHandled == handled
            if index > 0, !drained, !holding {
                holding = true
                hold(true)
            }
            // Outside a held batch (a packet alone, or a batch's first): what the packet made the handler publish
            // leaves at once, in one segment. What follows a batch's first packet is held with the batch.
            let gathering = !holding
            if let rc = writeIfWanted(pointer, gathering: gathering) { return rc }
            link?.write(gathering: gathering)
            if drained, !holdsBytes { break }
        }
        return nil
    }

    /// Holds (or releases) both sessions' writes for the loop (``holdWrites(_:)``): while several sessions take their
    /// turns one after the other, what each writes leaves when all are done. A turn's own read loop then leaves them as
    /// they are.
    func holdWritesOfTheTurns(_ hold: Bool) {
        loop.writesHeld = hold
        holdWrites(hold)
        if let link = loop.link {
            link.core.loop.writesHeld = hold
            link.core.holdWrites(hold)
        }
    }

    /// Whether either session's writer holds what its socket could not take yet (after the loop's batch released it):
    /// the socket is then to be watched for writing.
    var writesHeldBack: Bool {
        if let writer, writer.holdsBytesBack(for: handle.pointer) { return true }
        guard let publishing, let writer = publishing.writer else { return false }
        return writer.holdsBytesBack(for: publishing.handle.pointer)
    }

    /// The most acknowledgements a receiving session lets wait (``writesWait()``): half the
    /// window mosquitto keeps towards a client by default (its `max_inflight_messages`, 20), so that a broker
    /// configured so never waits for an acknowledgement that waits.
    static let acknowledgementsPerWrite = 10

    /// Whether what a receiving session with a publishing session has to write waits: that is the acknowledgements
    /// of what it received (it publishes through the other session), and now and then a ping or a subscription. It
    /// waits while the connection is up and running (not stopping or draining), for at most
    /// ``MQTTConfiguration/acknowledgementDelay`` and while fewer than ``acknowledgementsPerWrite`` are owed, its
    /// socket watched for nothing but reading: at a steady pace a report's acknowledgement then leaves with the next
    /// ones rather than in a TCP segment of its own. The message was handled before it is acknowledged, and its
    /// publications are written first: a connection lost meanwhile gets it again, a duplicate to the handler
    /// (docs/performance-history.md, "Acknowledgements in the next turn").
    func writesWait() -> Bool {
        guard writesMayWait, loop.acknowledgementsOwed < Self.acknowledgementsPerWrite else { return false }
        let now = ContinuousClock.now
        guard let since = loop.writesWaitSince else {
            loop.writesWaitSince = now
            return true
        }
        return now - since < configuration.acknowledgementDelay
    }

    /// Whether what the session has to write may wait at all (``writesWait()``): a receiving session with a publishing
    /// session, connected, and neither stopping nor draining. Otherwise its socket is watched for writing at once
    /// (``interest()``).
    var writesMayWait: Bool {
        loop.link != nil && loop.machine.isConnected && !loop.machine.draining && !loop.machine.stopRequested
    }

    /// Holds (or releases) what the session writes. With a ``SocketWriter``, what is written while held waits in it,
    /// and leaves in one write(2) when released. Without one (TLS), TCP_CORK on its socket: what is written waits in
    /// the kernel for a full segment, and leaves when uncorked (ignored by a socket that is not TCP).
    func holdWrites(_ hold: Bool) {
        if let writer {
            writer.holding = hold
            if !hold { writer.flush(handle.pointer) }
            return
        }
        let socket = mosquitto_socket(handle.pointer)
        guard socket >= 0 else { return }
        cmosquitto_cork(socket, hold)
    }

    /// Whether the session has something to write: what libmosquitto has queued, or what its writer holds because the
    /// socket could not take it yet.
    var wantsToWrite: Bool {
        mosquitto_want_write(handle.pointer) || writer?.holdsBytesBack(for: handle.pointer) == true
    }

    /// Writes what libmosquitto has queued and what the writer holds, if anything; returns the code that ends the
    /// connection, or `nil`.
    ///
    /// libmosquitto writes each packet with a write(2) of its own, and with TCP_NODELAY each leaves in a segment of
    /// its own. Through the session's ``SocketWriter`` they leave in one write(2), and one segment: a report's
    /// command, state, view, event and result, or the acknowledgements that waited (``writesWait()``); while the
    /// writes are held (the read loop's batch, the loop's batch of turns), when the hold ends. Without a writer
    /// (TLS), `gathering`, when more than one message was published since the last write or more than one message's
    /// acknowledgement waits, and the socket is not corked for the loop's batch already (the read loop passes `false`
    /// while its own batch holds it), corks the socket while they are written; one message or one acknowledgement is
    /// written as it is, where two `setsockopt` calls would buy nothing. The read loop gathers a packet outside a held
    /// batch (alone, or a batch's first), never one inside it (docs/performance-history.md, "The read loop").
    func writeIfWanted(_ pointer: OpaquePointer, gathering: Bool = true) -> Int32? {
        let held = writer?.holdsBytesBack(for: pointer) == true
        guard held || mosquitto_want_write(pointer) else { return nil }
        if !held, writesWait() { return nil }
        let published = publishedSinceWrite.exchange(0, ordering: .relaxed)
        let acknowledgements = loop.acknowledgementsOwed
        loop.acknowledgementsOwed = 0
        loop.writesWaitSince = nil
        let rc: Int32
        if let writer {
            rc = writer.loopWrite(pointer)
        } else {
            let gather = gathering && (published > 1 || acknowledgements > 1) && !loop.writesHeld
            if gather { holdWrites(true) }
            rc = mosquitto_loop_write(pointer, 1)
            if gather { holdWrites(false) }
        }
        guard rc == MosquittoLibrary.success, mosquitto_socket(pointer) >= 0 else {
            return rc == MosquittoLibrary.success ? MosquittoLibrary.noConnection : rc
        }
        return nil
    }
}
