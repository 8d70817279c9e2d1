import CMosquitto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Process-wide libmosquitto set-up and the translation of its return codes.
enum MosquittoLibrary {
    /// `mosquitto_lib_init` runs once per process, the first time a client is created. libmosquitto counts its
    /// initializations, so other users of the library in the process are unaffected; it is never cleaned up.
    static let initialized: Void = {
        _ = mosquitto_lib_init()
    }()

    static let success = MOSQ_ERR_SUCCESS.rawValue
    static let noConnection = MOSQ_ERR_NO_CONN.rawValue
    static let invalid = MOSQ_ERR_INVAL.rawValue
    static let errno = MOSQ_ERR_ERRNO.rawValue

    /// `INVALID_SOCKET`: what `mosquitto_socket` returns when there is no connection.
    static let invalidSocket: Int32 = -1

    /// Throws the ``MQTTError`` of a libmosquitto return code other than success.
    static func check(_ code: Int32) throws(MQTTError) {
        guard code == success else { throw MQTTError.library(code) }
    }

    /// The text of a `MOSQ_ERR_*` code.
    static func errorText(_ code: Int32) -> String {
        String(cString: mosquitto_strerror(code))
    }

    /// The text of an MQTT 5 reason code.
    static func reasonText(_ code: Int32) -> String {
        String(cString: mosquitto_reason_string(code))
    }

    /// The text of an `errno` value.
    static func systemErrorText(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }
}

extension MQTTError {
    /// A libmosquitto return code. For `MOSQ_ERR_ERRNO` it reads `errno`, so call it right after the failing call.
    static func library(_ code: Int32) -> MQTTError {
        if code == MosquittoLibrary.errno {
            let systemCode = cmosquitto_errno()
            return MQTTError(kind: .system, code: systemCode, message: MosquittoLibrary.systemErrorText(systemCode))
        }
        return MQTTError(kind: .library, code: code, message: MosquittoLibrary.errorText(code))
    }

    /// A bad argument, found before calling libmosquitto.
    static func invalidArgument(_ message: String) -> MQTTError {
        MQTTError(kind: .invalidArgument, code: MosquittoLibrary.invalid, message: message)
    }

    /// A CONNACK reason code other than success.
    static func connectionRefused(reason: Int32) -> MQTTError {
        MQTTError(kind: .connectionRefused, code: reason, message: MosquittoLibrary.reasonText(reason))
    }

    /// Why a connection ended: libmosquitto passes either a `MOSQ_ERR_*` code (the network, a protocol error,
    /// keep-alive) or, when the broker sent DISCONNECT, its MQTT 5 reason code (0x80 and above, or 0 for a normal
    /// disconnection the client did not ask for).
    ///
    /// A connection the broker or the network closed comes as `MOSQ_ERR_CONN_LOST` or `MOSQ_ERR_ERRNO`, whose text
    /// would be `strerror` of an `errno` long overwritten ("Success"). mosquitto closes a connection that another
    /// client with the same id takes over without a DISCONNECT, so that is the same code: the text says what to check.
    static func disconnected(code: Int32) -> MQTTError {
        if code >= 0x80 || code == 0 {
            return MQTTError(kind: .disconnected, code: code, message: MosquittoLibrary.reasonText(code))
        }
        if code == MosquittoLibrary.errno || code == MOSQ_ERR_CONN_LOST.rawValue {
            return MQTTError(
                kind: .disconnected, code: code,
                message: "the broker or the network closed the connection; if it closes again right after each "
                    + "connection, another client is probably connected with the same client id")
        }
        return MQTTError(kind: .disconnected, code: code, message: MosquittoLibrary.errorText(code))
    }

    /// A call on a client that ``MQTTClient/close()`` released.
    static let closed = MQTTError(kind: .library, code: MosquittoLibrary.noConnection, message: "the client is closed")

    /// ``MQTTClient/waitUntilConnected()`` when the client stopped before it ever connected.
    static let stoppedBeforeConnecting = MQTTError(
        kind: .disconnected, code: MosquittoLibrary.noConnection,
        message: "the client was disconnected or closed before it connected"
    )

    /// What a person should check when connecting failed this way; `nil` when there is nothing particular to say.
    public var hint: String? {
        switch kind {
        case .connectionRefused:
            switch code {
            case 0x86: return "the user name or password is wrong"
            // mosquitto 2.0 answers a wrong password with this too.
            case 0x87: return "the user name or password is wrong, or this user may not connect (the broker's roles)"
            case 0x85: return "the broker does not accept this client id"
            default: return nil
            }
        case .system where code == ECONNREFUSED:
            return "nothing listens there: is the broker running, on that port?"
        case .system where code == ETIMEDOUT || code == EHOSTUNREACH || code == ENETUNREACH:
            return "the broker's host does not answer: check the address and the network"
        case .library where code == MOSQ_ERR_EAI.rawValue:
            return "the broker's host name does not resolve"
        case .library where code == MQTTError.tlsFailure:
            return "TLS failed: check that the CA file signs the broker's certificate, that the broker's name is in it, "
                + "and the client certificate and key"
        default:
            return nil
        }
    }

    /// `MOSQ_ERR_TLS` and `MOSQ_ERR_AUTH`, for ``isPermanent``.
    static let tlsFailure = MOSQ_ERR_TLS.rawValue
    static let authenticationFailure = MOSQ_ERR_AUTH.rawValue

    /// ``MQTTClient/waitUntilConnected(timeout:)`` when no connection came in time; names the last attempt's failure.
    static func notConnected(host: String, port: Int, after timeout: Duration, lastFailure: MQTTError?) -> MQTTError {
        let why = lastFailure.map { failure in ": \(failure.message)" + (failure.hint.map { " (\($0))" } ?? "") }
            ?? ": no answer from the broker"
        return MQTTError(
            kind: .notConnected, code: MosquittoLibrary.noConnection,
            message: "no connection to \(host):\(port) within \(timeout)\(why)")
    }

    /// ``MQTTClient/waitUntilConnected()`` when its task was cancelled.
    static let cancelledWhileConnecting = MQTTError(
        kind: .disconnected, code: MosquittoLibrary.noConnection, message: "cancelled while waiting for the connection"
    )
}
