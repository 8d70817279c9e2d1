import Foundation
import Testing
import TestSupport

/// README.md is the front door and the pages under docs/ hold the rest: every relative link between them, and to the
/// repository's files, leads to something that exists (a heading, for an anchor into a page), README.md links every
/// page, and the front door stays short.
@Suite struct ReadmeLinksTests {
    struct Link: CustomTestStringConvertible, Sendable {
        /// The Markdown file the link is in, from the repository's root.
        var file: String
        var line: Int
        /// As written between the parentheses.
        var target: String
        var testDescription: String { "\(target) at \(file):\(line)" }
    }

    /// Every relative link and image of README.md and docs/*.md.
    static let links: [Link] = {
        guard let files = try? RepositoryFiles.markdownFiles() else { return [] }
        return files.flatMap { file in (try? RepositoryFiles.text(file)).map { links(in: $0, file: file) } ?? [] }
    }()

    /// `[text](target)` and `![text](target)` outside code blocks and code spans; not URLs with a scheme.
    static func links(in text: String, file: String) -> [Link] {
        var links: [Link] = []
        for (number, line) in prose(text).enumerated() {
            var rest = line[...]
            while let open = rest.range(of: "](") {
                rest = rest[open.upperBound...]
                guard let close = rest.firstIndex(of: ")") else { break }
                // A title ("…") may follow the target after a space.
                let target = String(rest[..<close].split(separator: " ").first ?? "")
                rest = rest[close...]
                if target.isEmpty || target.contains("://") || target.hasPrefix("mailto:") { continue }
                links.append(Link(file: file, line: number + 1, target: target))
            }
        }
        return links
    }

    /// The file's lines with fenced code blocks blanked (line numbers kept), so that a shell comment is not a heading,
    /// and code spans removed unless `codeSpans`, so that a code sample is not a link.
    static func prose(_ text: String, codeSpans: Bool = false) -> [String] {
        var lines: [String] = []
        var fenced = false
        var inSpan = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                fenced.toggle()
                lines.append("")
                continue
            }
            if fenced || codeSpans {
                lines.append(fenced ? "" : String(line))
                continue
            }
            // A code span may be wrapped over two lines: its state carries over.
            var kept = ""
            for character in line {
                if character == "`" {
                    inSpan.toggle()
                } else if !inSpan {
                    kept.append(character)
                }
            }
            if line.isEmpty { inSpan = false }
            lines.append(kept)
        }
        return lines
    }

    /// The anchors GitHub gives a page's headings: lowercased, letters, digits, `-` and `_` kept (a code span's text
    /// too), each space a `-`, everything else dropped; a repeated anchor gets `-1`, `-2`, … .
    static func anchors(of text: String) -> Set<String> {
        var anchors: Set<String> = []
        var seen: [String: Int] = [:]
        for line in prose(text, codeSpans: true) where line.hasPrefix("#") {
            let heading = line.drop { $0 == "#" }
            guard heading.hasPrefix(" ") else { continue }
            var anchor = ""
            for character in heading.trimmingCharacters(in: .whitespaces).lowercased() {
                if character.isLetter || character.isNumber || character == "-" || character == "_" {
                    anchor.append(character)
                } else if character == " " {
                    anchor.append("-")
                }
            }
            let count = seen[anchor, default: 0]
            seen[anchor] = count + 1
            anchors.insert(count == 0 ? anchor : "\(anchor)-\(count)")
        }
        return anchors
    }

    @Test func theLinksAreFoundInTheReadmeAndInTheDocs() {
        #expect(Self.links.count > 60, "\(Self.links.count) links")
        #expect(Self.links.contains { $0.file == "README.md" })
        #expect(Self.links.contains { $0.file.hasPrefix("docs/") })
    }

    @Test func anAnchorIsAHeading() {
        let anchors = Self.anchors(of: "# The wire contract\n## For hub authors: sequences, `gaps`, rebirth\n```sh\n# make run\n```\n## Topics\n## Topics\n")
        #expect(anchors == ["the-wire-contract", "for-hub-authors-sequences-gaps-rebirth", "topics", "topics-1"])
    }

    @Test(arguments: links)
    func leadsToSomethingThatExists(_ link: Link) throws {
        let page = RepositoryFiles.url(link.file)
        let parts = link.target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(parts[0])
        let anchor = parts.count > 1 ? String(parts[1]) : ""
        let target = path.isEmpty ? page : page.deletingLastPathComponent().appendingPathComponent(path).standardizedFileURL
        let root = RepositoryFiles.root.standardizedFileURL.path
        #expect(target.path.hasPrefix(root + "/"), "outside the repository")
        #expect(FileManager.default.fileExists(atPath: target.path), "no such file: \(target.path)")
        if !anchor.isEmpty {
            try #require(target.pathExtension == "md", "an anchor into a file that is not Markdown")
            let anchors = Self.anchors(of: try String(contentsOf: target, encoding: .utf8))
            #expect(anchors.contains(anchor), "no heading of \(target.lastPathComponent) has the anchor #\(anchor)")
        }
    }

    @Test func theReadmeLinksEveryPage() throws {
        let linked = Set(Self.links.filter { $0.file == "README.md" }.map { $0.target.split(separator: "#").first.map(String.init) ?? "" })
        let pages = try RepositoryFiles.markdownFiles().filter { $0.hasPrefix("docs/") }
        #expect(pages.count >= 10)
        for page in pages {
            #expect(linked.contains(page), "README.md does not link \(page)")
        }
    }

    @Test func theReadmeStaysAFrontDoor() throws {
        let lines = try RepositoryFiles.text("README.md").split(separator: "\n", omittingEmptySubsequences: false)
        // A file that ends with a newline splits into one more, empty, element.
        #expect(lines.count - 1 <= 450, "README.md is \(lines.count - 1) lines: depth goes to docs/")
    }
}
