import AccessoryModel
import AccessoryWire
import Logging
import MQTTClient

extension BridgeLayout {
    /// Reads the bridge's retained layout (`R/bridge/layout`, docs/scale-out.md "The layout hubs read") on a
    /// connection of its own (clean, without a will, under `mqtt`'s client id with `-layout` appended): how many
    /// slots a hub's topics are laid out in, for ``AccessoryHub/Options/slots`` when the hub is not told.
    ///
    /// Returns `nil` when no bridge has published a layout within `timeout` (or none this release reads: each is
    /// logged). An ``AccessoryHub`` with ``AccessoryHub/Options/followsLayout`` (and the C SDK's
    /// `AUDIOHUB_SLOTS_FROM_BRIDGE`) also follows a change of the layout; one given ``AccessoryHub/Options/slots``
    /// keeps the count it was made with.
    public static func read(
        mqtt: MQTTConfiguration, topicRoot: TopicRoot = .default, timeout: Duration = .seconds(10), logger: Logger
    ) async throws(MQTTError) -> BridgeLayout? {
        let client = try MQTTClient(configuration: mqtt.companion(clientID: mqtt.clientID + "-layout"), logger: logger)
        let topic = Topic.bridgeLayout.name(under: topicRoot)
        let codec = WireCodec()
        let stream: AsyncStream<MQTTMessage>
        do {
            try client.subscribe(topic, qos: .atLeastOnce)
            stream = try client.startStreaming()
            try await client.waitUntilConnected(timeout: timeout)
        } catch {
            await client.close()
            throw error
        }
        // The retained layout comes right after the subscription; none within the timeout means none is retained.
        let timer = Task {
            try await Task.sleep(for: timeout)
            await client.close()
        }
        defer { timer.cancel() }
        var layout: BridgeLayout?
        for await message in stream {
            do {
                let format = try PayloadFormat.detect(
                    contentType: message.properties.contentType, payload: message.payload)
                layout = try codec.decode(BridgeLayout.self, from: message.payload, format: format)
                break
            } catch {
                logger.warning(
                    "unreadable bridge layout", metadata: ["mqtt.topic": "\(message.topic)", "error": "\(error)"])
            }
        }
        await client.close()
        return layout
    }
}
