import Foundation

/// libFuzzer's entry point: one input, one fresh bridge. Built with `-sanitize=fuzzer` (see `make fuzz`), libFuzzer
/// supplies `main`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    PipelineHarness.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

#if !FUZZING
/// Without libFuzzer (a plain `swift build`), the target replays inputs: `pipeline-fuzzer FILE...` runs each file
/// as one fuzz input, e.g. a crash reproducer under a debugger. The fuzzing build defines `FUZZING` and leaves
/// `main` to libFuzzer.
@main
enum Replay {
    static func main() {
        let paths = CommandLine.arguments.dropFirst()
        if paths.isEmpty {
            let usage = "usage: pipeline-fuzzer FILE... (runs each file as one fuzz input)\n"
            FileHandle.standardError.write(Data(usage.utf8))
            exit(2)
        }
        for path in paths {
            guard let contents = FileManager.default.contents(atPath: path) else {
                FileHandle.standardError.write(Data("pipeline-fuzzer: cannot read \(path)\n".utf8))
                exit(1)
            }
            contents.withUnsafeBytes { PipelineHarness.run($0) }
            print("\(path): \(contents.count) bytes, no invariant violated")
        }
    }
}
#endif
