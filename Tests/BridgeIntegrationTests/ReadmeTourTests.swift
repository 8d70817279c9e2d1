import AccessoryBridge
import Foundation
import MQTTClient
import Testing
import TestSupport

/// The README's mosquitto_pub tour, run as written against a real broker and bridge: every command it shows is
/// executed by the real mosquitto_pub, and every line it says you will see must arrive.
@Suite struct ReadmeTourTests {
    enum Step {
        /// The arguments of one `mosquitto_pub` command.
        case publish([String])
        /// A line the reader will see: a topic and the `"key":"value"` pairs shown for it.
        case expect(topic: String, pairs: [String])
    }

    /// The steps between `<!-- tour: mosquitto -->` and `<!-- /tour -->`.
    static func steps() throws -> [Step] {
        let readme = try RepositoryFiles.text("README.md")
        guard let start = readme.range(of: "<!-- tour: mosquitto -->"), let end = readme.range(of: "<!-- /tour -->")
        else { throw Failure(description: "README.md has no mosquitto tour markers") }
        var steps: [Step] = []
        var variables: [String: String] = [:]
        var block: String?
        for line in readme[start.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                block = block == nil ? String(line.dropFirst(3)) : nil
                continue
            }
            switch block {
            case "sh":
                if let equals = line.firstIndex(of: "="), !line.contains(" "), !line.hasPrefix("mosquitto") {
                    variables[String(line[..<equals])] = String(line[line.index(after: equals)...])
                } else if line.hasPrefix("mosquitto_pub ") {
                    var words = try shellWords(String(line.dropFirst("mosquitto_pub ".count)))
                    words = words.map { word in word.hasPrefix("$") ? variables[String(word.dropFirst())] ?? word : word }
                    steps.append(.publish(words))
                }
            case "text":
                guard let space = line.firstIndex(of: " ") else { continue }
                let pairs = line[space...].matches(of: /"[A-Za-z]+":"[^"…]*"/).map { String($0.output) }
                steps.append(.expect(topic: String(line[..<space]), pairs: pairs))
            default:
                break
            }
        }
        return steps
    }

    /// Splits a shell command line: words, and single-quoted strings.
    static func shellWords(_ line: String) throws -> [String] {
        var words: [String] = []
        var current = ""
        var quoted = false
        var inWord = false
        for character in line {
            if character == "'" {
                quoted.toggle()
                inWord = true
            } else if character == " " && !quoted {
                if inWord { words.append(current) }
                current = ""
                inWord = false
            } else {
                current.append(character)
                inWord = true
            }
        }
        guard !quoted else { throw Failure(description: "unbalanced quote in: \(line)") }
        if inWord { words.append(current) }
        return words
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    @Test func theTourShowsWhatTheBridgeDoes() async throws {
        let steps = try Self.steps()
        #expect(steps.filter { if case .publish = $0 { true } else { false } }.count >= 9)
        #expect(steps.filter { if case .expect = $0 { true } else { false } }.count >= 5)

        let broker = try await MosquittoBroker()
        let bridge = try await BridgeIntegrationTests.startBridge(on: broker) { $0.payloadFormat = .json }
        let observer = try await Peer("reader", broker: broker, subscribe: ["audio/#"])
        var consumed: [String: Int] = [:]  // per topic, how many messages earlier expectations used
        for step in steps {
            switch step {
            case .publish(let words):
                var topic = "", message = "", qos = 0, retain = false
                var properties: [String] = []
                var index = 0
                while index < words.count {
                    switch words[index] {
                    case "-t": topic = words[index + 1]; index += 2
                    case "-m": message = words[index + 1]; index += 2
                    case "-q": qos = Int(words[index + 1]) ?? 0; index += 2
                    case "-r": retain = true; index += 1
                    case "-V": index += 2  // the fixture always speaks MQTT 5
                    default: properties.append(words[index]); index += 1
                    }
                }
                try await broker.publish(topic: topic, message: message, qos: qos, retain: retain, properties: properties)
            case .expect(let topic, let pairs):
                // The next message on `topic` that shows every pair the README shows.
                // What must come costs nothing to wait for: a bound generous for a machine running every suite.
                let deadline = ContinuousClock.now + .seconds(30)
                var found = false
                while true {
                    let messages = observer.messages(on: topic)
                    for (offset, message) in messages.enumerated().dropFirst(consumed[topic, default: 0]) {
                        let text = String(decoding: message.payload, as: UTF8.self)
                        if pairs.allSatisfy(text.contains) {
                            consumed[topic] = offset + 1
                            found = true
                            break
                        }
                    }
                    // Looked at once more after the deadline: a task that could not run for a while (a loaded
                    // machine) must not miss what arrived meanwhile.
                    guard !found, ContinuousClock.now < deadline else { break }
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(found, "README promises on \(topic): \(pairs); got \(observer.messages(on: topic).map { String(decoding: $0.payload, as: UTF8.self) })")
            }
        }
        await observer.close()
        try await bridge.stop()
    }
}
