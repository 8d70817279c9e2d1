@testable import MQTTClient
import Testing

/// The connection's lifecycle without a broker: chains of events and the time, and the actions that come out.
@Suite struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine
    let t0 = ContinuousClock.now
    let refusedTCP = MQTTError(kind: .system, code: 111, message: "Connection refused")
    let lost = MQTTError(kind: .disconnected, code: 7, message: "lost")

    func machine(delay: Duration = .seconds(1), maximum: Duration = .seconds(8)) -> Machine {
        Machine(policy: .init(reconnectDelay: delay, maximumReconnectDelay: maximum))
    }

    @Test func aConnectionOpensOnceLibmosquittoHandledTheConnack() {
        var m = machine()
        #expect(m.start() == [.connect(first: true)])
        #expect(m.phase == .connecting)
        #expect(m.connackReceived(reason: 0, sessionPresent: true) == [.resubscribe])
        #expect(!m.isConnected, "not before libmosquitto queued again what was in flight")
        #expect(m.connackHandled(at: t0) == [.open(sessionPresent: true)])
        #expect(m.isConnected)
        #expect(m.connackHandled(at: t0) == [], "once")
    }

    @Test func failedAttemptsBackOffDoublingUpToTheMaximumAndTheFirstAttemptAloneIsFirst() {
        var m = machine(delay: .seconds(1), maximum: .seconds(4))
        _ = m.start()
        var now = t0
        var waits: [Duration] = []
        for _ in 0..<5 {
            let actions = m.attemptFailed(refusedTCP, at: now)
            guard case .attemptFailed(let error, let retryAt)? = actions.first else {
                Issue.record("\(actions)")
                return
            }
            #expect(error == refusedTCP)
            waits.append(retryAt - now)
            #expect(m.tick(at: retryAt - .milliseconds(1)) == [], "not before its time")
            now = retryAt
            #expect(m.tick(at: now) == [.connect(first: false)])
        }
        #expect(waits == [.seconds(1), .seconds(2), .seconds(4), .seconds(4), .seconds(4)])
    }

    @Test func aConnectionThatOpenedStartsTheBackoffOver() {
        var m = machine(delay: .seconds(1), maximum: .seconds(30))
        _ = m.start()
        _ = m.attemptFailed(refusedTCP, at: t0)
        _ = m.tick(at: t0 + .seconds(1))
        _ = m.attemptFailed(refusedTCP, at: t0 + .seconds(1))  // next wait: 2 s; then 4 s
        _ = m.tick(at: t0 + .seconds(3))
        _ = m.connackReceived(reason: 0, sessionPresent: false)
        _ = m.connackHandled(at: t0 + .seconds(3))
        let actions = m.connectionEnded(lost, at: t0 + .seconds(10))
        #expect(actions == [.closedConnection(lost), .retry(at: t0 + .seconds(11))])
    }

    @Test func aConnectionThatEndsWhileTheClientDrainsIsNotReopenedNorAFailure() {
        var m = machine()
        _ = m.start()
        _ = m.connackReceived(reason: 0, sessionPresent: false)
        _ = m.connackHandled(at: t0)
        #expect(m.drain() == [], "the connection stays for the acknowledgements")
        #expect(m.isConnected)
        // The broker goes away first (stopped beside the bridge): the loop ends, and nobody hears of a failure.
        #expect(m.connectionEnded(lost, at: t0 + .seconds(1)) == [.closedConnection(nil), .finish])
        // Draining while waiting to reconnect ends the wait.
        var waiting = machine()
        _ = waiting.start()
        _ = waiting.attemptFailed(refusedTCP, at: t0)
        #expect(waiting.drain() == [.finish])
    }

    @Test func aRefusedConnackIsReportedAndTheClosedConnectionRetriedWithoutADisconnectEvent() {
        var m = machine()
        _ = m.start()
        let refusal = m.connackReceived(reason: 0x86, sessionPresent: false)
        #expect(refusal.count == 1)
        guard case .refused(let error)? = refusal.first else { return }
        #expect(error.kind == .connectionRefused && error.code == 0x86 && error.isPermanent)
        // The broker closes the connection: it never opened, so nobody hears of it ending.
        #expect(m.connectionEnded(lost, at: t0) == [.retry(at: t0 + .seconds(1))])
    }

    @Test func aStopClosesAnOpenConnectionWithADisconnectAndEndsOnceItLeft() {
        var m = machine()
        _ = m.start()
        _ = m.connackReceived(reason: 0, sessionPresent: false)
        _ = m.connackHandled(at: t0)
        #expect(m.stop(at: t0) == [.sendDisconnect])
        #expect(m.stop(at: t0) == [], "once")
        #expect(m.nextDeadline == t0 + .seconds(2))
        // libmosquitto closes the socket once the DISCONNECT is out: the handler hears of it, with no error.
        #expect(m.connectionEnded(MQTTError.disconnected(code: 0), at: t0 + .milliseconds(5))
            == [.closedConnection(nil), .finish])
        #expect(m.phase == .closed)
    }

    @Test func aDisconnectThatCannotLeaveIsDroppedAtItsDeadline() {
        var m = machine()
        _ = m.start()
        _ = m.connackReceived(reason: 0, sessionPresent: false)
        _ = m.connackHandled(at: t0)
        _ = m.stop(at: t0)
        #expect(m.tick(at: t0 + .seconds(1)) == [])
        #expect(m.tick(at: t0 + .seconds(2)) == [.closedConnection(nil), .dropConnection, .finish])
    }

    @Test func aStopWhileWaitingToReconnectEndsAtOnce() {
        var m = machine()
        _ = m.start()
        _ = m.attemptFailed(refusedTCP, at: t0)
        #expect(m.stop(at: t0 + .milliseconds(10)) == [.finish])
        #expect(m.tick(at: t0 + .seconds(5)) == [], "no attempt after the stop")
    }

    @Test func aStopWhileConnectingSendsADisconnectAndTheAttemptEndsWithoutAnEvent() {
        var m = machine()
        _ = m.start()
        #expect(m.stop(at: t0) == [.sendDisconnect])
        #expect(m.connectionEnded(lost, at: t0) == [.finish])
        // An attempt that fails after the stop ends it too.
        var other = machine()
        _ = other.start()
        _ = other.stop(at: t0)
        #expect(other.attemptFailed(refusedTCP, at: t0) == [])
    }

    @Test func aLostConnectionIsReportedWithItsReasonAndRetried() {
        var m = machine()
        _ = m.start()
        _ = m.connackReceived(reason: 0, sessionPresent: false)
        _ = m.connackHandled(at: t0)
        #expect(m.connectionEnded(lost, at: t0) == [.closedConnection(lost), .retry(at: t0 + .seconds(1))])
        // A second report of the same end (the callback, then the loop's failed read) changes nothing.
        #expect(m.connectionEnded(lost, at: t0) == [])
        #expect(m.tick(at: t0 + .seconds(1)) == [.connect(first: false)])
    }

    @Test func aStopBeforeStartEndsWithoutConnecting() {
        var m = machine()
        #expect(m.stop(at: t0) == [])
        #expect(m.start() == [.finish])
        #expect(m.phase == .closed)
    }
}
