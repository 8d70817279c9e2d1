import Foundation

/// Files of this repository that tests read (schemas, generated code, README.md and docs/).
enum RepositoryFiles {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func url(_ path: String) -> URL { root.appendingPathComponent(path) }

    static func text(_ path: String) throws -> String { try String(contentsOf: url(path), encoding: .utf8) }

    /// README.md, then the pages under docs/ (`docs/…md`), sorted: the documentation people read and copy from.
    static func markdownFiles() throws -> [String] {
        let pages = try FileManager.default.contentsOfDirectory(atPath: url("docs").path)
            .filter { $0.hasSuffix(".md") }
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        return ["README.md"] + pages.map { "docs/\($0)" }
    }

    /// The .proto files under Schemas/, relative to Schemas/, sorted as `LC_ALL=C sort` sorts them.
    static func protoFiles() throws -> [String] {
        let schemas = url("Schemas")
        let enumerator = FileManager.default.enumerator(at: schemas, includingPropertiesForKeys: nil)
        var files: [String] = []
        while let file = enumerator?.nextObject() as? URL {
            if file.pathExtension == "proto" {
                files.append(String(file.standardizedFileURL.path.dropFirst(schemas.standardizedFileURL.path.count + 1)))
            }
        }
        return files.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}
