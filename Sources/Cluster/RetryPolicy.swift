/// How the cluster tries again what etcd did not answer (a grant, a registration, a read, a claim, a slot's requests
/// about its devices, a release) and a slot whose bridge ended by itself: after ``first``, then twice as long each
/// time, never longer than ``longest``; what may give up (a release: what it leaves behind ends with the member's
/// lease) gives up after about ``patience``. Declared once, in ``ClusterStateMachine/Policy/retry``; every loop that
/// tries again takes it from there.
public struct RetryPolicy: Hashable, Sendable {
    public var first: Duration
    public var longest: Duration
    public var patience: Duration

    public init(first: Duration = .milliseconds(100), longest: Duration = .seconds(2), patience: Duration = .seconds(8)) {
        self.first = first
        self.longest = longest
        self.patience = patience
    }

    /// The pause after `failures` failures in a row (1: the first).
    public func delay(after failures: Int) -> Duration {
        var delay = first
        for _ in 1..<max(1, failures) {
            delay *= 2
            if delay >= longest { return longest }
        }
        return min(delay, longest)
    }

    /// How many tries what may give up makes: as many as fit in ``patience`` of pauses, at least one.
    public var triesBeforeGivingUp: Int {
        var tries = 1
        var spent = Duration.zero
        while spent + delay(after: tries) <= patience {
            spent += delay(after: tries)
            tries += 1
        }
        return tries
    }
}
