import CMosquittoInterpose

/// A session's reads of its socket, buffered (CMosquittoInterpose's reader): libmosquitto's three or four read(2)s a
/// packet are served from one read of what has arrived. What it holds is the socket's as far as the loop is concerned:
/// a session whose reader holds bytes reads again without waiting for its socket (``ClientCore/holdsBytes``).
///
/// Not for TLS (OpenSSL also reads outside the reader's calls): such a session has none, and reads as libmosquitto does.
// @unchecked Sendable: used by the session's network thread alone, in its turns; freed with the session.
final class SocketReader: @unchecked Sendable {
    private let reader: OpaquePointer

    init?() {
        guard let reader = cmosquitto_reader_new() else { return nil }
        self.reader = reader
    }

    deinit {
        cmosquitto_reader_destroy(reader)
    }

    /// `mosquitto_loop_read(pointer, 1)` through the reader.
    func loopRead(_ pointer: OpaquePointer) -> Int32 {
        cmosquitto_reader_loop_read(reader, pointer)
    }

    /// Whether bytes of `pointer`'s current socket wait in the reader.
    func holdsBytes(of pointer: OpaquePointer) -> Bool {
        cmosquitto_reader_pending(reader, pointer)
    }

    /// A new connection: what an earlier one left is dropped.
    func drop() {
        cmosquitto_reader_drop(reader)
    }
}
