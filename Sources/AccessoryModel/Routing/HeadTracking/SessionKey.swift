/// The secret that makes head-tracking session ids unguessable: a session's id is SipHash-2-4, a keyed
/// pseudo-random function, of the accessory and the order of its activation, under this 128-bit key (two outputs
/// with different domain bytes, for 128 bits). Without the key, one id says nothing of another. The engine stays
/// pure: the shell draws the key from the system's random generator and passes it in.
public struct SessionKey: Hashable, Sendable {
    let k0: UInt64
    let k1: UInt64

    public init(_ k0: UInt64, _ k1: UInt64) {
        self.k0 = k0
        self.k1 = k1
    }

    /// A key from `generator` (the shell's: `SystemRandomNumberGenerator`).
    public init(using generator: inout some RandomNumberGenerator) {
        self.init(generator.next(), generator.next())
    }

    /// The id of the session that `accessory` activates at `order`.
    func id(for accessory: AccessoryID, at order: CommandOrder) -> HeadTrackingSessionID {
        var message = Array(accessory.rawValue.utf8)
        for value in [order.epoch, order.sequence] {
            message += (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
        }
        return HeadTrackingSessionID(high: sipHash(message + [0]), low: sipHash(message + [1]))
    }

    /// SipHash-2-4 (Aumasson and Bernstein) of `message` under (k0, k1).
    func sipHash(_ message: [UInt8]) -> UInt64 {
        var v0: UInt64 = 0x736f_6d65_7073_6575 ^ k0
        var v1: UInt64 = 0x646f_7261_6e64_6f6d ^ k1
        var v2: UInt64 = 0x6c79_6765_6e65_7261 ^ k0
        var v3: UInt64 = 0x7465_6462_7974_6573 ^ k1
        func round() {
            v0 &+= v1; v1 = v1.rotatedLeft(13); v1 ^= v0; v0 = v0.rotatedLeft(32)
            v2 &+= v3; v3 = v3.rotatedLeft(16); v3 ^= v2
            v0 &+= v3; v3 = v3.rotatedLeft(21); v3 ^= v0
            v2 &+= v1; v1 = v1.rotatedLeft(17); v1 ^= v2; v2 = v2.rotatedLeft(32)
        }
        func word(_ bytes: ArraySlice<UInt8>) -> UInt64 {
            bytes.enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * $1.offset) }
        }
        var index = 0
        while index + 8 <= message.count {
            let m = word(message[index..<index + 8])
            v3 ^= m
            round(); round()
            v0 ^= m
            index += 8
        }
        let last = word(message[index...]) | UInt64(truncatingIfNeeded: message.count) << 56
        v3 ^= last
        round(); round()
        v0 ^= last
        v2 ^= 0xff
        round(); round(); round(); round()
        return v0 ^ v1 ^ v2 ^ v3
    }
}

extension UInt64 {
    fileprivate func rotatedLeft(_ count: UInt64) -> UInt64 {
        self << count | self >> (64 - count)
    }
}
