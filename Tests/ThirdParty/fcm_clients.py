#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Google's own Python clients against the FCM emulator, changed only in where they connect.

Environment:
  FCM_EMULATOR         the emulator's base URL, e.g. http://127.0.0.1:8080
  FCM_SERVICE_ACCOUNT  path to a service-account JSON whose token_uri is the emulator's /token
  FCM_TOKEN            a registration token of a virtual device of that account's project

(a) google-auth fetches an access token with the JWT-bearer grant;
(b) firebase-admin sends to FCM_TOKEN (and dry-runs, and sends again after the emulator expired
    every access token, and through a 503 fault), sends to an uninstalled device's token
    (expects messaging.UnregisteredError) and to a malformed one (expects InvalidArgumentError),
    and, where firebase-admin has Message.fid, to a Firebase Installation ID.

Prints one JSON line with what happened; exits non-zero on any mismatch.
Needs: python3 -m pip install google-auth firebase-admin requests
"""

import json
import os
import sys
import warnings

import requests
import google.auth.transport.requests
from google.oauth2 import service_account

import firebase_admin
from firebase_admin import credentials, exceptions, messaging

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"

# firebase-admin 7.5+ deprecates Message.token in favour of Message.fid; both are exercised here.
warnings.filterwarnings("ignore", message="Message.token is deprecated", category=DeprecationWarning)


def main():
    base = os.environ["FCM_EMULATOR"].rstrip("/")
    path = os.environ["FCM_SERVICE_ACCOUNT"]
    token = os.environ["FCM_TOKEN"]
    with open(path) as handle:
        project = json.load(handle)["project_id"]

    results = {}
    failures = []

    def check(name, ok, detail=None):
        if not ok:
            failures.append(name if detail is None else "%s: %s" % (name, detail))

    def control(method, route, body=None):
        response = requests.request(method, base + "/emulator" + route, json=body, timeout=10)
        response.raise_for_status()
        return response.json()

    # (a) google-auth, pointed at the emulator only by the JSON's token_uri.
    creds = service_account.Credentials.from_service_account_file(path, scopes=[SCOPE])
    creds.refresh(google.auth.transport.requests.Request())
    results["access_token"] = bool(creds.token)
    results["token_expiry"] = creds.expiry.isoformat() if creds.expiry else None
    check("google-auth access token", bool(creds.token) and creds.valid)

    # (b) firebase-admin: no supported endpoint override, so the class attribute is set
    # before the first messaging call.
    messaging._MessagingService.FCM_URL = base + "/v1/projects/{0}/messages:send"
    firebase_admin.initialize_app(credentials.Certificate(path))

    message = messaging.Message(
        token=token,
        notification=messaging.Notification(title="Hello", body="From firebase-admin"),
        data={"source": "fcm_clients.py", "n": "1"},
        android=messaging.AndroidConfig(priority="high", ttl=3600, collapse_key="greeting"),
    )
    name = messaging.send(message)
    results["name"] = name
    check("send name", name.startswith("projects/%s/messages/" % project), name)

    dry = messaging.send(message, dry_run=True)
    results["dry_run"] = dry
    check("dry run", dry == "projects/%s/messages/fake_message_id" % project, dry)

    # Every access token expires at once: firebase-admin gets a 401, refreshes and retries.
    control("POST", "/access-tokens/expire")
    renewed = messaging.send(messaging.Message(token=token, data={"n": "2"}))
    results["after_expiry"] = renewed
    check("send after expiry", renewed.startswith("projects/%s/messages/" % project), renewed)

    # A 503 without retry-after: firebase-admin's own retry gets it through.
    control("POST", "/faults", {"faults": [{"status": 503}]})
    retried = messaging.send(messaging.Message(token=token, data={"n": "3"}))
    results["after_503"] = retried
    check("send through a 503", retried.startswith("projects/%s/messages/" % project), retried)

    # A Firebase Installation ID target (firebase-admin 7.5+ has Message.fid).
    if "fid" in messaging.Message.__init__.__code__.co_varnames:
        fid = control("POST", "/devices", {"projectId": project, "kind": "fid"})["token"]
        sent = messaging.send(messaging.Message(fid=fid, notification=messaging.Notification(title="FID")))
        inbox = control("GET", "/devices/%s/messages" % fid)["messages"]
        results["fid"] = sent
        check("send to a FID", len(inbox) == 1 and inbox[0]["title"] == "FID", json.dumps(inbox))

    # An uninstalled app's token.
    gone = control("POST", "/devices", {"projectId": project, "kind": "token"})["token"]
    control("DELETE", "/devices/" + gone)
    try:
        messaging.send(messaging.Message(token=gone, data={"a": "b"}))
        check("unregistered", False, "no error raised")
    except messaging.UnregisteredError as error:
        results["unregistered"] = type(error).__name__
    except Exception as error:  # noqa: BLE001 - report what came instead
        check("unregistered", False, "%s: %s" % (type(error).__name__, error))

    # A token FCM never issued.
    try:
        messaging.send(messaging.Message(token="not-a-token", data={"a": "b"}))
        check("invalid token", False, "no error raised")
    except exceptions.InvalidArgumentError as error:
        results["invalid"] = type(error).__name__
        check("invalid token message", "not a valid FCM registration token" in str(error), str(error))
    except Exception as error:  # noqa: BLE001
        check("invalid token", False, "%s: %s" % (type(error).__name__, error))

    results["failures"] = failures
    print(json.dumps(results, sort_keys=True))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
