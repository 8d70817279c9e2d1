import Foundation
import Testing
import TestSupport

/// docs/hub-sdk.md's C, compiled: every ```c block of the page stands, line for line, in Tests/CAudioHubGuide/guide.c,
/// which `make hub-check` (scripts/hub-install-check.sh) builds against the installed SDK with every name linked.
@Suite struct HubSDKGuideTests {
    static let page = "docs/hub-sdk.md"

    @Test func everyCBlockOfTheGuideIsInTheFileThatIsCompiled() throws {
        let guide = RepositoryFiles.url("Tests/CAudioHubGuide/guide.c")
        let blocks = try RepositoryFiles.blocks(of: Self.page, info: "c", missingFrom: guide)
        #expect(blocks.count >= 3, "\(Self.page) has its C blocks")
        for block in blocks.missing {
            Issue.record("the block at line \(block.line) of \(Self.page) is not in guide.c:\n\(block.text)")
        }
    }
}
