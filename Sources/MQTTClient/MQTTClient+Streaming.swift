import Logging

extension MQTTClient {
    /// A client whose messages arrive as an `AsyncStream`, for command-line tools and consumers that prefer a loop
    /// over a handler: `onMessage` yields each message to an unbounded buffer (so the network thread never
    /// waits; a consumer that falls behind makes the buffer grow), and ``close()`` finishes the stream.
    ///
    /// ```swift
    /// let (client, messages) = try MQTTClient.streaming(configuration: configuration, logger: logger)
    /// try client.subscribe("accessories/#")
    /// try client.start()
    /// for await message in messages { ... }
    /// ```
    public static func streaming(
        configuration: MQTTConfiguration,
        logger: Logger,
        onEvent: @escaping @Sendable (MQTTEvent) -> Void = { _ in }
    ) throws(MQTTError) -> (client: MQTTClient, messages: AsyncStream<MQTTMessage>) {
        let (messages, continuation) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: .unbounded)
        do {
            let client = try MQTTClient(
                configuration: configuration, logger: logger,
                onMessage: { continuation.yield($0) },
                onEvent: onEvent,
                onClose: { continuation.finish() }
            )
            return (client, messages)
        } catch {
            continuation.finish()
            throw error
        }
    }
}
