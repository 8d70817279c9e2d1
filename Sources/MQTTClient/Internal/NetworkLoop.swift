import CMosquitto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The network thread's loop: it waits in `poll` for its sockets, its wake pipe and the next deadline (the handler's
/// wake-up, the state machine's next attempt or DISCONNECT timeout), reads and writes with libmosquitto's loop
/// functions, and hands each turn's events to the ``ConnectionStateMachine``.
///
/// Not `mosquitto_loop_start`: libmosquitto 2.0.11's threaded loop (`mosquitto_loop_forever`) ends for good on a refused
/// MQTT 5 CONNACK (it maps every reason code above 5 to `MOSQ_ERR_PROTOCOL`, a "fatal" error), on a DNS failure and on
/// TLS errors; here the state machine retries after every failure, with the backoff documented on
/// ``MQTTConfiguration``.
extension ClientCore {
    /// Runs until the state machine says the loop ends (a stop, then the DISCONNECT out or its time up).
    func runNetworkLoop() {
        loop.state.claim()
        loop.handler?.started()
        if let publishing {
            // This thread runs the publishing session too: what the handler publishes is written by it, after each
            // packet, with no other thread to wake (docs/performance-history.md, "One network thread for both sessions").
            publishing.loop.state.claim()
            loop.link = PublishingLink(publishing)
            loop.link?.start()
        }
        wakeHandlerIfDue()
        perform(loop.machine.start())
        while !loop.finished {
            let lifecycle = state.withLock { $0.lifecycle }
            if lifecycle != .running, lifecycle != .draining, !loop.machine.stopRequested {
                perform(loop.machine.stop(at: .now))
            } else if lifecycle == .draining, !loop.machine.draining {
                perform(loop.machine.drain())
                if let link = loop.link { link.core.perform(link.core.loop.machine.drain()) }
            }
            switch loop.machine.phase {
            case .connecting, .opening, .connected, .disconnecting:
                let rc = serviceOnce(handle.pointer, timeout: loopTimeoutMilliseconds())
                if rc == MosquittoLibrary.success {
                    finishConnecting()
                } else {
                    // A connection that ended without libmosquitto's disconnect callback still counts as ended.
                    loop.connack = nil
                    perform(loop.machine.connectionEnded(MQTTError.disconnected(code: rc), at: .now))
                }
            case .backingOff:
                // The publishing session goes on meanwhile.
                _ = serviceOnce(nil, timeout: loopTimeoutMilliseconds())
            case .idle, .closed:
                loop.finished = true
            }
            wakeHandlerIfDue()
            perform(loop.machine.tick(at: .now))
        }
        if let link = loop.link {
            link.shutDown()
            link.core.loopExited()
        }
        loopExited()
    }

    /// How long `poll` may wait: a second at most, less when the handler's wake-up or the state machine's next
    /// deadline is sooner.
    private func loopTimeoutMilliseconds() -> Int32 {
        var wait: Duration = .seconds(1)
        if let handlerWait = loop.handler?.timeUntilWake() { wait = min(wait, handlerWait) }
        if let deadline = loop.machine.nextDeadline { wait = min(wait, deadline - .now) }
        return pollMilliseconds(wait)
    }
}

/// `poll`'s timeout for a wait: whole milliseconds, rounded up (a wake-up never comes early), from 0 to `Int32.max`.
func pollMilliseconds(_ wait: Duration) -> Int32 {
    let milliseconds = (wait / .milliseconds(1)).rounded(.up)
    return milliseconds >= Double(Int32.max) ? .max : Int32(max(0, milliseconds))
}

extension ClientCore {

    /// Calls the handler's `wake()` when its wake-up time came.
    private func wakeHandlerIfDue() {
        guard let handler = loop.handler, let wait = handler.timeUntilWake(), wait <= .zero else { return }
        handler.wake()
    }

    /// The most packets read per wake-up of `poll`.
    static let packetsPerWakeup = 64

    /// One turn of the loop, as `mosquitto_loop` does it but with `poll`, waking on this client's own pipe (other
    /// threads' publishes and stop requests). libmosquitto's `mosquitto_loop_read`, `_write` and `_misc` do the work,
    /// as its documentation describes for an external loop. Without `pointer` (no connection: waiting to reconnect),
    /// only the pipe and the publishing session.
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
        let timeout = min(timeout, link?.millisecondsUntilDeadline() ?? timeout)
        if poll(&descriptors, nfds_t(descriptors.count), timeout) < 0 {
            let code = cmosquitto_errno()
            return code == EINTR ? MosquittoLibrary.success : MosquittoLibrary.errno
        }
        if descriptors[pipe].revents != 0 { wakePipe.drain() }
        defer {
            if let link, let linked {
                link.service(descriptors, at: linked)
                link.tick()
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
    /// packet looked like the last. A read that handles nothing (no data, part of a packet, a PINGRESP) ends the batch; `poll`
    /// tells whether more waits. At most ``packetsPerWakeup``, so that the wake pipe and deadlines get their turn.
    ///
    /// What the handler published for a packet is written before the next is read, as when each had a wake-up of its
    /// own (writing later, after many packets, raised the tail). Once a second read
    /// has handed over a packet, the sockets are corked (``holdWrites(_:on:)``) until the batch ends: the kernel then
    /// sends what the batch wrote in full segments, one transmission instead of one per packet. A batch of one, the
    /// usual case at a steady pace, is not corked. (What each of these is worth: docs/performance-history.md, "The
    /// read loop".)
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
}
