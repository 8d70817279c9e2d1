/// Where ``RoutingEngine`` keeps its accessories and sources: storage, no decisions.
///
/// Accessories and sources live in dense arrays, found through one index lookup per event; everything else refers to
/// them by row. An entry that is no longer needed is removed by moving the last one into its row. The table keeps
/// who lists whom (a source's candidate accessories), who is routed where, and the counts the statistics read,
/// in step with each change; which entries should exist, and which routes, is the engine's to say.
///
/// The entries' fields are the engine's to change but three, each changed through the table so that what is kept in
/// step stays so: a source's activity (``setActivity(_:of:)``), its route (``setRoute(of:to:)``), and which
/// accessories list it (``updateListings(of:from:to:)``).
struct RoutingTable: Sendable {
    private var accessoryIndex = SlotIndex()
    var accessories: [AccessoryEntry] = []
    private var sourceIndex = SlotIndex()
    var sources: [SourceEntry] = []
    /// The kept sources by activity, and how many are routed: kept as ``setActivity(_:of:)`` and
    /// ``setRoute(of:to:)`` change them, so that the statistics read them without a walk over every source (a
    /// million at a fleet's scale, on the network thread).
    private(set) var activityCounts = CaseCounts<Activity>()
    /// How many sources are routed to an accessory.
    private(set) var routeCount = 0
    /// Per source listed by more than two accessories, the rows of the third and later ones (see ``RowList``).
    private var moreListings = SparseTable<BluetoothAddress, [Int32]>()

    // MARK: - Finding

    /// The row of accessory `id`, when the table keeps it.
    func kept(_ id: AccessoryID) -> Int? {
        accessoryIndex.slot(of: id, in: accessories)
    }

    /// The row of `address`, when the table keeps it.
    func kept(_ address: BluetoothAddress) -> Int? {
        sourceIndex.slot(of: address, in: sources)
    }

    /// The rows of the accessories that list `source` (its candidate accessories).
    func listings(of source: Int) -> [Int] {
        let inline = Array(sources[source].listedBy)
        guard let more = moreListings[sources[source].address] else { return inline }
        return inline + more.map(Int.init)
    }

    // MARK: - Adding and removing

    /// The row of `address`, created on first sight with its count of commands at `commandSequence`.
    mutating func sourceRow(_ address: BluetoothAddress, commandSequence: UInt64) -> Int {
        if let row = kept(address) { return row }
        let row = sources.count
        let entry = SourceEntry(address: address, commandSequence: commandSequence)
        sources.append(entry)
        activityCounts.add(entry.activity)
        sourceIndex.insert(row, of: sources)
        return row
    }

    /// Keeps a new accessory; returns its row. Its sources are listed by ``updateListings(of:from:to:)``.
    mutating func addAccessory(_ view: RoutingAccessory) -> Int {
        let row = accessories.count
        accessories.append(AccessoryEntry(view: view))
        accessoryIndex.insert(row, of: accessories)
        return row
    }

    /// Forgets an unrouted accessory, unlisting its sources, and moves the last entry into its row.
    mutating func removeAccessory(at row: Int, commandSequence: UInt64) {
        precondition(accessories[row].routedSource == nil, "an accessory is unrouted before it is forgotten")
        updateListings(of: row, from: accessories[row].view.sources, to: [], commandSequence: commandSequence)
        accessoryIndex.remove(row, of: accessories)
        let last = accessories.count - 1
        if row != last {
            let moved = accessories[last]
            accessories[row] = moved
            accessoryIndex.move(from: last, to: row, of: accessories)
            for address in moved.view.sources {
                let source = kept(address)!
                sources[source].listedBy.replace(last, with: row)
                if var more = moreListings[address] {
                    for index in more.indices where more[index] == Int32(last) { more[index] = Int32(row) }
                    moreListings[address] = more
                }
            }
            if let source = moved.routedSource {
                setRoute(of: source, to: row)
            }
        }
        accessories.removeLast()
    }

    /// Forgets the source in `row` (listed by no accessory), and moves the last entry into its row.
    mutating func removeSource(at row: Int) {
        let entry = sources[row]
        sourceIndex.remove(row, of: sources)
        activityCounts.remove(entry.activity)
        let last = sources.count - 1
        if row != last {
            let moved = sources[last]
            sources[row] = moved
            sourceIndex.move(from: last, to: row, of: sources)
            if let accessory = moved.routedAccessory {
                accessories[accessory].routedSource = row
            }
        }
        sources.removeLast()
    }

    // MARK: - What is kept in step

    /// Sets what `source` last reported doing, keeping ``activityCounts``.
    mutating func setActivity(_ activity: Activity, of source: Int) {
        activityCounts.remove(sources[source].activity)
        activityCounts.add(activity)
        sources[source].activity = activity
    }

    /// Routes `source` to the accessory in row `accessory` (`nil`: to none), keeping ``routeCount``. Only the
    /// source's side: the accessory's ``AccessoryEntry/routedSource`` is the caller's.
    mutating func setRoute(of source: Int, to accessory: Int?) {
        if sources[source].routedAccessory != nil { routeCount -= 1 }
        if accessory != nil { routeCount += 1 }
        sources[source].routedAccessory = accessory
    }

    /// The accessory in row `accessory` listed `old` and now lists `new`: each source it no longer lists forgets it,
    /// each new one (kept from now on, with its count of commands at `commandSequence`) lists it.
    mutating func updateListings(of accessory: Int, from old: SourcePair, to new: SourcePair, commandSequence: UInt64) {
        for address in old where !new.contains(address) {
            let source = sourceRow(address, commandSequence: commandSequence)
            setListings(of: source, to: listings(of: source).filter { $0 != accessory })
        }
        for address in new where !old.contains(address) {
            let source = sourceRow(address, commandSequence: commandSequence)
            if !sources[source].listedBy.insert(accessory) {
                moreListings[address] = (moreListings[address] ?? []) + [Int32(accessory)]
            }
        }
    }

    /// Keeps `rows` as the accessories that list `source`: two inline, the rest beside.
    private mutating func setListings(of source: Int, to rows: [Int]) {
        var inline = RowList()
        var more: [Int32] = []
        for row in rows where !inline.insert(row) { more.append(Int32(row)) }
        sources[source].listedBy = inline
        moreListings[sources[source].address] = more.isEmpty ? nil : more
    }
}

extension RoutingTable {
    struct AccessoryEntry: SlotIndexed, Sendable {
        var view: RoutingAccessory
        var indexKey: AccessoryID { view.id }
        /// When it last became worn; `nil` while not worn.
        var wornSince: Timestamp?
        /// The row of the source routed to it.
        @OptionalRow var routedSource: Int? = nil
    }

    /// Its fields are ordered widest first (48 bytes rather than 72), and what few sources have at a time (a route in
    /// force, commands owed, a rule 5 pause, a third accessory listing it) lives beside it: the engine keeps one for
    /// every source an accessory lists.
    struct SourceEntry: SlotIndexed, Sendable {
        let address: BluetoothAddress
        /// When it last became active.
        var activeSince: Timestamp = .zero
        var lastReportSequence: UInt64 = 0
        /// Where its count of commands stands (its next command takes the next number).
        var commandSequence: UInt64
        /// The rows of the first two accessories that list it (see ``RoutingTable/listings(of:)``).
        var listedBy = RowList()
        /// The row of the accessory it is routed to (rule 3).
        @OptionalRow var routedAccessory: Int? = nil
        var activity: Activity = .idle
        /// The device's retained state said what it is routed to (restoring only: it wins over the bridge's memory).
        var reportedRoute = false
        /// A command was issued to it since the engine started keeping it (a flag in the padding, where the
        /// sequence itself would take 8 bytes: it is ``commandSequence``).
        var hasIssued = false

        /// The sequence of the last command issued to it since the engine started keeping it (0: none).
        var lastIssued: UInt64 { hasIssued ? commandSequence : 0 }

        var indexKey: BluetoothAddress { address }

        init(address: BluetoothAddress, commandSequence: UInt64) {
            self.address = address
            self.commandSequence = commandSequence
        }
    }
}
