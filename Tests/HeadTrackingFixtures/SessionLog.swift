import AccessoryControl
import Foundation
import Synchronization
import TestSupport

/// What a hub's head-tracking handlers hear, in order, and the sessions they are given.
public final class SessionLog: Sendable {
    public enum Call: Hashable, Sendable {
        case activate(UUID, active: Bool)
        case stateChanged(Bool)
        case invalidate(UUID)
    }

    private let state = Mutex<(calls: [Call], sessions: [AudioAccessoryHeadTracking.Session])>(([], []))

    public init() {}

    public var calls: [Call] { state.withLock { $0.calls } }

    /// One session's handler.
    public final class Handler: AudioAccessoryHeadTracking.Handler {
        public let log: SessionLog
        private let session = Mutex<UUID?>(nil)

        public init(log: SessionLog) {
            self.log = log
        }

        public func activate(for session: AudioAccessoryHeadTracking.Session) {
            self.session.withLock { $0 = session.sessionID }
            log.state.withLock { state in
                state.calls.append(.activate(session.sessionID, active: session.isHeadTrackingActive))
                state.sessions.append(session)
            }
        }

        public func headTrackingStateDidChange(isActive: Bool) {
            log.state.withLock { $0.calls.append(.stateChanged(isActive)) }
        }

        public func invalidate() {
            let id = session.withLock { $0 } ?? UUID()
            log.state.withLock { $0.calls.append(.invalidate(id)) }
        }
    }

    /// Waits until the calls so far satisfy `condition`.
    public func waitFor(_ what: String, _ condition: @escaping ([Call]) -> Bool) async throws {
        try await waitUntil(what) { condition(self.calls) }
    }

    /// Waits for the `count`th session activated, and returns it.
    public func waitForActivation(_ count: Int = 1) async throws -> AudioAccessoryHeadTracking.Session {
        try await waitUntil("activation \(count)") { self.state.withLock { $0.sessions.count >= count } }
        return state.withLock { $0.sessions[count - 1] }
    }
}
