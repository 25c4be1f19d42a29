#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""herald-sw.js in Chromium (driven by Selenium), fed through the DevTools protocol: Chromium cannot
subscribe offline (its push service is Google's), but `ServiceWorker.deliverPushMessage` hands a
plaintext push straight to a service worker's `push` event.

The push is Herald's own: a notification is sent to a virtual browser of Herald's Web Push
emulator, whose inbox holds the decrypted payload (with its real receipt id); that exact text is
delivered to the page's worker, which loads herald-sw.js as Herald serves it at /sdk/. Checked:
- the declarative payload is shown with its title, body and action (the page's
  `registration.getNotifications()`), and its receipt reaches Herald: `received`; a click on the
  action (through herald-sw.js's handler) picks the action's URL and Herald records `opened`;
- a push that is not a declarative one (plain text) is still shown, as the generic notification.

Environment: HERALD_URL, HERALD_ADMIN_KEY (or HERALD_APP, HERALD_REGISTER_KEY, HERALD_SEND_KEY),
HERALD_WEBPUSH_EMULATOR, HERALD_PAGE_PORT (Herald lists its origin with --web-origin),
HERALD_CHROMIUM, HERALD_CHROMEDRIVER. Prints "chromium sw passed".
"""
import json
import os
import signal
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import websocket  # websocket-client: a dependency of Selenium's
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from firefox_webpush_test import BASE, EMULATOR, EVENTS, HANG_GUARD, PAGE_PORT, call_ok, check, follow, give_up, keys, refused, say, token_for

PAGE = """<!doctype html>
<meta charset="utf-8">
<title>herald-sw.js in Chromium</title>
<script>
navigator.serviceWorker.register("/sw.js").then(() => navigator.serviceWorker.ready).then(() => { window.heraldReady = true; })
  .catch((error) => { window.heraldError = String(error); });
// What the page's worker shows, as the page sees it.
window.shownNotifications = async () => (await (await navigator.serviceWorker.ready).getNotifications()).map((n) => ({
  title: n.title, body: n.body, tag: n.tag, data: n.data, actions: (n.actions || []).map((a) => ({ action: a.action, title: a.title })),
}));
</script>
"""

# The app's worker, test-only: herald-sw.js as Herald serves it, configured in the worker (this
# browser never subscribes, so the page's SDK never writes the configuration), plus reports.
WORKER = """importScripts(__SDK__);
self.herald.configure(__CONFIG__);
const report = (kind, value) => fetch("/report/" + kind, { method: "POST", body: JSON.stringify(value) });
const show = self.registration.showNotification;
self.registration.showNotification = async function (title, options) {
  try {
    await show.call(this, title, options);
    await report("shown", { title, options });
  } catch (error) {
    await report("show-failed", { title, error: String(error) });
    throw error;
  }
};
self.heraldOnNotificationClick = async ({ url, action }) => { await report("clicked", { url, action }); return true; };
self.addEventListener("message", (event) => event.waitUntil((async () => {
  const wanted = event.data && event.data.heraldTestClick;
  if (!wanted) return;
  const shown = (await self.registration.getNotifications()).find((n) => n.title === wanted.title);
  if (!shown) return report("clicked", { missing: wanted.title });
  await self.herald.handleNotificationClick({ notification: shown, action: wanted.action || "" });
})()));
"""


def serve_page(config):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *arguments):
            pass

        def reply(self, status, body, kind):
            data = body.encode()
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.send_header("cache-control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/":
                return self.reply(200, PAGE, "text/html; charset=utf-8")
            if self.path == "/sw.js":
                worker = WORKER.replace("__SDK__", json.dumps(BASE + "/sdk/herald-sw.js")).replace("__CONFIG__", json.dumps(config))
                return self.reply(200, worker, "text/javascript")
            self.reply(404, "{}", "application/json")

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path.startswith("/report/"):
                EVENTS.add("page:" + self.path[len("/report/"):], json.loads(body or b"null"))
                return self.reply(200, "{}", "application/json")
            self.reply(404, "{}", "application/json")

    server = ThreadingHTTPServer(("127.0.0.1", PAGE_PORT), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class DevTools:
    """A second DevTools client beside chromedriver's: ServiceWorker's events, which Selenium's
    execute_cdp_cmd cannot return."""

    def __init__(self, address):
        with urllib.request.urlopen(f"http://{address}/json/version", timeout=HANG_GUARD) as answer:
            url = json.load(answer)["webSocketDebuggerUrl"]
        self.socket = websocket.create_connection(url, timeout=HANG_GUARD, suppress_origin=True)
        self.sequence = 0
        self.events = []

    def send(self, method, params=None, session=None):
        self.sequence += 1
        message = {"id": self.sequence, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(self.socket.recv())
            if reply.get("id") == self.sequence:
                check("error" not in reply, f"{method}: {reply.get('error')}")
                return reply.get("result", {})
            self.events.append(reply)

    def event(self, method, predicate):
        """The first event `method` whose params predicate accepts (the socket's timeout is the hang guard)."""
        while True:
            for event in self.events:
                if event.get("method") == method and predicate(event.get("params", {})):
                    return event["params"]
            self.events.append(json.loads(self.socket.recv()))


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("HERALD_CHROMIUM", "/usr/bin/chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1000,800"):
        options.add_argument(argument)
    service = Service(executable_path=os.environ.get("HERALD_CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(HANG_GUARD)
    driver.set_script_timeout(HANG_GUARD)
    return driver


def main():
    app, register_key, send_key = keys("webc")
    follow(EMULATOR + "/emulator/events", "emulator")
    follow(BASE + f"/v1/apps/{app}/events?types=delivery.sent,delivery.failed,delivery.received,delivery.opened", "herald", key=send_key)

    # Herald's payload for a browser: a virtual browser of the emulator, subscribed with the app's
    # VAPID key, registered as a page would, sent a notification; its inbox holds the plaintext.
    key = call_ok(BASE, "GET", f"/v1/apps/{app}/webpush/key", key=register_key)["publicKey"]
    virtual = call_ok(EMULATOR, "POST", "/emulator/browsers", {"personality": "fcm", "applicationServerKey": key})
    subscription = {"endpoint": virtual["subscription"]["endpoint"], "keys": virtual["subscription"]["keys"]}
    device = call_ok(BASE, "POST", f"/v1/apps/{app}/registrations", {"transport": "webpush", "subscription": subscription, "platform": "web"}, key=register_key)
    check(device["token"] == token_for(subscription["endpoint"]), f"the device: {device}")
    server, origin = serve_page({"server": BASE, "app": app, "registerKey": register_key})
    link = origin + "/orders/7"
    reply_url = origin + "/orders/7/reply"
    sent = call_ok(BASE, "POST", f"/v1/apps/{app}/notifications", {
        "audience": {"tokens": [device["token"]]}, "title": "Table ready", "body": "Your table for two is ready", "link": link,
        "data": {"table": "12"},
        "webpush": {"notification": {"actions": [{"action": "reply", "title": "On my way", "navigate": reply_url}]}},
    }, key=send_key)
    notification = sent["id"]
    delivered = EVENTS.wait("the virtual browser's message", lambda s, v: s == "emulator" and v.get("type") == "delivered" and v.get("browser") == virtual["id"], refused(notification))
    text = delivered["text"]
    payload = json.loads(text)
    check(payload.get("web_push") == 8030 and payload["notification"].get("title") == "Table ready" and payload.get("hr"), f"Herald's payload: {text}")
    say(f"Herald's payload, as the emulator decrypted it: {text}")

    driver = browser()
    try:
        driver.execute_cdp_cmd("Browser.grantPermissions", {"origin": origin, "permissions": ["notifications"]})
        driver.get(origin + "/")
        WebDriverWait(driver, HANG_GUARD).until(lambda d: d.execute_script("return window.heraldReady || window.heraldError"))
        check(driver.execute_script("return window.heraldReady === true"), f"the worker: {driver.execute_script('return window.heraldError')}")
        devtools = DevTools(driver.capabilities["goog:chromeOptions"]["debuggerAddress"])
        targets = devtools.send("Target.getTargets")["targetInfos"]
        page = next(target for target in targets if target["type"] == "page" and target["url"].startswith(origin))
        session = devtools.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
        devtools.send("ServiceWorker.enable", session=session)
        registration = devtools.event(
            "ServiceWorker.workerRegistrationUpdated",
            lambda params: any(r["scopeURL"] == origin + "/" and not r["isDeleted"] for r in params["registrations"]),
        )
        registration_id = next(r["registrationId"] for r in registration["registrations"] if r["scopeURL"] == origin + "/")

        # Herald's declarative payload: shown as declared, its receipt reported.
        devtools.send("ServiceWorker.deliverPushMessage", {"origin": origin, "registrationId": registration_id, "data": text}, session=session)
        shown = EVENTS.wait("the worker's notification", lambda s, v: s in ("page:shown", "page:show-failed"))
        check(shown.get("title") == "Table ready", f"shown: {shown}")
        listed = driver.execute_async_script("window.shownNotifications().then(arguments[0])")
        check(len(listed) == 1, f"the page sees one notification: {listed}")
        shown = listed[0]
        check(shown["title"] == "Table ready" and shown["body"] == "Your table for two is ready", f"the notification: {shown}")
        check(shown["actions"] == [{"action": "reply", "title": "On my way"}], f"its action: {shown['actions']}")
        check(shown["data"]["herald"]["hr"] == payload["hr"] and shown["data"]["herald"]["navigate"] == link, f"what it keeps for a click: {shown['data']}")
        say(f"shown: {shown['title']!r} / {shown['body']!r}, action {shown['actions'][0]['title']!r}")
        received = EVENTS.wait("Herald's delivery.received", lambda s, v: s == "herald" and v.get("type") == "delivery.received" and v.get("notificationId") == notification)
        check(received["token"] == device["token"], f"received: {received}")
        say("Herald recorded it received")
        driver.execute_script("navigator.serviceWorker.controller ? navigator.serviceWorker.controller.postMessage(arguments[0]) : navigator.serviceWorker.ready.then((r) => r.active.postMessage(arguments[0]))",
                              {"heraldTestClick": {"title": "Table ready", "action": "reply"}})
        clicked = EVENTS.wait("the worker's click", lambda s, v: s == "page:clicked")
        check(clicked.get("url") == reply_url and clicked.get("action") == "reply", f"the click: {clicked}")
        opened = EVENTS.wait("Herald's delivery.opened", lambda s, v: s == "herald" and v.get("type") == "delivery.opened" and v.get("notificationId") == notification)
        check(opened.get("action") == "reply", f"opened: {opened}")
        say("a click on the action: its URL chosen, Herald recorded it opened with the action")

        # A push that is not a declarative one: still a notification (never a silent push).
        devtools.send("ServiceWorker.deliverPushMessage", {"origin": origin, "registrationId": registration_id, "data": "Plain text, not JSON"}, session=session)
        generic = EVENTS.wait("the generic notification", lambda s, v: s in ("page:shown", "page:show-failed") and v.get("title") != "Table ready")
        check(generic.get("title") == "New notification" and generic["options"].get("body") == "Plain text, not JSON", f"generic: {generic}")
        titles = sorted(n["title"] for n in driver.execute_async_script("window.shownNotifications().then(arguments[0])"))
        check(titles == ["New notification"], f"the page sees the generic one (the clicked one was closed): {titles}")
        say("a plain-text push: shown as the generic notification")
        print("chromium sw passed", flush=True)
    finally:
        driver.quit()
        server.shutdown()


if __name__ == "__main__":
    # The caller's own bound is longer: this one quits Chromium first.
    signal.signal(signal.SIGALRM, give_up)
    signal.signal(signal.SIGTERM, give_up)
    signal.alarm(330)
    try:
        main()
    except AssertionError as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
