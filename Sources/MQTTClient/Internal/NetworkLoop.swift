import Synchronization

/// A network thread that runs the sessions of one or many clients: it waits (``Poller``) for their sockets, its wake
/// pipe and the next of their deadlines, and gives each session whose socket is ready, whose deadline came or that
/// another thread woke a turn (``ClientCore/turn(_:)``: libmosquitto's read, write and housekeeping, and the
/// ``ConnectionStateMachine``'s events). A client made alone has a loop of its own; the clients of an
/// ``MQTTLoopGroup`` (a cluster member's slots) share its few.
///
/// The thread runs while the loop has sessions: it starts with the first and ends after the last has left.
///
/// Not `mosquitto_loop_start`: libmosquitto 2.0.11's threaded loop (`mosquitto_loop_forever`) ends for good on a refused
/// MQTT 5 CONNACK (it maps every reason code above 5 to `MOSQ_ERR_PROTOCOL`, a "fatal" error), on a DNS failure and on
/// TLS errors; here the state machine retries after every failure, with the backoff documented on
/// ``MQTTConfiguration``. And it is a thread per client.
final class NetworkLoop: Sendable {
    private let wakePipe: WakePipe
    /// The loop thread's (or, while no thread runs, nobody's).
    private let poller: PollerBox
    private let shared = Mutex(Shared())

    /// What other threads hand the loop.
    private struct Shared {
        /// Sessions started and not run yet.
        var joining: [ClientCore] = []
        /// Sessions another thread gave work (``ClientCore/wake()``).
        var woken: [ClientCore] = []
        /// Whether the thread runs.
        var running = false
        /// The clients assigned to this loop (from their creation to their release), for ``MQTTLoopGroup``'s choice.
        var assigned = 0
    }

    /// The poller, owned by whichever thread runs the loop (one at a time: a thread starts only after the last ended).
    // @unchecked Sendable: only the loop's thread touches the poller, and threads follow one another under `shared`.
    private final class PollerBox: @unchecked Sendable {
        let poller: Poller
        init(_ poller: Poller) { self.poller = poller }
    }

    private static let pipeToken = UInt64.max

    /// The name of the loop's thread.
    private let name: String

    /// A loop whose thread is named `name` (``NetworkThread/start(named:_:)``).
    init(name: String = "mqtt-loop") throws(MQTTError) {
        self.name = name
        wakePipe = try WakePipe()
        let poller = try Poller()
        poller.watch(.init(descriptor: wakePipe.readEnd, read: true, write: false), token: Self.pipeToken, registered: false)
        self.poller = PollerBox(poller)
    }

    /// How many clients are assigned to the loop.
    var assigned: Int { shared.withLock { $0.assigned } }

    /// A client made on this loop (until ``unassign(_:)``, when it is released).
    func assign() {
        shared.withLock { $0.assigned += 1 }
    }

    /// The client was released: the loop lets go of it.
    func unassign(_ core: ClientCore) {
        shared.withLock { shared in
            shared.assigned -= 1
            shared.woken.removeAll { $0 === core }
        }
    }

    /// Runs `core` (a receiving session, with its publishing session if any) from now on: starts the thread if
    /// none runs.
    func add(_ core: ClientCore) throws(MQTTError) {
        let startThread = shared.withLock { shared in
            shared.joining.append(core)
            defer { shared.running = true }
            return !shared.running
        }
        guard startThread else {
            wakePipe.signal()
            return
        }
        do {
            try NetworkThread.start(named: name) { self.run() }.detach()
        } catch {
            shared.withLock { shared in
                shared.joining.removeAll { $0 === core }
                shared.running = false
            }
            throw error
        }
    }

    /// `core` needs a turn: from another thread, which wakes the loop; or from the loop's own (`signal` false),
    /// which looks at the woken sessions before it waits again.
    func wake(_ core: ClientCore, signal: Bool) {
        shared.withLock { $0.woken.append(core) }
        if signal { wakePipe.signal() }
    }

    /// The sessions a loop's thread runs, in parallel arrays indexed by a place each keeps while it is in the loop:
    /// what its sockets are waited for, what the last wait found on them, when it is next due. The loop scans `due`
    /// before every wait and after it: plain integers, no reference to retain and no generic code (with hundreds of
    /// sessions, copying each session's record cost the loop 12% of the member's CPU, and comparing
    /// `ContinuousClock.Instant?`s, which goes through the standard library's protocol witnesses, 6%).
    private struct Members {
        var cores: [ClientCore?] = []
        /// The receiving session's socket and the publishing session's, as registered.
        var watched: [ClientCore.Sockets<Poller.Interest?>] = []
        var ready: [ClientCore.Sockets<Poller.Readiness>] = []
        /// When each session is next due, in nanoseconds after `epoch` (``nanoseconds(_:)``); `Int64.max` for a free
        /// place.
        var due: [Int64] = []
        var scheduled: [Bool] = []
        /// Where each session is (a woken session may have left already, or joined another thread of this loop).
        var indices: [ObjectIdentifier: Int] = [:]
        var free: [Int] = []
        private let epoch = ContinuousClock.now

        var isEmpty: Bool { indices.isEmpty }

        /// `instant` on the loop's scale of `due`.
        func nanoseconds(_ instant: ContinuousClock.Instant) -> Int64 {
            let (seconds, attoseconds) = (instant - epoch).components
            return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        }

        mutating func add(_ core: ClientCore) -> Int {
            let index = free.popLast() ?? cores.count
            if index == cores.count {
                cores.append(nil)
                watched.append(.init(receiving: nil, publishing: nil))
                ready.append(.init(receiving: [], publishing: []))
                due.append(.max)
                scheduled.append(false)
            }
            cores[index] = core
            due[index] = nanoseconds(.now)
            indices[ObjectIdentifier(core)] = index
            return index
        }

        mutating func remove(_ index: Int) {
            guard let core = cores[index] else { return }
            indices[ObjectIdentifier(core)] = nil
            cores[index] = nil
            watched[index] = .init(receiving: nil, publishing: nil)
            ready[index] = .init(receiving: [], publishing: [])
            due[index] = .max
            free.append(index)
        }
    }

    /// A socket's token: its member's index and its session.
    private static func token(_ index: Int, _ session: ClientCore.Session) -> UInt64 {
        UInt64(index) * 2 + (session == .receiving ? 0 : 1)
    }

    private static func member(of token: UInt64) -> (index: Int, session: ClientCore.Session) {
        (Int(token / 2), token % 2 == 0 ? .receiving : .publishing)
    }

    /// The loop's thread.
    private func run() {
        let poller = self.poller.poller
        var members = Members()
        var scheduled: [Int] = []

        func schedule(_ index: Int) {
            guard members.cores[index] != nil, !members.scheduled[index] else { return }
            members.scheduled[index] = true
            scheduled.append(index)
        }
        /// Registers what the session waits for now, and when it is next due.
        func refresh(_ index: Int, _ core: ClientCore) {
            let wanted = core.interest()
            for session in ClientCore.Session.allCases {
                let old = members.watched[index][session]
                let new = wanted.sockets[session]
                guard old != new else { continue }
                if let old, new?.descriptor != old.descriptor, core.owns(old.descriptor, session) {
                    poller.forget(old.descriptor)
                }
                if let new {
                    poller.watch(
                        new, token: Self.token(index, session),
                        registered: old?.descriptor == new.descriptor && old?.connection == new.connection)
                }
                members.watched[index][session] = new
            }
            members.due[index] = members.nanoseconds(wanted.due)
        }
        func remove(_ index: Int, _ core: ClientCore) {
            for session in ClientCore.Session.allCases {
                if let old = members.watched[index][session], core.owns(old.descriptor, session) {
                    poller.forget(old.descriptor)
                }
            }
            members.remove(index)
            core.leftTheLoop()
        }

        while true {
            let taken = shared.withLock { shared -> (joining: [ClientCore], woken: [ClientCore])? in
                if shared.joining.isEmpty, members.isEmpty {
                    // Whoever is still woken has left, or joins later (and gets a turn then).
                    for core in shared.woken { core.woken.store(false, ordering: .relaxed) }
                    shared.woken.removeAll()
                    shared.running = false
                    return nil
                }
                defer {
                    shared.joining.removeAll()
                    shared.woken.removeAll()
                }
                return (shared.joining, shared.woken)
            }
            guard let taken else { return }
            for core in taken.joining {
                let index = members.add(core)
                core.joinedTheLoop()
                refresh(index, core)
                schedule(index)
            }
            for core in taken.woken {
                core.woken.store(false, ordering: .relaxed)
                if let index = members.indices[ObjectIdentifier(core)] { schedule(index) }
            }

            var wait = Duration.seconds(1)
            if scheduled.isEmpty {
                let next = members.due.min() ?? .max
                wait = min(wait, .nanoseconds(next - members.nanoseconds(.now)))
            } else {
                wait = .zero
            }
            _ = poller.wait(milliseconds: pollMilliseconds(wait)) { token, readiness in
                if token == Self.pipeToken {
                    wakePipe.drain()
                    return
                }
                let (index, session) = Self.member(of: token)
                guard index < members.cores.count, members.cores[index] != nil else { return }
                members.ready[index][session].formUnion(readiness)
                schedule(index)
            }
            let now = members.nanoseconds(.now)
            for index in members.due.indices where members.due[index] <= now { schedule(index) }
            // While more than one session is due, what each writes waits (in its writer, or its corked socket) until
            // all have had their turn: a batch across sessions, as a session's own read loop batches its packets.
            let batch = scheduled.count > 1
            if batch {
                for index in scheduled { members.cores[index]?.holdWritesOfTheTurns(true) }
            }
            for index in scheduled {
                guard let core = members.cores[index] else { continue }
                let ready = members.ready[index]
                members.ready[index] = .init(receiving: [], publishing: [])
                members.scheduled[index] = false
                if core.turn(ready) {
                    if batch { core.holdWritesOfTheTurns(false) }
                    remove(index, core)
                } else {
                    refresh(index, core)
                }
            }
            if batch {
                for index in scheduled {
                    guard let core = members.cores[index] else { continue }
                    core.holdWritesOfTheTurns(false)
                    // What a socket could not take waits in its session's writer: the socket is watched for writing.
                    if core.writesHeldBack { refresh(index, core) }
                }
            }
            scheduled.removeAll(keepingCapacity: true)
        }
    }
}

/// `poll`'s (and epoll's) timeout for a wait: whole milliseconds, rounded up (a wake-up never comes early), from 0 to
/// `Int32.max`.
func pollMilliseconds(_ wait: Duration) -> Int32 {
    let milliseconds = (wait / .milliseconds(1)).rounded(.up)
    return milliseconds >= Double(Int32.max) ? .max : Int32(max(0, milliseconds))
}
