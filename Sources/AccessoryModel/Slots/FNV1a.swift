/// FNV-1a, 64 bits: a stable hash that every bridge, hub and tool computes the same way (Swift's `Hasher` is seeded
/// per process). The C hub SDK has the same function (`audiohub_slot`), checked against the same vectors.
public enum FNV1a {
    public static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    public static let prime: UInt64 = 0x0000_0100_0000_01b3

    public static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash = offsetBasis
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* prime
        }
        return hash
    }

    public static func hash(_ text: String) -> UInt64 {
        hash(text.utf8)
    }
}
