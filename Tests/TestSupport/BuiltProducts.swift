import Foundation

/// The executables built beside the test bundle (`swift build`, which `make test` runs first).
public enum BuiltProducts {
    public static var directory: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    }

    public static func path(_ name: String) throws -> String {
        let url = directory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw MosquittoBrokerError("\(url.path) is not built: run `swift build` (make test does) before the tests")
        }
        return url.path
    }
}
