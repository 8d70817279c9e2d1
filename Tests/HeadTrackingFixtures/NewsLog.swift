import AccessoryControl
import Synchronization
import TestSupport

/// A host's session news, collected as they come.
public final class NewsLog: Sendable {
    private final class Box: Sendable {
        let news = Mutex<[HeadTrackingHost.SessionNews]>([])
    }

    private let box = Box()
    private let task: Task<Void, Never>

    public init(_ host: HeadTrackingHost) {
        let box = box
        let stream = host.sessionNews()
        task = Task {
            for await item in stream { box.news.withLock { $0.append(item) } }
        }
    }

    deinit {
        task.cancel()
    }

    public var all: [HeadTrackingHost.SessionNews] { box.news.withLock { $0 } }

    /// Waits until `count` pieces of news came, and returns them.
    public func waitFor(_ count: Int) async throws -> [HeadTrackingHost.SessionNews] {
        try await waitUntil("\(count) pieces of news") { self.all.count >= count }
        return all
    }
}
