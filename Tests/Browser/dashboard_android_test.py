#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Android in the dashboard, in a real browser (Chromium driven by Selenium), against a running
`herald serve` whose FCM messages go to its built-in FCM emulator: upload a Firebase service
account (a refused one first, shown with its code), check it ("key and project OK"), register an
Android phone and find its platform in the devices list and on the overview, preview the Android
message on the send form, send it and see it delivered to the phone.

Environment: HERALD_URL, HERALD_ADMIN_KEY, HERALD_APP (an existing app id, also the emulated
Firebase project's), HERALD_FCM_EMULATOR (the built-in FCM emulator's origin), HERALD_ARTIFACTS
(a directory for screenshots). Exits non-zero, with the reason, on the first failed check.
"""
import json
import os
import sys
import tempfile

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from dashboard_test import APP, BASE, HANG_GUARD, browser, call_json, check, check_fits, shot, sign_in, submit

KEY = os.environ["HERALD_ADMIN_KEY"]
FCM = os.environ["HERALD_FCM_EMULATOR"].rstrip("/")


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


if __name__ == "__main__":
    main()
