"""Runs Pusher's official Python server SDK (PyPI `pusher`) against Herald, for the tests in
crates/herald/tests/server/pusher_api.rs. One JSON argument says what to do (as trigger.mjs
takes it: host, port, appId, key, secret, and "trigger" or "batch", or a query:
"channels_info": {"prefix", "attributes"}, "channel_info": {"channel", "attributes"},
"users_info": {"channel"}, or "send_to_user": {"user_id", "event", "data"}, or
"terminate_user": "<user id>") and one JSON line is
printed: {"status": <HTTP status>, "body": "<the answer's text>"}."""

import json
import sys

import pusher
import pusher.errors

order = json.loads(sys.argv[1])
client = pusher.Pusher(
    app_id=order["appId"],
    key=order["key"],
    secret=order["secret"],
    host=order["host"],
    port=int(order["port"]),
    ssl=False,
)

try:
    if "trigger" in order:
        t = order["trigger"]
        body = client.trigger(t["channels"], t["event"], t["data"], t.get("socket_id"))
    elif "channels_info" in order:
        q = order["channels_info"]
        body = client.channels_info(q.get("prefix"), q.get("attributes", []))
    elif "channel_info" in order:
        q = order["channel_info"]
        body = client.channel_info(q["channel"], q.get("attributes", []))
    elif "send_to_user" in order:
        u = order["send_to_user"]
        body = client.send_to_user(u["user_id"], u["event"], u["data"])
    elif "terminate_user" in order:
        body = client.terminate_user_connections(order["terminate_user"])
    elif "users_info" in order:
        body = client.users_info(order["users_info"]["channel"])
    else:
        body = client.trigger_batch(order["batch"])
    answer = {"status": 200, "body": json.dumps(body)}
except pusher.errors.PusherBadAuth as e:
    answer = {"status": 401, "body": str(e)}
except pusher.errors.PusherBadRequest as e:
    answer = {"status": 400, "body": str(e)}
except pusher.errors.PusherForbidden as e:
    answer = {"status": 403, "body": str(e)}
except pusher.errors.PusherBadStatus as e:
    # "<status>: <body>"
    status, _, text = str(e).partition(": ")
    answer = {"status": int(status), "body": text}
print(json.dumps(answer))
