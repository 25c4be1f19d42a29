#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Android in the dashboard, in a real browser (Chromium driven by Selenium), against a running
`herald serve` whose FCM messages go to its built-in FCM emulator: upload a Firebase service
account (a refused one first, shown with its code), check it ("key and project OK"), register an
Android phone and find its platform in the devices list and on the overview, preview the Android
message on the send form, send it and see it delivered to the phone. Then the web beside it: the
app's VAPID key on its page, a browser of the built-in Web Push emulator subscribed with it and
registered, its platform (Web) and masked endpoint in the devices list and on its page (never the
endpoint or its keys), the overview's count, the web message in the send preview (and why none
goes to browsers without a title), the push decrypted by the browser as previewed, and a new key.

Environment: HERALD_URL, HERALD_ADMIN_KEY, HERALD_APP (an existing app id, also the emulated
Firebase project's), HERALD_FCM_EMULATOR (the built-in FCM emulator's origin), HERALD_ARTIFACTS
(a directory for screenshots), HERALD_WEBPUSH_EMULATOR (the built-in Web Push emulator's origin). Exits non-zero, with the reason, on the first failed check.
"""
import json
import os
import sys
import tempfile
import urllib.error

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from dashboard_test import APP, BASE, HANG_GUARD, browser, call_json, check, check_fits, shot, sign_in, submit

KEY = os.environ["HERALD_ADMIN_KEY"]
FCM = os.environ["HERALD_FCM_EMULATOR"].rstrip("/")
WEB = os.environ["HERALD_WEBPUSH_EMULATOR"].rstrip("/")
RECEIPT_PLACEHOLDER = "<receipt id of each device>"


def main():
    driver = browser()
    wait = WebDriverWait(driver, HANG_GUARD)
    try:
        sign_in(driver)

        # Without a service account of its own, the app sends to the built-in FCM emulator.
        driver.get(f"{BASE}/dashboard/apps/{APP}")
        credential = driver.find_element(By.ID, "fcm-credential").text
        check(credential == "built-in FCM emulator", f"the FCM credential before an upload: {credential!r}")

        # A file that is not a service account is refused, with its code.
        driver.find_element(By.ID, "fcm-text").send_keys('{"type": "service_account"}')
        submit(driver, driver.find_element(By.ID, "upload-fcm"))
        error = driver.find_element(By.ID, "fcm-error").text
        check(error.startswith("bad_service_account:"), f"a refused service account: {error!r}")
        shot(driver, "android-01-refused")

        # A service account of the emulated Firebase project, as the Firebase console downloads it:
        # its token_uri is the emulator's.
        account = call_json(FCM, "POST", "/emulator/service-accounts", {"projectId": APP})
        check(account["project_id"] == APP and account["token_uri"].startswith(FCM), f"the emulator's service account: {account['token_uri']}")
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(account, handle, indent=2)
            path = handle.name
        try:
            driver.find_element(By.ID, "fcm-file").send_keys(path)
            submit(driver, driver.find_element(By.ID, "upload-fcm"))
        finally:
            os.unlink(path)
        notice = driver.find_element(By.ID, "fcm-notice").text
        check("saved" in notice, f"after the upload: {notice!r}")
        credential = driver.find_element(By.ID, "fcm-credential").text
        check(APP in credential and account["client_email"] in credential and account["private_key_id"] in credential, f"shown: {credential!r}")
        key_lines = [line for line in account["private_key"].splitlines() if line and not line.startswith("-----")]
        check(len(key_lines) > 2 and not any(line in driver.page_source for line in key_lines), "the key is never shown")

        # The check: an access token from token_uri, then a validate-only message FCM refuses for its token.
        submit(driver, driver.find_element(By.ID, "check-fcm"))
        result = driver.find_element(By.ID, "fcm-check-result").text
        check("key and project ok" in result.lower(), f"the check: {result!r}")
        check("built-in" not in result, f"checked with the app's own account: {result!r}")
        shot(driver, "android-02-checked")

        # An Android phone of the project, registered as the app would (a register key, its token).
        key = call_json(BASE, "POST", "/v1/keys", {"scope": "register", "appId": APP, "name": "android"}, key=KEY)["key"]
        token = call_json(FCM, "POST", "/emulator/devices", {"projectId": APP})["token"]
        registered = call_json(BASE, "POST", f"/v1/apps/{APP}/registrations", {"transport": "fcm", "token": token}, key=key)
        check(registered["token"] == "fcm:" + token and registered["transport"] == "fcm", f"registered: {registered}")

        # Its platform in the devices list, and on its page.
        driver.get(f"{BASE}/dashboard/apps/{APP}/devices")
        link = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, f"#devices a[href$='fcm:{token}']")))
        row = link.find_element(By.XPATH, "./ancestor::tr")
        platform = row.find_element(By.CSS_SELECTOR, "td.platform").text
        check(platform == "fcm", f"the phone's platform in the list: {platform!r}")
        shot(driver, "android-03-devices")
        submit(driver, link)
        details = {dt.text: dd.text for dt, dd in zip(driver.find_elements(By.CSS_SELECTOR, "dl.pairs dt"), driver.find_elements(By.CSS_SELECTOR, "dl.pairs dd"))}
        check(details.get("Platform") == "fcm" and details.get("Environment") == "fcm", f"the device's page: {details}")

        # The overview counts it among the active Android devices.
        driver.get(BASE + "/dashboard")
        count = driver.find_element(By.ID, "devices-fcm").text
        check(count == "1", f"active FCM devices on the overview: {count!r}")

        # The send form: the Android message, previewed live, then sent to the phone.
        driver.get(f"{BASE}/dashboard/apps/{APP}/send?to=token&target=fcm:{token}")
        driver.find_element(By.ID, "f-title").send_keys("Order shipped")
        driver.find_element(By.ID, "f-body").send_keys("It left the warehouse")
        # The preview follows the typing (each keystroke asks again): wait for what was typed last.
        wait.until(lambda d: "It left the warehouse" in d.find_element(By.ID, "preview-android").text)
        android = json.loads(driver.find_element(By.ID, "preview-android").text)
        check(android["message"]["token"] == token, f"the previewed message's target: {android}")
        check(android["message"]["notification"] == {"title": "Order shipped", "body": "It left the warehouse"}, f"previewed: {android}")
        check("bytes" in driver.find_element(By.ID, "preview-android-note").text, "the Android message's size")
        # A VoIP push is APNs's alone: the preview says so.
        Select(driver.find_element(By.ID, "f-pushType")).select_by_value("voip")
        wait.until(lambda d: d.find_element(By.ID, "preview-android-note").text.startswith("APNs only"))
        check(driver.find_element(By.ID, "preview-android").text == "", "no Android message for a VoIP push")
        Select(driver.find_element(By.ID, "f-pushType")).select_by_value("")
        # The preview follows the typing (each keystroke asks again): wait for what was typed last.
        wait.until(lambda d: "It left the warehouse" in d.find_element(By.ID, "preview-android").text)
        shot(driver, "android-04-preview")
        submit(driver, driver.find_element(By.ID, "send-button"))
        wait.until(EC.presence_of_element_located((By.ID, "delivery-log")))

        def sent(d):
            d.refresh()
            rows = d.find_elements(By.CSS_SELECTOR, "#delivery-log tbody tr")
            return rows and "sent" in rows[0].find_element(By.CSS_SELECTOR, ".state").text

        wait.until(sent)
        row = driver.find_element(By.CSS_SELECTOR, "#delivery-log tbody tr")
        check(row.find_element(By.CSS_SELECTOR, "td.platform").text == "fcm", "the delivery's platform in the log")
        shot(driver, "android-05-delivered")
        messages = call_json(FCM, "GET", f"/emulator/devices/{token}/messages")["messages"]
        check(len(messages) == 1 and messages[0]["title"] == "Order shipped", f"the phone's messages: {messages}")

        web(driver, wait, key)

        # At phone size, nothing wider than the 390 px viewport.
        driver.set_window_size(390, 844)
        for path in (f"/dashboard/apps/{APP}", f"/dashboard/apps/{APP}/devices", "/dashboard"):
            driver.get(BASE + path)
            check_fits(driver, path)
        shot(driver, "android-06-phone")
    except Exception:
        shot(driver, "android-failure")
        print("page at failure:", driver.current_url, file=sys.stderr)
        raise
    finally:
        driver.quit()
    print("dashboard android passed")


def web(driver, wait, register_key):
    """A browser beside the phone: subscribed with the app's VAPID key, listed, previewed, pushed to; then a new key."""
    # The app's key, made on the page's first view: the API answers the same one.
    driver.get(f"{BASE}/dashboard/apps/{APP}")
    vapid = driver.find_element(By.ID, "webpush-key").text
    check(call_json(BASE, "GET", f"/v1/apps/{APP}/webpush/key", key=register_key)["publicKey"] == vapid, f"the page's VAPID key: {vapid!r}")
    check(driver.find_element(By.ID, "webpush-browsers").text == "0", "no browser yet")

    # A browser of the emulator subscribes with it; the page registers the subscription.
    made = call_json(WEB, "POST", "/emulator/browsers", {"personality": "mozilla", "applicationServerKey": vapid})
    # What Herald's SDK sends of PushSubscription.toJSON(): the endpoint and the keys.
    subscription = {"endpoint": made["subscription"]["endpoint"], "keys": made["subscription"]["keys"]}
    try:
        registered = call_json(BASE, "POST", f"/v1/apps/{APP}/registrations", {"transport": "webpush", "subscription": subscription}, key=register_key)
    except urllib.error.HTTPError as error:
        raise AssertionError(f"the subscription's registration was refused: {error.code} {error.read().decode()}") from error
    token, masked = registered["token"], registered["endpoint"]
    check(token.startswith("wp:") and registered["transport"] == "webpush" and masked.endswith("…"), f"registered: {registered}")
    secrets = (subscription["endpoint"], subscription["keys"]["p256dh"], subscription["keys"]["auth"])

    # Listed as Web with its endpoint masked; never the endpoint or its keys.
    driver.get(f"{BASE}/dashboard/apps/{APP}/devices")
    link = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, f"#devices a[href$='{token}']")))
    row = link.find_element(By.XPATH, "./ancestor::tr")
    check(row.find_element(By.CSS_SELECTOR, "td.platform").text == "Web", f"the browser's platform: {row.text!r}")
    check(row.find_element(By.CSS_SELECTOR, ".endpoint").text == masked, f"the masked endpoint: {row.text!r}")
    check(not any(secret in driver.page_source for secret in secrets), "the list shows no endpoint or key")
    shot(driver, "web-01-devices")
    submit(driver, link)
    details = {dt.text: dd.text for dt, dd in zip(driver.find_elements(By.CSS_SELECTOR, "dl.pairs dt"), driver.find_elements(By.CSS_SELECTOR, "dl.pairs dd"))}
    check(details.get("Platform") == "Web" and details.get("Transport") == "webpush", f"the browser's page: {details}")
    check(details.get("Endpoint (masked)") == masked, f"the browser's page: {details}")
    check(not any(secret in driver.page_source for secret in secrets), "the device page shows no endpoint or key")

    driver.get(BASE + "/dashboard")
    count = driver.find_element(By.ID, "devices-webpush").text
    check(count == "1", f"active Web Push devices on the overview: {count!r}")

    # The send form: without a title, why no browser gets it (the refusal's words); with one, the
    # exact message the browser decrypts, then sent to it.
    driver.get(f"{BASE}/dashboard/apps/{APP}/send?to=token&target={token}")
    driver.find_element(By.ID, "f-body").send_keys("It left the warehouse")
    wait.until(lambda d: "webpush_needs_title" in d.find_element(By.ID, "preview-web-note").text)
    note = driver.find_element(By.ID, "preview-web-note").text
    check(note.startswith("Not for browsers: browsers would refuse it (webpush_needs_title): a web push needs a title"), f"untitled: {note!r}")
    check(driver.find_element(By.ID, "preview-web").text == "", "no web message without a title")
    driver.find_element(By.ID, "f-title").send_keys("Order shipped")
    wait.until(lambda d: "Order shipped" in d.find_element(By.ID, "preview-web").text)
    previewed = driver.find_element(By.ID, "preview-web").text
    message = json.loads(previewed)
    check(message["web_push"] == 8030 and message["notification"]["title"] == "Order shipped", f"previewed: {previewed}")
    check(message["notification"]["body"] == "It left the warehouse", f"previewed: {previewed}")
    check(driver.find_element(By.ID, "preview-web-note").text.startswith(f"{len(previewed.encode())} bytes"), "the web message's size")
    Select(driver.find_element(By.ID, "f-transports")).select_by_value("webpush")
    wait.until(lambda d: d.find_element(By.ID, "preview-android-note").text.startswith("Not for Android"))
    shot(driver, "web-02-preview")
    submit(driver, driver.find_element(By.ID, "send-button"))
    wait.until(EC.presence_of_element_located((By.ID, "delivery-log")))

    def sent(d):
        d.refresh()
        rows = d.find_elements(By.CSS_SELECTOR, "#delivery-log tbody tr")
        return rows and "sent" in rows[0].find_element(By.CSS_SELECTOR, ".state").text

    wait.until(sent)
    check(driver.find_element(By.CSS_SELECTOR, "#delivery-log tbody tr td.platform").text == "Web", "the delivery's platform in the log")
    inbox = call_json(WEB, "GET", f"/emulator/browsers/{made['id']}")
    check(len(inbox["messages"]) == 1 and not inbox["decryptionFailures"], f"the browser's inbox: {inbox}")
    decrypted = inbox["messages"][0]["text"]
    receipt = json.loads(decrypted).get("hr", "")
    check(previewed.replace(RECEIPT_PLACEHOLDER, receipt) == decrypted, f"decrypted {decrypted!r}, previewed {previewed!r}")
    shot(driver, "web-03-delivered")

    # A new key, with the warning: every browser must subscribe again.
    driver.get(f"{BASE}/dashboard/apps/{APP}")
    warning = driver.find_element(By.ID, "webpush-warning").text
    check("1 active browser must subscribe again" in warning, f"the warning: {warning!r}")
    submit(driver, driver.find_element(By.ID, "webpush-rotate"))
    check("New VAPID key made" in driver.find_element(By.ID, "webpush-notice").text, "the new key's notice")
    rotated = driver.find_element(By.ID, "webpush-key").text
    check(rotated != vapid and call_json(BASE, "GET", f"/v1/apps/{APP}/webpush/key", key=register_key)["publicKey"] == rotated, "a new key")
    shot(driver, "web-04-new-key")


if __name__ == "__main__":
    main()
