"""schemathesis hooks for scripts/schemathesis.sh.

One hook: `filter_failure` drops an ST202 ("schema-valid request rejected") failure only when
the server's 400 names a rule OpenAPI 3.0 cannot state in a schema, each documented in
docs/openapi.yaml's prose. The schemas say everything else (types, lengths, patterns, ranges,
`oneOf` for bodies that hold exactly one of several fields), and every other failure counts.
"""

import re

import schemathesis

# (operation, what the error message says, why no schema can say it)
DOCUMENTED_RULES = [
    # Two query parameters that exclude each other: OpenAPI 3.0 has no way to relate
    # parameters (a schema describes one parameter).
    ("GET /v1/channels/{name}/messages", "give since or last, not both", "exclusive parameters"),
    ("GET /v1/devices", "list by user or by tag, not both", "exclusive parameters"),
    # A cursor holds one position per channel named: a relation between two parameters
    # (`since`/`Last-Event-ID` and the repeated `channel`).
    ("GET /v1/poll", "positions but", "cursor and channels"),
    ("GET /v1/sse", "positions but", "cursor and channels"),
    # `channel` is required except with a device token: it depends on the credential's kind.
    ("GET /v1/poll", "name at least one channel", "depends on the token"),
    ("GET /v1/sse", "name at least one channel", "depends on the token"),
    ("GET /v1/ws", "name at least one channel", "depends on the token"),
    # The Idempotency-Key header and the body's `id` must be equal when both are sent: a
    # relation between a header and a body field.
    ("POST /v1/channels/{name}/messages", "Idempotency-Key header and body", "header and body"),
    ("POST /v1/push", "Idempotency-Key header and body", "header and body"),
    # Times relative to now: `expires` in the next ten years, `issued_before` not in the future.
    ("POST /v1/apps/{id}/revoke", '"expires" must be a time', "relative to now"),
    ("POST /v1/apps/{id}/revoke", "is in the future", "relative to now"),
    # The handshake is not HTTP request/response: schemathesis sends the upgrade headers the
    # document lists but its HTTP client rewrites `Connection`, so the server sees no upgrade.
    ("GET /v1/ws", "takes a WebSocket upgrade", "WebSocket handshake"),
    # The default app's HS256 secret is the server's configuration: `hs256: false` is refused
    # for that one app (a relation between the path and the body).
    ("PUT /v1/apps/{id}/token-keys", "cannot be dropped", "path and body"),
    # `hs256: false` needs keys or a `jwks_url`, in this request or already stored.
    ("PUT /v1/apps/{id}/token-keys", "without an HS256 secret the app needs", "stored state"),
    # An app's `max_message_bytes` is at most the server's `max_frame_bytes`, a setting of the
    # server's configuration (docs/config.md), not of the document.
    ("POST /v1/apps", "this server's max_frame_bytes", "server configuration"),
    ("PATCH /v1/apps/{id}", "this server's max_frame_bytes", "server configuration"),
    # A page cursor is opaque: only one the server answered is valid.
    ("GET /v1/audit", "is not one this API answered", "opaque cursor"),
    # The providers' own rules between a push's fields (Apple's, Google's, the Web Push
    # payload's: e.g. Live Activity keys need `push_type: liveactivity`), listed in
    # docs/push.md; answered `400` with a message starting with the provider's name.
    # A tag expression's grammar (docs/push.md) nests parentheses: no pattern can check it.
    ("POST /v1/push", "tag expression: ", "grammar with nesting"),
    ("POST /v1/push", 'options need "delivery"', "provider rules"),
    ("POST /v1/push", "apns: ", "provider rules"),
    ("POST /v1/push", "fcm: ", "provider rules"),
    ("POST /v1/push", "webpush: ", "provider rules"),
    # Key material must be a key that loads (a PEM public key, a private key, a certificate,
    # a service account): a pattern cannot check that bytes are a valid key.
    ("PUT /v1/apps/{id}/token-keys", "is not a PEM", "key material"),
    ("PUT /v1/apps/{id}/providers/{provider}", " credentials: ", "key material or provider"),
]


def _operation(case):
    return f"{case.operation.method.upper()} {case.operation.path}"


def _message(response):
    try:
        return response.json()["error"]["message"]
    except Exception:
        return ""


# Operator policy, in any operation: a URL a tenant gives (a Web Push endpoint, a JWKS URL)
# must reach a public address unless the operator allows the range; whether a host name is
# one depends on DNS and on the server's configuration, not on the document.
OUTBOUND_POLICY = "Herald connects only to public addresses"

# The app's own message size limit: an earlier request of the run may set the app's
# `max_message_bytes` (down to 1 byte, as the document allows), and a later message over it is
# `413 too_large` naming that limit. A check of one request at a time cannot know the state.
APP_SIZE_LIMIT = "; the limit is "


@schemathesis.hook
def filter_failure(context, failure, case, response):
    code = getattr(failure, "code", None)
    message = _message(response)
    if code in ("ST201", "ST202") and response.status_code == 413 and APP_SIZE_LIMIT in message:
        return False
    if code != "ST202" or response.status_code != 400:
        return True
    if OUTBOUND_POLICY in message:
        return False
    operation = _operation(case)
    for rule_operation, text, _why in DOCUMENTED_RULES:
        if operation == rule_operation and text in message:
            return False
    return True
