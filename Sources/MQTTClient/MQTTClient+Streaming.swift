extension MQTTClient {
    /// Starts the client with its messages delivered as an `AsyncStream`, for command-line tools and consumers that
    /// prefer a loop over a handler: each message is yielded to an unbounded buffer (so the network thread never
    /// waits; a consumer that falls behind makes the buffer grow), and ``close()`` finishes the stream.
    ///
    /// ```swift
    /// let client = try MQTTClient(configuration: configuration, logger: logger)
    /// try client.subscribe("accessories/#")
    /// for await message in try client.startStreaming() { ... }
    /// ```
    public func startStreaming(onEvent: @escaping @Sendable (MQTTEvent) -> Void = { _ in })
        throws(MQTTError) -> AsyncStream<MQTTMessage>
    {
        let (messages, continuation) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: .unbounded)
        do {
            try start(
                ClosureHandler(
                    onMessage: { continuation.yield($0) }, onEvent: onEvent, onClose: { continuation.finish() }))
        } catch {
            continuation.finish()
            throw error
        }
        return messages
    }
}
