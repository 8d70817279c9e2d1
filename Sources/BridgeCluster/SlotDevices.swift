import AccessoryModel
import Cluster
import Logging
import Metrics

/// Runs a served slot's requests about its playing devices against etcd (docs/scale-out.md, "Shared devices"): one
/// at a time, in the order the slot made them, each as its ``SlotDeviceRequests`` machine says — the calls it is told
/// to make, in the member's ``LeaseSession``, and the pauses after the calls etcd did not answer. What each request
/// came to goes to the member's ``SharedDeviceDirectory`` (through `report`), which tells the slot, in etcd's order.
/// It decides nothing.
final class SlotDevices: Sendable {
    let slot: Int
    private let store: any CoordinationStore
    private let session: LeaseSession
    private let logger: Logger
    private let requests: AsyncStream<SharedDeviceRequest>.Continuation
    /// Runs the requests; ends with the devices the slot still holds.
    private let worker: Task<[BluetoothAddress: UInt64], Never>

    init(
        slot: Int, store: any CoordinationStore, keys: ClusterKeys, session: LeaseSession, retry: RetryPolicy,
        logger: Logger, metrics: ClusterMetrics, report: @escaping @Sendable (Int, SlotDeviceRequests.Answer) -> Void
    ) {
        self.slot = slot
        self.store = store
        self.session = session
        var logger = logger
        logger[metadataKey: "slot"] = "\(slot)"
        self.logger = logger
        let (stream, requests) = AsyncStream<SharedDeviceRequest>.makeStream()
        self.requests = requests
        let runner = Runner(store: store, session: session, logger: logger, metrics: metrics)
        worker = Task {
            var machine = SlotDeviceRequests(slot: slot, keys: keys, retry: retry)
            for await request in stream {
                let answer = await runner.run(request, with: &machine)
                // Stopped in the middle of a request (``finish(keys:)``), or the lease is no longer the member's: what
                // is left is not run (the slot stops too).
                if Task.isCancelled || !session.isOurs { break }
                guard let answer else { continue }
                switch answer {
                case .claimed(let device, let holder, let epoch) where holder.slot == slot:
                    logger.info(
                        "holds a shared device",
                        metadata: ["source.id": "\(device)", "accessory.id": "\(holder.accessory)", "epoch": "\(epoch)"])
                case .refused(let device, let holder, let epoch):
                    logger.info(
                        "another slot holds a shared device: this slot's claim is refused",
                        metadata: ["source.id": "\(device)", "holder": "\(holder)", "epoch": "\(epoch)"])
                case .withdrawn(let device):
                    logger.info(
                        "stood back from a shared device: another slot's accessory was put on later",
                        metadata: ["source.id": "\(device)"])
                case .claimed, .listed:
                    break
                }
                report(slot, answer)
            }
            return machine.held
        }
    }

    /// Hands a request over (from the slot's thread: it does not wait).
    func send(_ request: SharedDeviceRequest) {
        requests.yield(request)
    }

    /// Ends the requests: those handed over run for up to a second more (etcd may be gone: the slot stops because
    /// its lease may expire), then every device the slot holds is let go, so that other slots need not wait for the
    /// member's lease to end. Returns once done.
    func finish(keys: ClusterKeys) async {
        requests.finish()
        let worker = self.worker
        let deadline = Task {
            try? await Task.sleep(for: .seconds(1))
            worker.cancel()
        }
        let held = await worker.value
        deadline.cancel()
        // The lease is no longer the member's (it left, or was fenced): its holder keys go with it.
        guard session.isOurs else { return }
        for (device, epoch) in held.sorted(by: { $0.key < $1.key }) {
            let transaction = CoordinationTransaction(
                conditions: [.init(key: keys.holder(device), modRevision: epoch)], deletes: [keys.holder(device)])
            do {
                _ = try await store.commit(transaction, in: session)
            } catch {
                logger.warning(
                    "could not let go of a shared device: it goes with this member's lease",
                    metadata: ["source.id": "\(device)", "error": "\(error)"])
            }
        }
    }

    /// Makes the calls a request's machine asks for.
    private struct Runner: Sendable {
        let store: any CoordinationStore
        let session: LeaseSession
        let logger: Logger
        let metrics: ClusterMetrics

        /// Runs `request` to its end; `nil` when it needs no answer, or the slot stopped (or the session closed) before
        /// it ended.
        func run(_ request: SharedDeviceRequest, with machine: inout SlotDeviceRequests) async
            -> SlotDeviceRequests.Answer?
        {
            var step = machine.start(request)
            while true {
                switch step {
                case .call(let call):
                    step = await make(call, for: &machine)
                case .retry(let call, let pause):
                    guard session.isOurs, (try? await Task.sleep(for: pause)) != nil else { return nil }
                    step = await make(call, for: &machine)
                case .done(let answer):
                    return answer
                }
            }
        }

        private func make(_ call: SlotDeviceRequests.Call, for machine: inout SlotDeviceRequests) async
            -> SlotDeviceRequests.Step
        {
            let label = machine.callLabel
            let started = ContinuousClock.now
            do {
                let reply: SlotDeviceRequests.Reply
                switch call {
                case .get(let key): reply = .entry(try await store.get(key, in: session))
                case .read(let prefix): reply = .snapshot(try await store.read(prefix: prefix, in: session))
                case .commit(let transaction): reply = .committed(try await store.commit(transaction, in: session))
                }
                metrics.etcdRoundTrip[label]?.record(duration: ContinuousClock.now - started)
                return machine.replied(reply)
            } catch {
                metrics.etcdFailures[label]?.increment()
                logger.warning("an etcd call about a shared device failed", metadata: ["call": "\(label)", "error": "\(error)"])
                return machine.failed()
            }
        }
    }
}
