import Foundation

/// Files of this repository that tests read (schemas, generated code, README.md and docs/).
public enum RepositoryFiles {
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    public static func url(_ path: String) -> URL { root.appendingPathComponent(path) }

    public static func text(_ path: String) throws -> String { try String(contentsOf: url(path), encoding: .utf8) }

    /// README.md, then the pages under docs/ (`docs/…md`), sorted: the documentation people read and copy from.
    public static func markdownFiles() throws -> [String] {
        let pages = try FileManager.default.contentsOfDirectory(atPath: url("docs").path)
            .filter { $0.hasSuffix(".md") }
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        return ["README.md"] + pages.map { "docs/\($0)" }
    }

    /// The .proto files under Schemas/, relative to Schemas/, sorted as `LC_ALL=C sort` sorts them.
    public static func protoFiles() throws -> [String] {
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

    /// The code blocks of `page` (`info`: ` ```swift `, ` ```c `) that do not stand line for line in `file` (leading
    /// spaces aside: the file holds them indented in its functions), and how many blocks the page has: a guide's code
    /// compiled in a file of the tests' (docs/swift.md in SwiftGuideTests, docs/hub-sdk.md's C in
    /// Tests/CAudioHubGuide/guide.c).
    public static func blocks(
        of page: String, info: String, missingFrom file: URL
    ) throws -> (count: Int, missing: [(line: Int, text: String)]) {
        func normalized(_ line: Substring) -> Substring { line.drop { $0 == " " } }
        let blocks = codeBlocks(in: try text(page), info: info).filter(\.info.isEmpty)
        let source = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            .map(normalized)
        let missing = blocks.filter { block in
            let lines = block.lines.map(normalized)
            return !source.indices.contains { start in
                start + lines.count <= source.count && Array(source[start..<start + lines.count]) == lines
            }
        }
        return (blocks.count, missing.map { ($0.line, $0.lines.joined(separator: "\n")) })
    }

    /// The fenced code blocks of Markdown `text` whose info string starts with `info` (` ```json `, ` ```swift `): each
    /// with the rest of its info string, the number of its first line, and its lines.
    public static func codeBlocks(in text: String, info: String) -> [(info: String, line: Int, lines: [Substring])] {
        let opening = "```" + info
        var blocks: [(info: String, line: Int, lines: [Substring])] = []
        var current: (info: String, line: Int, lines: [Substring])?
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if var open = current {
                if line.hasPrefix("```") {
                    blocks.append(open)
                    current = nil
                } else {
                    open.lines.append(line)
                    current = open
                }
            } else if line.hasPrefix(opening) {
                let rest = line.dropFirst(opening.count)
                current = (String(rest.drop { $0 == " " }), number + 1, [])
            }
        }
        return blocks
    }
}
