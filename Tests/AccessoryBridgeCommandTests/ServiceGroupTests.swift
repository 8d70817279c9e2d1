@testable import accessory_bridge
import Logging
import ServiceLifecycle
import Synchronization
import Testing

/// How the bridge's services end together: a start-up failure of one shuts the others down gracefully (the HTTP
/// endpoint among them), so that none is cancelled mid-shutdown and logs after the bridge's last line.
@Suite struct ServiceGroupTests {
    struct StartupFailed: Error {}

    /// Fails at once, as the bridge does when the broker refuses its password.
    struct FailingService: Service {
        func run() async throws { throw StartupFailed() }
    }

    /// Waits for the group's end and says how it came: a graceful shutdown, or a cancellation.
    final class EndingService: Service {
        let ending = Mutex<String?>(nil)

        func run() async {
            do {
                try await gracefulShutdown()
                ending.withLock { $0 = "graceful shutdown" }
            } catch {
                ending.withLock { $0 = "cancellation" }
            }
        }
    }

    @Test func aFailingServiceShutsTheOthersDownGracefully() async throws {
        let other = EndingService()
        let group = AccessoryBridgeCommand.serviceGroup(
            [other, FailingService()], logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        await #expect(throws: StartupFailed.self) { try await group.run() }
        #expect(other.ending.withLock { $0 } == "graceful shutdown")
    }
}
