import Foundation
import Testing
import TestSupport

/// The README's "How the code is laid out" is where a newcomer finds the architecture: every path it names exists,
/// and every module, test support target and script is named there.
@Suite struct ReadmeLayoutTests {
    /// The paths the layout names: each line's names (before two spaces), under the folders of the lines it is
    /// indented under; lines indented like a description continue the one before.
    static func layoutPaths() throws -> [String] {
        let readme = try RepositoryFiles.text("README.md")
        let section = try #require(readme.range(of: "## How the code is laid out"))
        let rest = readme[section.upperBound...]
        let open = try #require(rest.range(of: "```\n"))
        let close = try #require(rest[open.upperBound...].range(of: "\n```"))
        var stack: [(indent: Int, path: String)] = []
        var paths: [String] = []
        for line in rest[open.upperBound..<close.lowerBound].split(separator: "\n") {
            let indent = line.prefix { $0 == " " }.count
            // A description's continuation lines start in its column (29).
            guard indent < 20 else { continue }
            let text = line.dropFirst(indent)
            let names = text.components(separatedBy: "  ").first ?? ""
            while let last = stack.last, last.indent >= indent { stack.removeLast() }
            for name in names.components(separatedBy: ", ") where name.hasSuffix("/") {
                let path = (stack.last.map { $0.path } ?? "") + name
                paths.append(path)
                if name == names.components(separatedBy: ", ").last { stack.append((indent, path)) }
            }
        }
        return paths
    }

    @Test func everyPathTheLayoutNamesExists() throws {
        let paths = try Self.layoutPaths()
        #expect(paths.count > 30, "\(paths)")
        for path in paths {
            var isDirectory: ObjCBool = false
            #expect(
                FileManager.default.fileExists(atPath: RepositoryFiles.url(path).path, isDirectory: &isDirectory)
                    && isDirectory.boolValue, "README's layout names \(path), which is not a folder")
        }
    }

    @Test(arguments: ["Sources", "Tests", "Benchmarks", "Examples", "Fuzz", "deploy"])
    func everyFolderIsNamedInTheLayout(_ parent: String) throws {
        let named = Set(try Self.layoutPaths())
        let folders = try FileManager.default.contentsOfDirectory(atPath: RepositoryFiles.url(parent).path)
            .filter { name in
                var isDirectory: ObjCBool = false
                return FileManager.default.fileExists(
                    atPath: RepositoryFiles.url("\(parent)/\(name)").path, isDirectory: &isDirectory) && isDirectory.boolValue
            }
        #expect(!folders.isEmpty)
        for folder in folders {
            let path = "\(parent)/\(folder)/"
            // Named itself, or through a path under it (Schemas/audioaccessory/v1/ names Schemas/…).
            #expect(named.contains(path) || named.contains { $0.hasPrefix(path) }, "README's layout omits \(path)")
        }
    }

    @Test func everyScriptIsNamedInTheLayout() throws {
        let readme = try RepositoryFiles.text("README.md")
        let section = try #require(readme.components(separatedBy: "## How the code is laid out").last)
        let layout = section.components(separatedBy: "```")[1]
        let scripts = try FileManager.default.contentsOfDirectory(atPath: RepositoryFiles.url("scripts").path)
            .filter { $0.hasSuffix(".sh") }
        #expect(scripts.count > 10)
        for script in scripts {
            #expect(layout.contains(script), "README's layout does not name scripts/\(script)")
        }
    }
}
