import AccessoryControl
import Synchronization
import TestSupport

/// The frames of one ``HeadTrackingHost/SensorUpdates``, collected as they come, and whether it ended.
public final class FrameCollector: Sendable {
    private final class Box: Sendable {
        let frames = Mutex<[HeadTrackingHost.SensorFrame]>([])
        let ended = Atomic<Bool>(false)
    }

    private let box = Box()
    private let task: Task<Void, Never>

    public init(_ updates: HeadTrackingHost.SensorUpdates) {
        let box = box
        task = Task {
            for await frame in updates { box.frames.withLock { $0.append(frame) } }
            box.ended.store(true, ordering: .releasing)
        }
    }

    deinit {
        task.cancel()
    }

    public var all: [HeadTrackingHost.SensorFrame] { box.frames.withLock { $0 } }
    public var hasEnded: Bool { box.ended.load(ordering: .acquiring) }

    public func waitFor(_ count: Int) async throws {
        try await waitUntil("\(count) frames") { self.all.count >= count }
    }
}
