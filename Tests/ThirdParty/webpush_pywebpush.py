#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""pywebpush (with py-vapid and http-ece) against the Web Push emulator, unchanged.

Environment:
  WEBPUSH_EMULATOR  the emulator's origin, e.g. http://127.0.0.1:8080

For each personality (apple, mozilla, fcm) the script makes a virtual browser through the control
API, subscribed with its own fresh VAPID key, then:
(a) pywebpush sends a UTF-8 text to it (aes128gcm, VAPID with the default aud/exp): expects 201
    and a Location;
(b) pywebpush signs with a different VAPID key: expects WebPushException with 401 or 403;
(c) the browser unsubscribes (DELETE): expects WebPushException with 410 or 404.

Prints one JSON line with what happened (browser ids, message ids, statuses); exits non-zero on
any mismatch. The Swift test checks the decrypted texts in the emulator's inboxes.
Needs: python3 -m pip install pywebpush py-vapid http-ece
"""

import base64
import json
import os
import sys

import requests
from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid02
from pywebpush import WebPushException, webpush

SUBJECT = "mailto:push@example.com"


def application_server_key(vapid):
    raw = vapid.public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def text_for(personality):
    return "Hello from pywebpush \u2713 \U0001F514 (%s)" % personality


def main():
    base = os.environ["WEBPUSH_EMULATOR"].rstrip("/")
    report = {"browsers": {}, "messages": {}, "wrongKey": {}, "unsubscribed": {}, "failures": []}
    failures = report["failures"]

    def control(method, route, body=None):
        response = requests.request(method, base + "/emulator" + route, json=body, timeout=10)
        response.raise_for_status()
        return response.json()

    for personality in ("apple", "mozilla", "fcm"):
        vapid = Vapid02()
        vapid.generate_keys()
        made = control("POST", "/browsers", {"personality": personality, "applicationServerKey": application_server_key(vapid)})
        browser = made["id"]
        subscription = made["subscription"]
        report["browsers"][personality] = browser

        # (a) a good push: claims get their aud from the endpoint, exp now + 12 h.
        response = webpush(subscription, data=text_for(personality), vapid_private_key=vapid,
                           vapid_claims={"sub": SUBJECT}, ttl=60, timeout=10)
        location = response.headers.get("Location", "")
        if response.status_code != 201 or "/m/" not in location:
            failures.append("%s: push answered %s, Location %r" % (personality, response.status_code, location))
        report["messages"][personality] = location.rsplit("/m/", 1)[-1]
        inbox = control("GET", "/browsers/" + browser)
        texts = [message["text"] for message in inbox["messages"]]
        if texts != [text_for(personality)]:
            failures.append("%s: inbox holds %r" % (personality, texts))

        # (b) another application server's key.
        other = Vapid02()
        other.generate_keys()
        try:
            webpush(subscription, data="wrong key", vapid_private_key=other, vapid_claims={"sub": SUBJECT}, ttl=60, timeout=10)
            failures.append("%s: a push signed with another key was accepted" % personality)
        except WebPushException as error:
            status = error.response.status_code if error.response is not None else None
            report["wrongKey"][personality] = status
            if status not in (401, 403):
                failures.append("%s: wrong key answered %s" % (personality, status))

        # (c) unsubscribed.
        control("DELETE", "/browsers/" + browser)
        try:
            webpush(subscription, data="too late", vapid_private_key=vapid, vapid_claims={"sub": SUBJECT}, ttl=60, timeout=10)
            failures.append("%s: a push to an unsubscribed endpoint was accepted" % personality)
        except WebPushException as error:
            status = error.response.status_code if error.response is not None else None
            report["unsubscribed"][personality] = status
            if status not in (404, 410):
                failures.append("%s: unsubscribed answered %s" % (personality, status))

    print(json.dumps(report, ensure_ascii=False))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
