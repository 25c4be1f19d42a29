#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Web Push end to end in a real browser: headless Firefox ESR subscribes through Herald's web SDK
(herald-web.js, as Herald serves it at /sdk/) against Herald's built-in Web Push emulator, which
speaks Firefox's own push protocol (autopush, over a WebSocket). Herald encrypts (RFC 8291) and
sends (RFC 8030, VAPID); Firefox decrypts with its own code and hands the push to herald-sw.js.

Checked, each by an event (the waits only have a hang guard):
1. the page subscribes with a user assertion the "app's backend" (this script, with the send key)
   minted for the endpoint; Herald answers a `wp:` device for the user;
2. a notification sent to the user: Firefox acks it with code 100 (decrypted) at the emulator,
   the service worker shows its title, body and action, Herald records `received` (a receipt
   reported by herald-sw.js), and a click on its action is recorded `opened` with the action,
   the worker choosing the action's navigate URL;
3. the negative: a second subscription registered with another `auth` secret than the browser
   holds — Herald encrypts for the wrong secret, Firefox acks 101 (decryption error), nothing is
   shown, nothing is received; a notification sent after it to the good subscription still is
   (so the check can fail, and did not fail for another reason);
4. with the admin key, the app rotates its VAPID key: the page's next subscribe() replaces the
   subscription (Firefox unregisters the old channel, Herald loses the old token) and the new one
   receives;
5. the browser renews the subscription (pushsubscriptionchange, as test code raises it):
   herald-sw.js subscribes again, registers it for the user with an assertion from the backend's
   URL, deletes the old token, and the new subscription receives;
6. logout(): a push to the user reaches no device; unsubscribe(): the device is gone from Herald
   and Firefox unregisters the channel;
7. a refusal reaches the page with Herald's code (`user_assertion_required` for a user bound
   without an assertion): Herald answers CORS on its error answers too.

No driver (no geckodriver, no Marionette): a fresh profile's user.js points Firefox's push
service at the emulator, and the test page reports to this script's HTTP server.

Environment:
  HERALD_URL                  Herald's base URL
  HERALD_ADMIN_KEY            makes the app "web", its user secret and its register and send keys;
                              or give HERALD_APP, HERALD_REGISTER_KEY and HERALD_SEND_KEY (an app
                              with a user secret)
  HERALD_WEBPUSH_EMULATOR     the Web Push emulator's origin (http://127.0.0.1:P; its WebSocket is ws://…/)
  HERALD_PAGE_PORT            the port of this script's page server; Herald must list its origin
                              (`herald serve --web-origin http://127.0.0.1:PORT`)
  HERALD_FIREFOX              default firefox-esr
  HERALD_ARTIFACTS            optional: Firefox's output is written there
Exits non-zero, with the reason, on the first failed check; prints "firefox webpush passed".
"""
import base64
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BASE = os.environ["HERALD_URL"].rstrip("/")
EMULATOR = os.environ["HERALD_WEBPUSH_EMULATOR"].rstrip("/")
PAGE_PORT = int(os.environ.get("HERALD_PAGE_PORT", "0"))
FIREFOX = os.environ.get("HERALD_FIREFOX", "firefox-esr")
ARTIFACTS = os.environ.get("HERALD_ARTIFACTS")
# How long a wait may take before it is called a hang: each wait ends at its event.
HANG_GUARD = 120
START = time.monotonic()


def say(text):
    print(f"[{time.monotonic() - START:6.2f}s] {text}", flush=True)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def call(base, method, path, body=None, key=None):
    """JSON in, (status, JSON) out."""
    request = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode())
    request.add_header("content-type", "application/json")
    if key:
        request.add_header("authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=HANG_GUARD) as answer:
            text = answer.read()
            return answer.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, text.decode(errors="replace")


def call_ok(base, method, path, body=None, key=None):
    status, answer = call(base, method, path, body, key)
    check(200 <= status < 300, f"{method} {path}: {status} {answer}")
    return answer


def token_for(endpoint):
    """Herald's name for a subscription: wp: + base64url(SHA-256(endpoint))."""
    return "wp:" + base64.urlsafe_b64encode(hashlib.sha256(endpoint.encode()).digest()).rstrip(b"=").decode()


class Events:
    """Everything that happened, from every source, and a wait for what is expected."""

    def __init__(self):
        self.condition = threading.Condition()
        self.items = []

    def add(self, source, value):
        with self.condition:
            self.items.append((source, value))
            self.condition.notify_all()

    def wait(self, what, predicate, fails=None):
        """The first event (source, value) predicate accepts; fails at once on one `fails`
        accepts (a refusal that means it will never come), else after the hang guard."""
        deadline = time.monotonic() + HANG_GUARD
        with self.condition:
            while True:
                for item in self.items:
                    if predicate(*item):
                        return item[1]
                    if fails and fails(*item):
                        raise AssertionError(f"no {what}: {item}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} within {HANG_GUARD} s; seen: {self.items[-20:]}")
                self.condition.wait(left)

    def all(self, predicate):
        with self.condition:
            return [value for source, value in self.items if predicate(source, value)]


EVENTS = Events()


def follow(url, source, key=None):
    """Reads a server-sent event stream in the background: each `data:` line is an event."""

    def run():
        request = urllib.request.Request(url)
        if key:
            request.add_header("authorization", f"Bearer {key}")
        try:
            with urllib.request.urlopen(request, timeout=3600) as stream:
                EVENTS.add(source, {"type": "stream-open"})
                for raw in stream:
                    line = raw.decode().rstrip("\r\n")
                    if line.startswith("data:"):
                        try:
                            EVENTS.add(source, json.loads(line[5:].strip()))
                        except ValueError:
                            pass
        except Exception as error:  # the stream ends with the server
            EVENTS.add(source, {"type": "stream-error", "error": str(error)})

    threading.Thread(target=run, daemon=True).start()
    EVENTS.wait(f"{source} stream", lambda s, v: s == source and v.get("type") in ("stream-open", "stream-error"))
    check(not EVENTS.all(lambda s, v: s == source and v.get("type") == "stream-error"), f"{source} stream failed: {EVENTS.items}")


PAGE = """<!doctype html>
<meta charset="utf-8">
<title>Herald Web Push in Firefox</title>
<script type="module">
const config = __CONFIG__;
const report = (kind, value) => fetch("/report/" + kind, { method: "POST", body: JSON.stringify(value) });
addEventListener("unhandledrejection", (event) => report("error", { message: String(event.reason && (event.reason.stack || event.reason)) }));

async function main() {
  // Firefox's push service starts late (an idle task after startup); PushManager calls made
  // before it hang, so the page first waits for the emulator to have seen Firefox's hello (the
  // test server answers once that event came).
  await fetch("/push-ready");
  const { Herald } = await import(config.sdk);
  // The app's backend mints the assertion for the endpoint the browser got.
  const assertion = (userId) => async (endpoint) =>
    (await (await fetch("/assertion", { method: "POST", body: JSON.stringify({ userId, token: endpoint }) })).json()).assertion;
  const options = (name) => ({ server: config.server, app: config.app, registerKey: config.registerKey, serviceWorker: `/${name}/sw.js`, scope: `/${name}/` });

  // The good one also names the backend's assertion URL: its worker binds a renewed subscription with it.
  const good = new Herald({ ...options("good"), userAssertion: "/assertion" });
  const goodDevice = await good.subscribe({ userId: "u1", assertion: assertion("u1") });
  const goodState = await good.registration();

  // The corrupted one: Herald is told another auth secret than the browser holds.
  const bad = new Herald(options("bad"));
  const realFetch = window.fetch;
  window.fetch = (url, init) => {
    if (String(url).endsWith("/registrations") && init && init.body) {
      const body = JSON.parse(init.body);
      body.subscription.keys.auth = config.wrongAuth;
      init = { ...init, body: JSON.stringify(body) };
    }
    return realFetch(url, init);
  };
  let badDevice;
  try {
    badDevice = await bad.subscribe({ userId: "u2", assertion: assertion("u2") });
  } finally {
    window.fetch = realFetch;
  }
  await report("subscribed", { good: { device: goodDevice, state: goodState }, bad: { device: badDevice, state: await bad.registration() } });

  // Commands from the test: click a notification (through herald-sw.js's handler), list what is
  // shown, call the SDK as a page would (subscribe again, log out, unsubscribe).
  const sdk = { good, bad };
  for (;;) {
    const command = await (await fetch("/next-command")).json();
    const registration = command.scope && (await navigator.serviceWorker.getRegistration(command.scope));
    if (command.click) registration.active.postMessage({ heraldTestClick: command.click });
    if (command.renew) registration.active.postMessage({ heraldTestRenew: true });
    if (command.list) await report("listed", { scope: command.scope, titles: (await registration.getNotifications()).map((n) => n.title) });
    if (command.call) {
      const herald = sdk[command.herald];
      try {
        const result = command.call === "subscribe" ? await herald.subscribe({ userId: command.userId, assertion: assertion(command.userId) })
          : await herald[command.call](...(command.args || []));
        await report("called", { call: command.call, result, registration: await herald.registration() });
      } catch (error) {
        await report("called", { call: command.call, error: String(error), code: error && error.code });
      }
    }
  }
}
main().catch((error) => report("error", { message: String(error && (error.stack || error)), code: error && error.code }));
</script>
"""

# The app's service worker, test-only: herald-sw.js as Herald serves it, plus reports of what it
# shows and a click it can be asked to make.
WORKER = """importScripts(__SDK__);
const scope = new URL(self.registration.scope).pathname;
const report = (kind, value) => fetch("/report/" + kind, { method: "POST", body: JSON.stringify({ scope, ...value }) });
const show = self.registration.showNotification;
self.registration.showNotification = async function (title, options) {
  await show.call(this, title, options);
  await report("shown", { title, options });
};
self.heraldOnNotificationClick = async ({ url, action }) => { await report("clicked", { url, action }); return true; };
self.addEventListener("message", (event) => event.waitUntil((async () => {
  const wanted = event.data && event.data.heraldTestClick;
  if (!wanted) return;
  const shown = (await self.registration.getNotifications()).find((n) => n.title === wanted.title);
  if (!shown) return report("clicked", { missing: wanted.title });
  await self.herald.handleNotificationClick({ notification: shown, action: wanted.action || "" });
})()));
// The browser renewing the subscription (as when its push service expired it): the old one is
// gone, and pushsubscriptionchange comes without a new one.
self.addEventListener("message", (event) => event.waitUntil((async () => {
  if (!(event.data && event.data.heraldTestRenew)) return;
  const old = await self.registration.pushManager.getSubscription();
  await old.unsubscribe();
  try {
    const device = await self.herald.handleSubscriptionChange({ oldSubscription: old, newSubscription: null });
    await report("renewed", { old: old.endpoint, device, endpoint: (await self.registration.pushManager.getSubscription()).endpoint });
  } catch (error) {
    await report("renewed", { error: String(error), code: error.code });
  }
})()));
"""


class Page:
    """The test page's server: the page, its workers, its reports, and the app backend's assertion."""

    def __init__(self, config, send_key, app):
        self.config = config
        self.commands = []
        self.lock = threading.Condition()
        page = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *arguments):
                pass

            def reply(self, status, body, kind="application/json"):
                data = body.encode() if isinstance(body, str) else body
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.send_header("cache-control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/" or self.path.startswith("/?"):
                    return self.reply(200, PAGE.replace("__CONFIG__", json.dumps(page.config)), "text/html; charset=utf-8")
                if self.path in ("/good/sw.js", "/bad/sw.js"):
                    return self.reply(200, WORKER.replace("__SDK__", json.dumps(BASE + "/sdk/herald-sw.js")), "text/javascript")
                if self.path == "/push-ready":
                    # Answered at the event (the emulator's stream reports Firefox's hello), not polled.
                    EVENTS.wait("Firefox's hello at the emulator", lambda s, v: s == "emulator" and v.get("type") == "hello")
                    return self.reply(200, json.dumps({"ready": True}))
                if self.path == "/next-command":
                    with page.lock:
                        page.lock.wait_for(lambda: page.commands, timeout=20)
                        command = page.commands.pop(0) if page.commands else {}
                    return self.reply(200, json.dumps(command))
                if self.path.startswith("/good/") or self.path.startswith("/bad/"):
                    return self.reply(200, "<!doctype html><title>landing</title>", "text/html")
                self.reply(404, "{}")

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path == "/assertion":
                    asked = json.loads(body)
                    answer = call_ok(BASE, "POST", f"/v1/apps/{app}/user-assertions", {"userId": asked["userId"], "token": asked["token"]}, key=send_key)
                    return self.reply(200, json.dumps({"assertion": answer["assertion"]}))
                if self.path.startswith("/report/"):
                    EVENTS.add("page:" + self.path[len("/report/"):], json.loads(body or b"null"))
                    return self.reply(200, "{}")
                self.reply(404, "{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", PAGE_PORT), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def command(self, command):
        with self.lock:
            self.commands.append(command)
            self.lock.notify_all()


def keys(app="web"):
    """(app, register key, send key): given, or made with the admin key (an app `app` with a user secret)."""
    admin = os.environ.get("HERALD_ADMIN_KEY")
    if not admin:
        return os.environ["HERALD_APP"], os.environ["HERALD_REGISTER_KEY"], os.environ["HERALD_SEND_KEY"]
    call_ok(BASE, "POST", "/v1/apps", {"id": app, "bundleId": "com.example.web"}, key=admin)
    call_ok(BASE, "POST", f"/v1/apps/{app}/user-secret", key=admin)
    register = call_ok(BASE, "POST", "/v1/keys", {"scope": "register", "appId": app, "name": "web page"}, key=admin)["key"]
    send = call_ok(BASE, "POST", "/v1/keys", {"scope": "send", "appId": app, "name": "backend"}, key=admin)["key"]
    return app, register, send


def launch_firefox(url):
    """Firefox ESR, headless, on a fresh profile whose push service is the emulator; its own process group."""
    profile = tempfile.mkdtemp(prefix="herald-firefox-")
    websocket = "ws://" + EMULATOR.split("://", 1)[1] + "/"
    prefs = {
        # The push service: the emulator's WebSocket (ws: needs the testing pref).
        "dom.push.serverURL": websocket,
        "dom.push.testing.allowInsecureServerURL": True,
        # Subscribe and show notifications without a prompt.
        "permissions.default.desktop-notification": 1,
        # Firefox's own alert window: the system one (libnotify) needs a session DBus, and a push
        # that shows nothing costs quota (16, then the subscription is dropped).
        "alerts.useSystemBackend": False,
        # Quiet, offline-friendly startup.
        "browser.shell.checkDefaultBrowser": False,
        "browser.aboutwelcome.enabled": False,
        "datareporting.policy.dataSubmissionEnabled": False,
        "toolkit.telemetry.reportingpolicy.firstRun": False,
        "app.update.disabledForTesting": True,
        "browser.startup.homepage_override.mstone": "ignore",
        # The page's and the workers' console on Firefox's output (kept as an artifact).
        "devtools.console.stdout.content": True,
    }
    with open(os.path.join(profile, "user.js"), "w") as handle:
        for name, value in prefs.items():
            handle.write(f"user_pref({json.dumps(name)}, {json.dumps(value)});\n")
    log = tempfile.NamedTemporaryFile("w+", prefix="herald-firefox-", suffix=".log", delete=False)
    process = subprocess.Popen(
        [FIREFOX, "--headless", "--no-remote", "-profile", profile, url],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    return process, profile, log


def stop_firefox(process):
    """Ends Firefox's process group (it was started in a session of its own), and only it."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)
    except ProcessLookupError:
        pass


def refused(notification):
    """Whether an event says the push for `notification` will not arrive: Herald failed it, or the emulator refused a push."""
    return lambda source, value: (source == "herald" and value.get("type") == "delivery.failed" and value.get("notificationId") == notification) or (
        source == "emulator" and value.get("type") == "refused") or source == "page:error"


def no_error():
    errors = EVENTS.all(lambda source, value: source == "page:error")
    check(not errors, f"the page failed: {errors}")


def main():
    app, register_key, send_key = keys()
    wrong_auth = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()
    follow(EMULATOR + "/emulator/events", "emulator")
    follow(BASE + f"/v1/apps/{app}/events?types=delivery.sent,delivery.failed,delivery.received,delivery.opened", "herald", key=send_key)
    config = {"server": BASE, "app": app, "registerKey": register_key, "sdk": BASE + "/sdk/herald-web.js", "wrongAuth": wrong_auth}
    page = Page(config, send_key, app)
    firefox, profile, log = launch_firefox(page.origin + "/")
    say(f"Firefox started (pid {firefox.pid}); page {page.origin}")
    passed = False
    try:
        # 1. Subscribed, and registered with the user.
        EVENTS.wait("Firefox's hello at the emulator", lambda s, v: s == "emulator" and v.get("type") == "hello")
        say("Firefox's push service connected to the emulator")
        subscribed = EVENTS.wait("the page's subscriptions", lambda s, v: s == "page:subscribed", lambda s, v: s == "page:error")
        no_error()
        good, bad = subscribed["good"], subscribed["bad"]
        endpoint = good["state"]["endpoint"]
        check(endpoint.startswith(EMULATOR + "/"), f"the endpoint is the emulator's: {endpoint}")
        check(good["device"]["token"] == token_for(endpoint) == good["state"]["token"], f"the device's token: {good}")
        check(good["device"].get("transport") == "webpush" and good["device"].get("userId") == "u1", f"the device: {good['device']}")
        check(bad["device"]["token"] == token_for(bad["state"]["endpoint"]) and bad["state"]["endpoint"] != endpoint, f"the second subscription: {bad}")
        say(f"subscribed: {good['device']['token']} for u1, {bad['device']['token']} for u2 (registered with a wrong auth)")
        channels = call_ok(EMULATOR, "GET", "/emulator/firefox")["channels"]
        channel = {item["endpoint"]: item["channelID"] for item in channels}
        good_channel, bad_channel = channel.get(endpoint), channel.get(bad["state"]["endpoint"])
        check(good_channel and bad_channel, f"both channels at the emulator: {channels}")

        # 2. A notification to u1: acked 100, shown by the worker, received, opened with its action.
        link = page.origin + "/good/orders/42"
        reply_url = page.origin + "/good/orders/42/reply"
        sent = call_ok(BASE, "POST", f"/v1/apps/{app}/notifications", {
            "audience": {"users": ["u1"]}, "title": "Order shipped", "body": "It left the warehouse ✓", "link": link,
            "data": {"order": "42"},
            "webpush": {"notification": {"actions": [{"action": "reply", "title": "Reply", "navigate": reply_url}]}},
        }, key=send_key)
        first = sent["id"]
        say(f"sent {first} to u1")
        ack = EVENTS.wait("Firefox's ack of the notification", lambda s, v: s == "emulator" and v.get("type") == "ack" and v.get("channelID") == good_channel, refused(first))
        check(ack.get("code") == 100, f"Firefox acked {ack} (100 = decrypted)")
        say(f"Firefox acked {ack.get('id')} with 100 (decrypted)")
        shown = EVENTS.wait("the worker's notification", lambda s, v: s == "page:shown" and v.get("scope") == "/good/", refused(first))
        check(shown["title"] == "Order shipped" and shown["options"].get("body") == "It left the warehouse ✓", f"shown: {shown}")
        check([a.get("action") for a in shown["options"].get("actions", [])] == ["reply"], f"the action shown: {shown}")
        meta = shown["options"]["data"]["herald"]
        check(meta.get("navigate") == link and meta.get("hr"), f"what the notification keeps for a click: {meta}")
        say(f"the worker showed {shown['title']!r} / {shown['options']['body']!r} with its action")
        received = EVENTS.wait("Herald's delivery.received", lambda s, v: s == "herald" and v.get("type") == "delivery.received" and v.get("notificationId") == first)
        check(received["token"] == good["device"]["token"], f"received: {received}")
        say("Herald recorded it received (herald-sw.js's receipt)")
        page.command({"scope": "/good/", "click": {"title": "Order shipped", "action": "reply"}})
        clicked = EVENTS.wait("the worker's click", lambda s, v: s == "page:clicked")
        check(clicked.get("url") == reply_url and clicked.get("action") == "reply", f"the click opens the action's URL: {clicked}")
        opened = EVENTS.wait("Herald's delivery.opened", lambda s, v: s == "herald" and v.get("type") == "delivery.opened" and v.get("notificationId") == first)
        check(opened.get("action") == "reply", f"opened: {opened}")
        status = call_ok(BASE, "GET", f"/v1/apps/{app}/notifications/{first}", key=send_key)
        delivery = status["deliveries"][0]
        check(delivery.get("state") == "sent" and delivery.get("receivedAt") and delivery.get("openedAt") and delivery.get("action") == "reply", f"the delivery: {delivery}")
        say("a click on Reply: the worker chose its URL, Herald recorded it opened with the action")

        # 3. The negative: the wrong auth secret. Firefox cannot decrypt (101); nothing is shown.
        sent = call_ok(BASE, "POST", f"/v1/apps/{app}/notifications", {"audience": {"users": ["u2"]}, "title": "Never shown", "body": "wrong secret", "link": link}, key=send_key)
        wrong = sent["id"]
        ack = EVENTS.wait("Firefox's ack of the wrongly encrypted push", lambda s, v: s == "emulator" and v.get("type") == "ack" and v.get("channelID") == bad_channel, refused(wrong))
        check(ack.get("code") == 101, f"Firefox acked {ack} (101 = decryption error)")
        say("Firefox acked the push encrypted for the wrong secret with 101 (decryption error)")
        # A push after it on the same socket, to the good subscription, is shown: by then the
        # wrong one would have been too.
        sent = call_ok(BASE, "POST", f"/v1/apps/{app}/notifications", {"audience": {"users": ["u1"]}, "title": "Still here", "body": "after the bad one", "link": link}, key=send_key)
        after = sent["id"]
        EVENTS.wait("the worker's second notification", lambda s, v: s == "page:shown" and v.get("title") == "Still here", refused(after))
        EVENTS.wait("Herald's delivery.received of the second", lambda s, v: s == "herald" and v.get("type") == "delivery.received" and v.get("notificationId") == after)
        page.command({"scope": "/bad/", "list": True})
        listed = EVENTS.wait("the second subscription's notifications", lambda s, v: s == "page:listed" and v.get("scope") == "/bad/")
        check(listed["titles"] == [], f"nothing shown for the wrongly encrypted push: {listed}")
        check(not EVENTS.all(lambda s, v: s == "page:shown" and v.get("scope") == "/bad/"), "the worker showed nothing for it")
        check(not EVENTS.all(lambda s, v: s == "herald" and v.get("type") == "delivery.received" and v.get("notificationId") == wrong), "and reported nothing")
        firefox_state = call_ok(EMULATOR, "GET", "/emulator/firefox")
        codes = {item["channelID"]: [ack["code"] for ack in item.get("acks", [])] for item in firefox_state["channels"]}
        check(codes.get(good_channel) == [100, 100] and codes.get(bad_channel) == [101], f"the emulator's acks per channel: {codes}")
        say("after it, a push to the good subscription is shown and received: the 101 was the secret's, nothing else's")

        def sdk(call, herald="good", fails=False, **arguments):
            page.command({"herald": herald, "call": call, **arguments})
            done = EVENTS.wait(f"the page's {call}()", lambda s, v: s == "page:called" and v.get("call") == call and id(v) not in seen)
            seen.add(id(done))
            check(("error" in done) == fails, f"{call}(): {done}")
            return done

        seen = set()
        admin = os.environ.get("HERALD_ADMIN_KEY")
        if admin:
            # 4. The app rotates its VAPID key: the old subscription stays bound to the old key;
            # the page's next subscribe() unsubscribes it, subscribes with the new key, registers
            # the new one (a new assertion) and deletes the old token.
            before = call_ok(BASE, "GET", f"/v1/apps/{app}/webpush/key", key=register_key)["publicKey"]
            after_key = call_ok(BASE, "POST", f"/v1/apps/{app}/webpush/key", key=admin)["publicKey"]
            check(after_key != before, f"a new VAPID key: {after_key}")
            moved = sdk("subscribe", userId="u1")
            new_endpoint = moved["registration"]["endpoint"]
            check(new_endpoint != endpoint and moved["result"]["token"] == token_for(new_endpoint) and moved["result"]["userId"] == "u1", f"after the rotation: {moved}")
            EVENTS.wait("Firefox's unregister of the old channel", lambda s, v: s == "emulator" and v.get("type") == "unregister" and v.get("channelID") == good_channel)
            status, old = call(BASE, "GET", f"/v1/apps/{app}/devices/{good['device']['token']}", key=send_key)
            check(status == 404 or (status == 200 and not old.get("active")), f"the old token after the rotation: {status} {old}")
            new_channel = {item["endpoint"]: item["channelID"] for item in call_ok(EMULATOR, "GET", "/emulator/firefox")["channels"]}.get(new_endpoint)
            sent = call_ok(BASE, "POST", f"/v1/apps/{app}/notifications", {"audience": {"users": ["u1"]}, "title": "New key", "body": "after the rotation", "link": link}, key=send_key)
            rotated = sent["id"]
            ack = EVENTS.wait("Firefox's ack after the rotation", lambda s, v: s == "emulator" and v.get("type") == "ack" and v.get("channelID") == new_channel, refused(rotated))
            check(ack.get("code") == 100, f"acked {ack}")
            EVENTS.wait("the worker's notification after the rotation", lambda s, v: s == "page:shown" and v.get("title") == "New key", refused(rotated))
            say("the VAPID key rotated: the page's subscribe() moved to a new subscription (old token deleted), which receives")

        # 5. The browser renews the subscription (pushsubscriptionchange): herald-sw.js subscribes
        # again with the app's key, registers it for the same user (an assertion from the
        # backend's URL) and deletes the old token; the new one receives.
        state = sdk("registration")["result"]
        page.command({"scope": "/good/", "renew": True})
        renewed = EVENTS.wait("the worker's renewal", lambda s, v: s == "page:renewed")
        check("error" not in renewed and renewed["old"] == state["endpoint"] and renewed["endpoint"] != state["endpoint"], f"renewed: {renewed}")
        check(renewed["device"]["token"] == token_for(renewed["endpoint"]) and renewed["device"]["userId"] == "u1", f"registered by the worker: {renewed['device']}")
        status, old = call(BASE, "GET", f"/v1/apps/{app}/devices/{state['token']}", key=send_key)
        check(status == 404 or (status == 200 and not old.get("active")), f"the old token after the renewal: {status} {old}")
        renewed_channel = {item["endpoint"]: item["channelID"] for item in call_ok(EMULATOR, "GET", "/emulator/firefox")["channels"]}.get(renewed["endpoint"])
        sent = call_ok(BASE, "POST", f"/v1/apps/{app}/notifications", {"audience": {"users": ["u1"]}, "title": "Renewed", "body": "a new subscription", "link": link}, key=send_key)
        ack = EVENTS.wait("Firefox's ack after the renewal", lambda s, v: s == "emulator" and v.get("type") == "ack" and v.get("channelID") == renewed_channel, refused(sent["id"]))
        check(ack.get("code") == 100, f"acked {ack}")
        EVENTS.wait("the worker's notification after the renewal", lambda s, v: s == "page:shown" and v.get("title") == "Renewed", refused(sent["id"]))
        check(sdk("registration")["result"]["endpoint"] == renewed["endpoint"], "the page sees the renewed subscription")
        say("pushsubscriptionchange: the worker subscribed again, registered it for u1 (old token deleted), which receives")

        # 6. Logout keeps the subscription without a user: a push to the user reaches nothing.
        out = sdk("logout")
        check(out["result"].get("userId") is None and out["registration"]["userId"] is None, f"logged out: {out}")
        sent = call_ok(BASE, "POST", f"/v1/apps/{app}/notifications", {"audience": {"users": ["u1"]}, "title": "Nobody", "body": "logged out", "link": link}, key=send_key)
        check(sent["deliveries"] == 0, f"a push to the logged-out user: {sent}")
        # 7. Unsubscribe: gone from Herald and from the browser (Firefox unregisters its channel).
        endpoint_now = out["registration"]["endpoint"]
        channel_now = {item["endpoint"]: item["channelID"] for item in call_ok(EMULATOR, "GET", "/emulator/firefox")["channels"]}.get(endpoint_now)
        gone = sdk("unsubscribe")
        check(gone["result"] is True and gone["registration"] is None, f"unsubscribed: {gone}")
        status, device = call(BASE, "GET", f"/v1/apps/{app}/devices/{token_for(endpoint_now)}", key=send_key)
        check(status == 404 or (status == 200 and not device.get("active")), f"the device after unsubscribe: {status} {device}")
        EVENTS.wait("Firefox's unregister", lambda s, v: s == "emulator" and v.get("type") == "unregister" and v.get("channelID") == channel_now)
        say("logout: the user's pushes reach nothing; unsubscribe: the device is gone, Firefox unregistered")

        # 8. Herald's refusals reach the page with their code: binding another user without an
        # assertion (the second page's SDK has no assertion source) is user_assertion_required —
        # readable only if Herald answers CORS on its error answers too.
        refusal = sdk("setUser", herald="bad", fails=True, args=["u3"])
        check(refusal.get("code") == "user_assertion_required",
              f"the refusal the page saw: {refusal} (\"network\" means the error answer had no Access-Control-Allow-Origin)")
        say("a refusal reaches the page with Herald's code (user_assertion_required)")
        no_error()
        passed = True
        say("firefox webpush passed")
    finally:
        stop_firefox(firefox)
        shutil.rmtree(profile, ignore_errors=True)
        page.server.shutdown()
        log.flush()
        log.seek(0)
        output = log.read()
        log.close()
        os.unlink(log.name)
        if ARTIFACTS:
            os.makedirs(ARTIFACTS, exist_ok=True)
            with open(os.path.join(ARTIFACTS, "firefox-webpush.log"), "w") as handle:
                handle.write(output)
        if not passed:
            print("--- Firefox's output (last 60 lines)\n" + "\n".join(output.splitlines()[-60:]), file=sys.stderr)


def give_up(signum, frame):
    # Inside main's try: its finally ends Firefox (a kill from outside would leave it running).
    raise AssertionError(f"signal {signum}: the whole run took too long, or was stopped")


if __name__ == "__main__":
    # The caller's own bound is longer: this one ends Firefox first.
    signal.signal(signal.SIGALRM, give_up)
    signal.signal(signal.SIGTERM, give_up)
    signal.alarm(330)
    try:
        main()
    except AssertionError as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
