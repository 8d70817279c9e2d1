import Foundation

#if canImport(Glibc)
import Glibc
#endif

// This process's TCP connections to a test broker, seen from the kernel (Linux): what waits in them, what they sent.

/// The lines of `/proc/self/net/tcp` for this process's TCP connections to the loopback `port`, split into fields:
/// `rem_address` (field 2) is `0100007F:<port in hex>`, `tx_queue:rx_queue` (field 4) in hex, `inode` field 9.
private func connections(toPort port: Int) -> [[Substring]] {
    // Read to the end: a /proc file says it is empty, and a reader that trusts its size gets the first page only.
    guard let handle = FileHandle(forReadingAtPath: "/proc/self/net/tcp") else { return [] }
    defer { try? handle.close() }
    guard let data = try? handle.readToEnd() else { return [] }
    let table = String(decoding: data, as: UTF8.self)
    let remote = String(format: "0100007F:%04X", port)
    // The namespace's whole table (every test's brokers and clients: thousands of lines under `make test-stress`):
    // only the lines that name the port are split.
    return table.split(separator: "\n").dropFirst().filter { $0.contains(remote) }.map { $0.split(separator: " ") }
        .filter { $0.count > 9 && $0[2] == remote }
}

/// The bytes waiting in the receive queue of each of this process's TCP connections to the loopback `port`.
func socketReceiveQueues(toPort port: Int) -> [Int] {
    connections(toPort: port).compactMap { fields in fields[4].split(separator: ":").last.flatMap { Int($0, radix: 16) } }
}

/// The bytes waiting to be sent (and acknowledged) in each of this process's TCP connections to the loopback `port`.
func socketSendQueues(toPort port: Int) -> [Int] {
    connections(toPort: port).compactMap { fields in
        fields[4].split(separator: ":").first.flatMap { Int($0, radix: 16) }
    }
}

/// How many segments carrying data this process's TCP connections to the loopback `port` have sent, summed: the
/// kernel's `tcpi_data_segs_out` (TCP_INFO; `struct tcp_info` of linux/tcp.h, which glibc's netinet/tcp.h lacks the
/// field of: read at its offset, 156). Throws when the process has no such connection or the kernel is too old.
func dataSegmentsSent(toPort port: Int) throws -> Int {
    // The table is the network namespace's: other processes' connections are in it, and closed ones (inode 0).
    let inodes = Set(connections(toPort: port).filter { $0[9] != "0" }.map { "socket:[\($0[9])]" })
    var total = 0
    var found = 0
    for name in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
        guard let descriptor = Int32(name),
            let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)"),
            inodes.contains(target)
        else { continue }
        var info = [UInt8](repeating: 0, count: 232)
        var length = socklen_t(info.count)
        guard getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0, length >= 160 else {
            throw SocketInfoError(description: "TCP_INFO of descriptor \(descriptor): errno \(errno), \(length) bytes")
        }
        total += info[156..<160].withUnsafeBytes { Int($0.loadUnaligned(as: UInt32.self)) }
        found += 1
    }
    guard found > 0 else { throw SocketInfoError(description: "no connection of this process to port \(port)") }
    return total
}

struct SocketInfoError: Error, CustomStringConvertible {
    let description: String
}
