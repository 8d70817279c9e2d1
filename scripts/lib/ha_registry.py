"""Home Assistant's device and entity registries over its websocket API, for scripts/ha-reshard.sh (run with the
venv's Python, which has aiohttp; HA_URL and HA_TOKEN as ha-validate.sh's --exec sets them):

    ha_registry.py customize            names the first accessory's device and its Placement entity, as a person would
    ha_registry.py snapshot FILE        saves the MQTT devices and entities (their registry entries) as JSON
    ha_registry.py compare BEFORE AFTER prints what a reshard kept of them; exits 1 when a device or entity of BEFORE
                                        is not the same entry in AFTER (its registry id, entity id, device, names),
                                        but for the slots' own devices, which go with their slots
"""
import asyncio
import json
import os
import re
import sys

import aiohttp


async def call(*messages):
    url = os.environ["HA_URL"].replace("http", "ws", 1) + "/api/websocket"
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        await ws.receive_json()
        await ws.send_json({"type": "auth", "access_token": os.environ["HA_TOKEN"]})
        if (await ws.receive_json())["type"] != "auth_ok":
            raise SystemExit("ha_registry: Home Assistant refused the token")
        results = []
        for number, message in enumerate(messages, 1):
            await ws.send_json(dict(message, id=number))
            while (answer := await ws.receive_json()).get("id") != number:
                pass
            if not answer.get("success"):
                raise SystemExit(f"ha_registry: {message['type']}: {answer.get('error')}")
            results.append(answer["result"])
        return results


async def snapshot():
    entities, devices = await call({"type": "config/entity_registry/list"}, {"type": "config/device_registry/list"})
    entities = [entity for entity in entities if entity["platform"] == "mqtt"]
    devices = [device for device in devices if any(kind == "mqtt" for kind, _ in device["identifiers"])]
    return {"entities": entities, "devices": devices}


async def customize():
    entities = (await snapshot())["entities"]
    entity = next(entity for entity in entities if entity["unique_id"].endswith("_placement"))
    await call(
        {"type": "config/device_registry/update", "device_id": entity["device_id"], "name_by_user": "My buds"},
        {"type": "config/entity_registry/update", "entity_id": entity["entity_id"], "name": "Where my buds are"},
    )
    print(f"ha_registry: named {entity['entity_id']} and its device")


def compare(before_path, after_path):
    before, after = (json.load(open(path)) for path in (before_path, after_path))
    entity_fields = ("id", "entity_id", "device_id", "name")
    device_fields = ("id", "name_by_user", "area_id")
    entities_after = {entity["unique_id"]: entity for entity in after["entities"]}
    devices_after = {json.dumps(sorted(device["identifiers"])): device for device in after["devices"]}
    # A slot's own device (`aab_{root}_slots_{n}_bridge`) goes with its slot when the count shrinks: reported apart.
    own = {device["id"] for device in before["devices"]
           if any(re.fullmatch(r"aab_.*_slots_[0-9]+_bridge", identifier) for _, identifier in device["identifiers"])}
    gone = [device["name"] for device in before["devices"]
            if device["id"] in own and json.dumps(sorted(device["identifiers"])) not in devices_after]
    known = {entity["unique_id"] for entity in before["entities"]}
    before = {"entities": [entity for entity in before["entities"] if entity["device_id"] not in own],
              "devices": [device for device in before["devices"] if device["id"] not in own]}
    lost = []
    for entity in before["entities"]:
        now = entities_after.get(entity["unique_id"], {})
        if any(now.get(field) != entity[field] for field in entity_fields):
            lost.append(f"entity {entity['entity_id']}: {[entity.get(f) for f in entity_fields]} -> "
                        f"{[now.get(f) for f in entity_fields]}")
    for device in before["devices"]:
        now = devices_after.get(json.dumps(sorted(device["identifiers"])), {})
        if any(now.get(field) != device[field] for field in device_fields):
            lost.append(f"device {device['identifiers']}: {device.get('name_by_user')} -> {now.get('name_by_user')}")
    new = sorted({entity["device_id"] for entity in after["entities"] if entity["unique_id"] not in known})
    names = {device["id"]: device["name"] for device in after["devices"]}
    print(f"accessories' and hubs' entities: {len(before['entities'])} before, {len(after['entities'])} after (all), "
          f"{len(before['entities']) - sum(line.startswith('entity') for line in lost)} kept")
    print(f"accessories' and hubs' devices: {len(before['devices'])} before, {len(after['devices'])} after (all), "
          f"{len(before['devices']) - sum(line.startswith('device') for line in lost)} kept")
    print(f"slots' own devices gone with their slots: {len(gone)}")
    print(f"devices new: {len(new)} {sorted(names.get(device, device) for device in new)}")
    print("user's names after: " + ", ".join(
        [device["name_by_user"] for device in after["devices"] if device["name_by_user"]]
        + [entity["name"] for entity in after["entities"] if entity["name"]]))
    for line in lost:
        print("  not kept: " + line)
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    if command == "compare":
        compare(*arguments)
    elif command == "snapshot":
        json.dump(asyncio.run(snapshot()), open(arguments[0], "w"), indent=1)
    else:
        asyncio.run(customize())
