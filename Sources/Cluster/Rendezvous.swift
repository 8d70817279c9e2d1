import AccessoryModel

/// Rendezvous (highest random weight) hashing: slot `s` belongs to the member `m` with the largest weight,
/// `fmix64(FNV-1a-64("{m}/{s}"))`. Every member computes the same owner from the same set of members, and a member that
/// joins or leaves moves only the slots whose highest weight it has or had: about `S/N` of them.
///
/// The finalizer matters: FNV-1a alone mixes its last bytes poorly into its high bits, so names that differ early
/// (`a/3`, `b/3`) compare the same way for every slot, and one member won all 64 slots of three.
public enum Rendezvous {
    /// The weight of `member` for `slot`.
    public static func weight(_ member: String, _ slot: Int) -> UInt64 {
        mix(FNV1a.hash("\(member)/\(slot)"))
    }

    /// MurmurHash3's 64-bit finalizer: every input bit affects every output bit.
    static func mix(_ value: UInt64) -> UInt64 {
        var x = value
        x ^= x >> 33
        x &*= 0xff51_afd7_ed55_8ccd
        x ^= x >> 33
        x &*= 0xc4ce_b9fe_1a85_ec53
        x ^= x >> 33
        return x
    }

    /// The owner of `slot` among `members` (ties, which FNV-1a makes rare, go to the smaller name); `nil` without
    /// members.
    public static func owner(of slot: Int, among members: some Sequence<String>) -> String? {
        var best: (member: String, weight: UInt64)?
        for member in members {
            let weight = weight(member, slot)
            if let current = best, current.weight > weight || (current.weight == weight && current.member < member) {
                continue
            }
            best = (member, weight)
        }
        return best?.member
    }

    /// The slots of `member` among `members`.
    public static func slots(of member: String, among members: Set<String>, count: Int) -> Set<Int> {
        Set((0..<count).filter { owner(of: $0, among: members) == member })
    }
}
