"""An MQTT client for Herald's tests, with Eclipse Paho (paho-mqtt 2.x), v3.1.1 or v5.

Usage: paho_client.py '<JSON instructions>'

    {
      "host": "127.0.0.1", "port": 1883,
      "version": "5" | "3.1.1",            (default "5")
      "client_id": "t1",                   (default "": the server assigns one, v5)
      "username": "default", "password": "<token or API key>",   (both optional)
      "clean": true,                       (clean start / clean session, default true)
      "session_expiry": 3600,              (v5 Session Expiry Interval in CONNECT, seconds)
      "keepalive": 60,
      "subscribe": [{"topic": "a/b", "qos": 1, "no_local": false,
                     "subscription_identifier": 5}],   (no_local, the identifier: v5 only)
      "topic_alias_maximum": 10,           (v5 Topic Alias Maximum in CONNECT; paho itself
                                            does not resolve the server's aliases: a message
                                            sent with one shows its topic as sent, maybe "",
                                            and "TopicAlias" in its properties)
      "will": {"topic": "a/w", "payload": "gone", "qos": 1, "retain": false,
               "delay": 0},                 (delay: v5 Will Delay Interval, seconds)
      "publish": [{"topic": "a/b", "payload": "text" | "payload_base64": "...",
                   "qos": 1, "retain": false}],
      "expect": 2,                         (messages to receive before exiting, default 0)
      "manual_ack": true,                  (never PUBACK / PUBREC a received message: paho's
                                            manual_ack, no ack sent; default false)
      "timeout": 10,                       (seconds for the whole run, default 10)
      "end": "disconnect" | "drop",        (drop: exit without DISCONNECT, the socket just
                                            closes; default disconnect)
      "disconnect_reason": 4               (v5 DISCONNECT's reason code, default 0)
    }

It connects, subscribes (waiting for every SUBACK), publishes (waiting for each PUBACK or
PUBCOMP at QoS 1 and 2), waits for "expect" messages, then disconnects. Every step is printed
to stdout as one JSON line, flushed at once, so a test can read along:

    {"event": "connack", "reason_code": 0, "reason": "Success", "session_present": false,
     "properties": {...}}
    {"event": "suback", "reason_codes": [1]}
    {"event": "subscribed"}                 (every SUBACK came: publish from elsewhere now)
    {"event": "published", "topic": "a/b", "mid": 1, "reason_code": 0}
    {"event": "message", "topic": "a/b", "payload": "text", "payload_base64": "...",
     "qos": 1, "retain": false, "properties": {...}}
    {"event": "disconnect", "reason_code": 0, "reason": "Success"}   (the server closed it)
    {"event": "done"}                       (or {"event": "dropped"} with "end": "drop")

Exit status: 0 done; 1 bad instructions; 2 timed out (a {"event": "timeout", "waiting_for":
...} line says for what); 3 the CONNACK refused the connection; 4 the connection was lost.
"""

import base64
import json
import os
import sys
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

lock = threading.Lock()


def say(event, **fields):
    with lock:
        print(json.dumps({"event": event, **fields}), flush=True)


def code_of(reason_code):
    """A paho ReasonCode (v5 and v3 alike in paho 2) as (number, name)."""
    if reason_code is None:
        return None, None
    value = getattr(reason_code, "value", reason_code)
    return int(value), str(reason_code)


def properties_json(props):
    if props is None:
        return {}
    out = {}
    for name in props.names.keys():
        attr = name.replace(" ", "")
        if hasattr(props, attr):
            value = getattr(props, attr)
            if isinstance(value, bytes):
                value = {"base64": base64.b64encode(value).decode()}
            out[attr] = value
    return out


def main():
    try:
        spec = json.loads(sys.argv[1])
    except (IndexError, json.JSONDecodeError) as e:
        print(f"paho_client.py: expected JSON instructions as the one argument: {e}", file=sys.stderr)
        return 1
    v5 = str(spec.get("version", "5")) in ("5", "5.0")
    protocol = mqtt.MQTTv5 if v5 else mqtt.MQTTv311
    clean = bool(spec.get("clean", True))
    deadline = time.monotonic() + float(spec.get("timeout", 10))
    expect = int(spec.get("expect", 0))

    kwargs = {}
    if not v5:
        kwargs["clean_session"] = clean
    if spec.get("manual_ack"):
        kwargs["manual_ack"] = True
    client = mqtt.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=spec.get("client_id", ""),
        protocol=protocol,
        **kwargs,
    )
    if "username" in spec or "password" in spec:
        client.username_pw_set(spec.get("username"), spec.get("password"))

    connacked = threading.Event()
    refused = threading.Event()
    lost = threading.Event()
    subacks = []
    subacked = threading.Condition()
    received = []
    got = threading.Condition()
    published = {}
    pub_done = threading.Condition()

    def on_connect(_c, _u, flags, reason_code, properties):
        number, name = code_of(reason_code)
        say(
            "connack",
            reason_code=number,
            reason=name,
            session_present=bool(getattr(flags, "session_present", False)),
            properties=properties_json(properties),
        )
        if number:
            refused.set()
        connacked.set()

    def on_subscribe(_c, _u, _mid, reason_codes, _properties):
        codes = [code_of(rc)[0] for rc in reason_codes]
        say("suback", reason_codes=codes)
        with subacked:
            subacks.append(codes)
            subacked.notify_all()

    def on_publish(_c, _u, mid, reason_code, _properties):
        with pub_done:
            published[mid] = code_of(reason_code)[0]
            pub_done.notify_all()

    def on_message(_c, _u, msg):
        try:
            text = msg.payload.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        say(
            "message",
            topic=msg.topic,
            payload=text,
            payload_base64=base64.b64encode(msg.payload).decode(),
            qos=msg.qos,
            retain=bool(msg.retain),
            properties=properties_json(getattr(msg, "properties", None)),
        )
        with got:
            received.append(msg)
            got.notify_all()

    closing = threading.Event()

    def on_disconnect(_c, _u, _flags, reason_code, _properties):
        if closing.is_set():
            return
        number, name = code_of(reason_code)
        say("disconnect", reason_code=number, reason=name)
        lost.set()
        connacked.set()
        with subacked:
            subacked.notify_all()
        with got:
            got.notify_all()
        with pub_done:
            pub_done.notify_all()

    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_publish = on_publish
    client.on_message = on_message
    client.on_disconnect = on_disconnect

    def left():
        return max(0.0, deadline - time.monotonic())

    def timeout(waiting_for):
        say("timeout", waiting_for=waiting_for)
        client.loop_stop()
        return 2

    will = spec.get("will")
    if will:
        will_props = None
        if v5 and will.get("delay"):
            will_props = Properties(PacketTypes.WILLMESSAGE)
            will_props.WillDelayInterval = int(will["delay"])
        client.will_set(
            will["topic"],
            will.get("payload", ""),
            qos=int(will.get("qos", 0)),
            retain=bool(will.get("retain", False)),
            properties=will_props,
        )

    connect_kwargs = {"keepalive": int(spec.get("keepalive", 60))}
    if v5:
        connect_kwargs["clean_start"] = clean
        if "session_expiry" in spec or "topic_alias_maximum" in spec:
            props = Properties(PacketTypes.CONNECT)
            if "session_expiry" in spec:
                props.SessionExpiryInterval = int(spec["session_expiry"])
            if "topic_alias_maximum" in spec:
                props.TopicAliasMaximum = int(spec["topic_alias_maximum"])
            connect_kwargs["properties"] = props
    client.connect(spec.get("host", "127.0.0.1"), int(spec["port"]), **connect_kwargs)
    client.loop_start()
    if not connacked.wait(left()):
        return timeout("connack")
    if refused.is_set():
        client.loop_stop()
        return 3
    if lost.is_set():
        client.loop_stop()
        return 4

    subscriptions = spec.get("subscribe", [])
    for sub in subscriptions:
        if v5 and (sub.get("no_local") or sub.get("subscription_identifier")):
            options = SubscribeOptions(qos=int(sub.get("qos", 0)), noLocal=bool(sub.get("no_local")))
            sub_props = None
            if sub.get("subscription_identifier"):
                sub_props = Properties(PacketTypes.SUBSCRIBE)
                sub_props.SubscriptionIdentifier = int(sub["subscription_identifier"])
            client.subscribe(sub["topic"], options=options, properties=sub_props)
        else:
            client.subscribe(sub["topic"], qos=int(sub.get("qos", 0)))
    with subacked:
        if not subacked.wait_for(lambda: len(subacks) >= len(subscriptions) or lost.is_set(), left()):
            return timeout("suback")
    if lost.is_set():
        client.loop_stop()
        return 4
    if subscriptions:
        say("subscribed")

    for pub in spec.get("publish", []):
        if "payload_base64" in pub:
            payload = base64.b64decode(pub["payload_base64"])
        else:
            payload = pub.get("payload", "").encode("utf-8")
        qos = int(pub.get("qos", 0))
        props = None
        if v5 and pub.get("user_properties"):
            props = Properties(PacketTypes.PUBLISH)
            props.UserProperty = [tuple(p) for p in pub["user_properties"]]
        info = client.publish(
            pub["topic"], payload, qos=qos, retain=bool(pub.get("retain", False)), properties=props
        )
        with pub_done:
            if not pub_done.wait_for(lambda: info.mid in published or lost.is_set(), left()):
                return timeout(f"the answer to the publish to {pub['topic']!r}")
        if lost.is_set():
            client.loop_stop()
            return 4
        say("published", topic=pub["topic"], mid=info.mid, reason_code=published[info.mid])

    with got:
        if not got.wait_for(lambda: len(received) >= expect or lost.is_set(), left()):
            return timeout(f"{expect} messages, have {len(received)}")
    if lost.is_set() and len(received) < expect:
        client.loop_stop()
        return 4
    if spec.get("end") == "drop":
        # No DISCONNECT: the process ends and the kernel closes the socket.
        say("dropped")
        sys.stdout.flush()
        os._exit(0)
    closing.set()
    if v5 and spec.get("disconnect_reason"):
        client.disconnect(
            reasoncode=ReasonCode(PacketTypes.DISCONNECT, identifier=int(spec["disconnect_reason"]))
        )
    else:
        client.disconnect()
    client.loop_stop()
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
