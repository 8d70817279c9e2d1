import CMosquittoInterpose

/// A session's writes to its socket, gathered (CMosquittoInterpose's writer): libmosquitto writes each packet with a
/// write(2) of its own; what one `mosquitto_loop_write` writes leaves in one write(2) at its end instead, or, while
/// the writes are held (a batch of reads, the loop's batch of turns), when the hold ends. What the socket cannot take
/// yet waits in the writer, and the session watches its socket for writing meanwhile (``ClientCore/wantsToWrite``).
///
/// Not for TLS (OpenSSL writes the socket itself): such a session has none, and corks its socket instead
/// (``ClientCore/holdWrites(_:)``).
// @unchecked Sendable: used by the session's network thread alone, in its turns; freed with the session.
final class SocketWriter: @unchecked Sendable {
    private let writer: OpaquePointer
    /// What is written waits until the hold ends (``ClientCore/holdWrites(_:)``).
    var holding = false

    init?() {
        guard let writer = cmosquitto_writer_new() else { return nil }
        self.writer = writer
    }

    deinit {
        cmosquitto_writer_destroy(writer)
    }

    /// `mosquitto_loop_write(pointer, 1)` through the writer: written at its end unless held.
    func loopWrite(_ pointer: OpaquePointer) -> Int32 {
        cmosquitto_writer_loop_write(writer, pointer, holding)
    }

    /// Writes what the writer holds for `pointer`'s socket. A broken connection is shut down, for libmosquitto's next
    /// read to end it.
    func flush(_ pointer: OpaquePointer) {
        cmosquitto_writer_flush(writer, pointer)
    }

    /// Whether bytes for `pointer`'s current socket wait in the writer because the socket could not take them: not
    /// while the writes are held, when they wait by choice (and leave when the hold ends).
    func holdsBytesBack(for pointer: OpaquePointer) -> Bool {
        !holding && cmosquitto_writer_pending(writer, pointer)
    }

    /// A new connection: what an earlier one left is dropped.
    func drop() {
        cmosquitto_writer_drop(writer)
    }
}
