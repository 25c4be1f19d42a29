#!/usr/bin/env python3
"""Live Activities on the dashboard in a real browser, against a running `herald serve` and its
built-in emulator: a start refused with its code (the form kept), an activity started by
push-to-start for a user with a push-to-start virtual device, listed active, updated, ended after
a confirmation; the emulator's control API shows the start, the update and the end received.

Environment: as dashboard_test.py, with HERALD_EMULATOR_CONTROL and HERALD_BUNDLE.
"""
import os
import sys

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from dashboard_test import APP, BASE, HANG_GUARD, KEY, browser, call_json as call, check, check_fits, shot, sign_in, submit

CONTROL = os.environ["HERALD_EMULATOR_CONTROL"].rstrip("/")
BUNDLE = os.environ["HERALD_BUNDLE"]


def virtual_device(kind, registration):
    """A virtual device of the emulator, registered with Herald as the app would register it."""
    token = call(CONTROL, "POST", "/v1/devices", {"bundleId": BUNDLE, "environment": "development", "kind": kind})["token"]
    call(BASE, "PUT", f"/v1/apps/{APP}/devices/{token}", dict({"environment": "sandbox", "kind": kind}, **registration), key=KEY)
    return token


def inbox(token, count):
    """The device's notifications, once it holds `count` of them."""
    def arrived(_):
        received = call(CONTROL, "GET", f"/v1/devices/{token}/inbox")["notifications"]
        return received if len(received) >= count else False

    return WebDriverWait(None, HANG_GUARD, poll_frequency=0.1).until(arrived)


def fill(driver, field_id, text):
    field = driver.find_element(By.ID, field_id)
    field.clear()
    field.send_keys(text)


def live_activities():
    driver = browser()
    wait = WebDriverWait(driver, HANG_GUARD)
    try:
        sign_in(driver)
        driver.get(BASE + f"/dashboard/apps/{APP}")
        submit(driver, driver.find_element(By.LINK_TEXT, "Live Activities"))
        wait.until(EC.presence_of_element_located((By.XPATH, "//h1[starts-with(normalize-space(.), 'Live Activities')]")))
        check(driver.find_element(By.ID, "no-activities").is_displayed(), "a new app lists activities")
        starter = virtual_device("push-to-start", {"attributesType": "GameAttributes", "userId": "ann"})

        # A user without a push-to-start token: refused with the code; the form keeps its values.
        Select(driver.find_element(By.ID, "la-to")).select_by_value("user")
        fill(driver, "la-target", "zed")
        fill(driver, "la-type", "GameAttributes")
        fill(driver, "la-attributes", '{"home": "A", "away": "B"}')
        fill(driver, "la-state", '{"score": 0}')
        fill(driver, "la-title", "Kick-off")
        fill(driver, "la-body", "A vs B")
        Select(driver.find_element(By.ID, "la-input")).select_by_value("token")
        submit(driver, driver.find_element(By.ID, "start-activity"))
        error = driver.find_element(By.ID, "activity-error").text
        check("no_push_to_start_tokens" in error and "push-to-start token" in error, f"the refusal: {error!r}")
        check(driver.find_element(By.ID, "la-target").get_attribute("value") == "zed", "the form lost its audience")
        check(driver.find_element(By.ID, "la-attributes").get_attribute("value") == '{"home": "A", "away": "B"}', "the form lost its attributes")
        shot(driver, "live-activities-01-refused")

        # Started for ann: her push-to-start token receives the start.
        fill(driver, "la-target", "ann")
        submit(driver, driver.find_element(By.ID, "start-activity"))
        wait.until(EC.presence_of_element_located((By.ID, "activity-state")))
        activity = driver.current_url.rstrip("/").split("/")[-1]
        check(driver.find_element(By.ID, "activity-state").text == "active", "state: " + driver.find_element(By.ID, "activity-state").text)
        start = inbox(starter, 1)[0]["payload"]["aps"]
        check(start["event"] == "start" and start["attributes-type"] == "GameAttributes", f"the start: {start}")
        check(start["attributes"]["heraldActivityId"] == activity and start["alert"]["title"] == "Kick-off", f"the start: {start}")

        # The started activity's update token, registered with Herald's id (as the app does).
        update = virtual_device("liveactivity", {"activityId": activity, "userId": "ann"})
        driver.get(BASE + f"/dashboard/apps/{APP}/live-activities")
        rows = driver.find_elements(By.CSS_SELECTOR, "#activities tbody tr")
        check(len(rows) == 1 and rows[0].get_attribute("data-activity") == activity, f"{len(rows)} activities listed")
        check(rows[0].find_element(By.CSS_SELECTOR, "td.state").text == "active", "listed state")
        check(rows[0].find_element(By.CSS_SELECTOR, "td.input").text == "update tokens (1)", rows[0].find_element(By.CSS_SELECTOR, "td.input").text)
        check(rows[0].find_element(By.CSS_SELECTOR, "td.type").text == "GameAttributes", "attributes type")
        shot(driver, "live-activities-02-listed")

        # Update at priority 10: the update token receives it.
        submit(driver, rows[0].find_element(By.CSS_SELECTOR, "a"))
        check("priority-10" in driver.find_element(By.ID, "update-form").text, "no word on Apple's priority-10 budget")
        fill(driver, "la-state", '{"score": 1}')
        fill(driver, "la-title", "Goal")
        Select(driver.find_element(By.ID, "la-priority")).select_by_value("10")
        submit(driver, driver.find_element(By.ID, "update-activity"))
        check("sent to 1 update token" in driver.find_element(By.ID, "activity-notice").text, driver.find_element(By.ID, "activity-notice").text)
        check(driver.find_element(By.ID, "activity-updates").text == "1", "updates")
        received = inbox(update, 1)[0]
        check(received["priority"] == 10 and received["payload"]["aps"]["event"] == "update", f"the update: {received}")
        check(received["payload"]["aps"]["content-state"] == {"score": 1}, f"the update: {received}")
        shot(driver, "live-activities-03-updated")

        # End: the first press asks; the confirmation ends it, and the end arrives.
        submit(driver, driver.find_element(By.ID, "end-activity"))
        check("End this activity?" in driver.find_element(By.ID, "confirm-end").text, "no confirmation asked")
        check(driver.find_element(By.ID, "activity-state").text == "active", "ended without confirmation")
        check(len(inbox(update, 1)) == 1, "an end sent without confirmation")
        shot(driver, "live-activities-04-confirm")
        submit(driver, driver.find_element(By.ID, "confirm-end-button"))
        state = driver.find_element(By.ID, "activity-state").text
        check(state == "ended: ended from Herald", f"state: {state}")
        check(not driver.find_elements(By.ID, "update-form"), "an update form on an ended activity")
        end = inbox(update, 2)[1]["payload"]["aps"]
        check(end["event"] == "end" and end["content-state"] == {"score": 1}, f"the end: {end}")
        shot(driver, "live-activities-05-ended")
        driver.get(BASE + f"/dashboard/apps/{APP}/live-activities?state=ended")
        check(driver.find_element(By.CSS_SELECTOR, "#activities tbody tr td.state").text == "ended: ended from Herald", "the ended list")

        # At phone size, nothing wider than the 390 px viewport.
        driver.set_window_size(390, 844)
        for path in (f"/dashboard/apps/{APP}/live-activities", f"/dashboard/apps/{APP}/live-activities/{activity}"):
            driver.get(BASE + path)
            check_fits(driver, path)
        shot(driver, "live-activities-06-phone")
    except Exception:
        shot(driver, "live-activities-failure")
        print("page at failure:", driver.current_url, file=sys.stderr)
        raise
    finally:
        driver.quit()
    print("dashboard live activities passed")


if __name__ == "__main__":
    live_activities()
