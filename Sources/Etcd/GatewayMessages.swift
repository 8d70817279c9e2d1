import Foundation

/// The JSON of etcd's gRPC gateway (`/v3/...`, etcd 3.4): int64 fields are strings, bytes are padded base64, and a
/// field equal to zero, false or empty is left out of a response (so every field decodes as optional).
enum Gateway {
    /// A key or value, as the gateway writes bytes: standard base64 with padding.
    static func encode(_ text: String) -> String {
        Data(text.utf8).base64EncodedString()
    }

    static func decode(_ base64: String?) -> String {
        guard let base64, let data = Data(base64Encoded: base64) else { return "" }
        return String(decoding: data, as: UTF8.self)
    }

    /// The end of the range of every key starting with `prefix`: the prefix with its last byte plus one.
    static func rangeEnd(of prefix: String) -> String {
        var bytes = Array(prefix.utf8)
        while let last = bytes.last {
            if last < 0xff {
                bytes[bytes.count - 1] = last + 1
                return Data(bytes).base64EncodedString()
            }
            bytes.removeLast()
        }
        return Data([0]).base64EncodedString()
    }

    struct Header: Decodable {
        var revision: String?
        var cluster_id: String?
    }

    struct KeyValue: Decodable {
        var key: String?
        var value: String?
        var create_revision: String?
        var mod_revision: String?
    }

    struct LeaseGrant: Encodable {
        var TTL: String
    }

    struct LeaseID: Encodable {
        var ID: String
    }

    struct LeaseGranted: Decodable {
        var ID: String?
        var TTL: String?
        var error: String?
    }

    struct KeepAliveResult: Decodable {
        struct Result: Decodable {
            var ID: String?
            var TTL: String?
        }

        var result: Result?
    }

    struct Put: Encodable {
        var key: String
        var value: String
        var lease: String
    }

    struct Range: Encodable {
        var key: String
        var range_end: String?
    }

    struct RangeResponse: Decodable {
        var header: Header?
        var kvs: [KeyValue]?
    }

    struct Compare: Encodable {
        var key: String
        var target: String
        var result: String
        var create_revision: String?
        var mod_revision: String?
    }

    struct RequestOp: Encodable {
        var request_put: Put?
        var request_range: Range?
        var request_delete_range: Range?
    }

    struct Txn: Encodable {
        var compare: [Compare]
        var success: [RequestOp]
        var failure: [RequestOp]
    }

    struct TxnResponse: Decodable {
        struct ResponseOp: Decodable {
            var response_range: RangeResponse?
        }

        var header: Header?
        var succeeded: Bool?
        var responses: [ResponseOp]?
    }

    struct WatchCreate: Encodable {
        struct Request: Encodable {
            var key: String
            var range_end: String
            var start_revision: String
        }

        var create_request: Request
    }

    struct WatchMessage: Decodable {
        struct Result: Decodable {
            struct Event: Decodable {
                var type: String?
                var kv: KeyValue?
            }

            var header: Header?
            var created: Bool?
            var canceled: Bool?
            var compact_revision: String?
            var events: [Event]?
        }

        struct Failure: Decodable {
            var message: String?
        }

        var result: Result?
        var error: Failure?
    }

    /// The body of an error answer: `{"error": "...", "message": "...", "code": N}`.
    struct ErrorBody: Decodable {
        var message: String?
        var error: String?
        var code: Int?
    }
}
