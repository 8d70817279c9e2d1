/// Where a broker listens, as people write it: `mqtt://host:port` (plain TCP, 1883 by default) or `mqtts://host:port`
/// (TLS, 8883 by default). A bare `host` or `host:port` means `mqtt://`.
public struct BrokerURL: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var usesTLS: Bool

    public init(host: String, port: Int, usesTLS: Bool = false) {
        self.host = host
        self.port = port
        self.usesTLS = usesTLS
    }

    /// Reads `mqtt://host:port`, `mqtts://host:port`, `host:port` or `host`; IPv6 hosts go in brackets.
    public init(parsing text: String) throws(MQTTError) {
        func invalid(_ reason: String) -> MQTTError {
            MQTTError.invalidArgument("broker '\(text)': \(reason)")
        }
        var rest = Substring(text)
        usesTLS = false
        if let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") {
            switch rest[..<colon].lowercased() {
            case "mqtt", "tcp": usesTLS = false
            case "mqtts", "ssl", "tls": usesTLS = true
            case let scheme: throw invalid("unknown scheme '\(scheme)'; use mqtt:// or mqtts://")
            }
            rest = rest[colon...].dropFirst(3)
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("@") else {
            throw invalid("give only a host and a port (credentials and paths go in their own settings)")
        }
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("an IPv6 address needs a closing ']'") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("expected ':port' after ']'") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            host = String(rest)
        }
        guard !host.isEmpty else { throw invalid("the host is missing") }
        if let portText {
            guard let port = Int(portText), (1...65535).contains(port) else {
                throw invalid("the port must be a number from 1 to 65535")
            }
            self.port = port
        } else {
            port = usesTLS ? 8883 : 1883
        }
    }

    public var description: String {
        "\(usesTLS ? "mqtts" : "mqtt")://\(host.contains(":") ? "[\(host)]" : host):\(port)"
    }
}
