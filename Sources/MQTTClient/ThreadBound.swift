#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one thread allowed to touch a state once it was handed over, checked where the state is touched, as swift-nio's
/// `NIOLoopBound` checks its event loop: in a debug build, another thread stops the program (release builds check
/// nothing: the checks are on the hottest paths). Before ``claim()`` (while a state is being built, or driven by a
/// test's single thread) nothing is checked.
///
/// Every value that belongs to one thread is checked through this: a ``ThreadBound`` value (a session's loop state),
/// or an object that checks at its entry points (the bridge's message processor).
public struct ThreadOwner: Sendable {
    private var thread: Thread?

    /// A thread's identity.
    // @unchecked Sendable: a pthread_t only identifies a thread; it is compared, never dereferenced.
    private struct Thread: @unchecked Sendable {
        let id: pthread_t
    }

    public init() {}

    /// The calling thread owns the state from now on.
    public mutating func claim() {
        thread = Thread(id: pthread_self())
    }

    /// Whether the calling thread is the owner (`false` before ``claim()``).
    public var isCurrent: Bool {
        guard let thread else { return false }
        return pthread_equal(thread.id, pthread_self()) != 0
    }

    /// Stops a debug build when a thread other than the owner touches the state.
    @inline(__always)
    public func check(_ what: StaticString = #function) {
        assert(thread == nil || isCurrent, "\(what) called off the owning thread")
    }
}

/// A value that belongs to one thread once claimed (``ThreadOwner``): every read and write of it, and of its
/// members through `bound.member`, is checked (debug builds), as swift-nio's `NIOLoopBound` does.
@dynamicMemberLookup
public struct ThreadBound<Value> {
    private var _value: Value
    public private(set) var owner = ThreadOwner()

    public init(_ value: Value) {
        _value = value
    }

    /// The calling thread owns the value from now on.
    public mutating func claim() {
        owner.claim()
    }

    /// Whether the calling thread owns the value.
    public var isCurrent: Bool { owner.isCurrent }

    public var value: Value {
        get {
            owner.check()
            return _value
        }
        _modify {
            owner.check()
            yield &_value
        }
    }

    public subscript<Member>(dynamicMember member: WritableKeyPath<Value, Member>) -> Member {
        get {
            owner.check()
            return _value[keyPath: member]
        }
        _modify {
            owner.check()
            yield &_value[keyPath: member]
        }
    }
}

/// A value handed from the thread that built it to the thread that owns it.
// @unchecked Sendable: the value is touched by its owning thread only (checked in debug builds); it is handed to that
// thread before the thread claims it, which orders the hand-over (a thread's start).
extension ThreadBound: @unchecked Sendable {}
