import Foundation
import Synchronization

/// Files and directories a test makes under the temporary directory and a broker or a client reads for as long as
/// it runs: removed when the test process exits (KEEP_BROKER_FILES=1 keeps them, as it keeps the brokers').
public enum TemporaryFiles {
    private static let made = Mutex<[URL]>([])

    private static let removesAtExit: Bool = {
        atexit {
            guard ProcessInfo.processInfo.environment["KEEP_BROKER_FILES"] == nil else { return }
            for url in TemporaryFiles.made.withLock({ $0 }) { try? FileManager.default.removeItem(at: url) }
        }
        return true
    }()

    /// A new path under the temporary directory, `prefix-<UUID>` with `suffix`, removed when the process exits.
    public static func path(_ prefix: String, suffix: String = "") -> URL {
        _ = removesAtExit
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)\(suffix)")
        made.withLock { $0.append(url) }
        return url
    }
}
