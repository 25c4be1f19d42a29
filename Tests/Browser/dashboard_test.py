#!/usr/bin/env python3
"""The dashboard in a real browser (Chromium driven by Selenium), against a running `herald serve`
with its built-in emulator: sign in, make a virtual device, find it, send it a test push through
the form (live preview), see it arrive on the emulated phone (live, without reloading) and in the
delivery log; the same pages on a narrow screen and without JavaScript.

Environment: HERALD_URL, HERALD_ADMIN_KEY, HERALD_APP (an existing app id), HERALD_ARTIFACTS
(a directory for screenshots). Exits non-zero, with the reason, on the first failed check.
"""
import datetime
import json
import os
import re
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE = os.environ["HERALD_URL"].rstrip("/")
KEY = os.environ["HERALD_ADMIN_KEY"]
APP = os.environ.get("HERALD_APP", "")
ARTIFACTS = os.environ["HERALD_ARTIFACTS"]
os.makedirs(ARTIFACTS, exist_ok=True)
# How long a wait may take before it is called a hang: the waits end at their event (a page, an
# element, a text), so this only bounds a browser that never gets there, however loaded the machine.
HANG_GUARD = 300


def browser(javascript=True, width=1280, height=1000):
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("HERALD_CHROMIUM", "/usr/bin/chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", f"--window-size={width},{height}"):
        options.add_argument(argument)
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    service = Service(executable_path=os.environ.get("HERALD_CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(HANG_GUARD)
    return driver


def shot(driver, name):
    path = os.path.join(ARTIFACTS, f"{name}.png")
    driver.save_screenshot(path)
    print(f"screenshot {path}")


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def check_fits(driver, path, width=390):
    """The page loaded from `path` is no wider than the `width` px viewport."""
    wide = driver.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    check(wide <= 1, f"{path} is {wide}px wider than the {width}px viewport")


def call_json(base, method, path, body=None, key=None):
    """A JSON request to Herald's API or the emulator's control API; the JSON answered."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = "Bearer " + key
    request = urllib.request.Request(base + path, data=data, headers=headers, method=method)
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())


def submit(driver, element):
    """Clicks a button or link that loads a page, and waits until the new page is there."""
    page = driver.find_element(By.TAG_NAME, "html")
    element.click()

    def replaced(_):
        # Chromium answers a look at a node of the page being replaced either "stale" or, when
        # the look falls in the middle of the navigation, "does not belong to the document".
        try:
            page.is_enabled()
            return False
        except StaleElementReferenceException:
            return True
        except WebDriverException as error:
            if "does not belong to the document" in str(error):
                return True
            raise

    WebDriverWait(driver, HANG_GUARD).until(replaced)


def sign_in(driver):
    driver.get(BASE + "/dashboard")
    check(driver.current_url.endswith("/dashboard/login"), f"not sent to sign in: {driver.current_url}")
    field = driver.find_element(By.ID, "key")
    check(driver.find_element(By.CSS_SELECTOR, "label[for=key]").text.strip() != "", "the key field has no label")
    field.send_keys("hk_0000000000000000_" + "0" * 64)
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form button[type=submit]"))
    check("not an admin key" in driver.find_element(By.CSS_SELECTOR, "[role=alert]").text, "a wrong key was not refused")
    driver.find_element(By.ID, "key").send_keys(KEY)
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form button[type=submit]"))
    WebDriverWait(driver, HANG_GUARD).until(EC.presence_of_element_located((By.XPATH, "//h1[text()='Overview']")))
    cookie = driver.get_cookie("herald_session")
    check(cookie is not None and cookie.get("httpOnly") and cookie.get("sameSite") == "Strict", f"session cookie flags: {cookie}")


def main():
    driver = browser()
    wait = WebDriverWait(driver, HANG_GUARD)
    try:
        sign_in(driver)
        shot(driver, "01-overview")

        # The keys page: each key's expiry and last use (the admin key was just used; the
        # backend key expires a day from now and has not been used).
        submit(driver, driver.find_element(By.LINK_TEXT, "Keys"))
        wait.until(EC.presence_of_element_located((By.XPATH, "//h1[text()='API keys']")))
        rows = {row.find_element(By.CSS_SELECTOR, "td.name").text: row for row in driver.find_elements(By.CSS_SELECTOR, "#keys tbody tr")}
        check(set(rows) >= {"initial admin", "backend"}, f"keys listed: {sorted(rows)}")
        admin, backend = rows["initial admin"], rows["backend"]
        used = admin.find_element(By.CSS_SELECTOR, "td.last-used").text
        check(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", used) is not None, f"the admin key's last use: {used!r}")
        check(admin.find_element(By.CSS_SELECTOR, "td.expires").text == "never", "the admin key has no expiry")
        expiry = datetime.datetime.fromtimestamp(int(os.environ["HERALD_KEY_EXPIRY"]) / 1000, datetime.timezone.utc)
        expires = backend.find_element(By.CSS_SELECTOR, "td.expires").text
        check(expires == expiry.strftime("%Y-%m-%d %H:%M:%S"), f"the backend key's expiry: {expires!r}, not {expiry}")
        check(backend.find_element(By.CSS_SELECTOR, "td.last-used").text == "never", "the backend key was never used")
        check(backend.find_element(By.CSS_SELECTOR, "td.state").text == "active", "the backend key is active")
        check("hk_" not in driver.page_source, "a key's secret is never shown")
        shot(driver, "01b-keys")

        # A virtual device for user "ann", registered with Herald as the app would.
        driver.get(BASE + "/dashboard/emulator")
        Select(driver.find_element(By.ID, "e-app")).select_by_value(APP)
        driver.find_element(By.ID, "e-user").send_keys("ann")
        driver.find_element(By.ID, "e-tags").send_keys("beta")
        submit(driver, driver.find_element(By.XPATH, "//button[text()='New virtual device']"))
        wait.until(EC.presence_of_element_located((By.ID, "phone-notifications")))
        phone_url = driver.current_url
        token = phone_url.rstrip("/").split("/")[-1]
        check(len(token) == 64, f"no token in {phone_url}")
        phone = driver.current_window_handle
        shot(driver, "02-phone-empty")

        # In another tab: find the device by user, open it, send it a test push.
        driver.switch_to.new_window("tab")
        driver.get(BASE + f"/dashboard/apps/{APP}/devices")
        Select(driver.find_element(By.ID, "by")).select_by_value("user")
        driver.find_element(By.ID, "q").send_keys("ann")
        submit(driver, driver.find_element(By.XPATH, "//form[@role='search']//button"))
        row = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, f"#devices a[href$='{token}']")))
        shot(driver, "03-device-search")
        submit(driver, row)
        wait.until(EC.presence_of_element_located((By.XPATH, "//dt[text()='User']/following-sibling::dd[1][text()='ann']")))
        shot(driver, "04-device")
        submit(driver, driver.find_element(By.LINK_TEXT, "Send a test to this device"))
        form = wait.until(EC.presence_of_element_located((By.ID, "send-form")))
        check(driver.find_element(By.ID, "f-target").get_attribute("value") == token, "the device's token is not filled in")
        for name in ("f-title", "f-body", "f-badge", "f-custom", "f-pushType", "f-priority"):
            check(driver.find_element(By.CSS_SELECTOR, f"label[for={name}]").text.strip() != "", f"{name} has no label")
        driver.find_element(By.ID, "f-title").send_keys("Hello from Selenium")
        driver.find_element(By.ID, "f-subtitle").send_keys("A subtitle too")
        driver.find_element(By.ID, "f-body").send_keys("Sent through the dashboard")
        driver.find_element(By.ID, "f-badge").send_keys("3")
        Select(driver.find_element(By.ID, "f-priority")).select_by_value("10")
        driver.find_element(By.ID, "f-custom").send_keys('{"orderId": 42}')
        # The live preview: the lock screen, the exact headers and payload, without a reload.
        wait.until(EC.text_to_be_present_in_element((By.ID, "preview-banner-title"), "Hello from Selenium"))
        # The subtitle is on the lock screen as it is in the payload.
        wait.until(EC.text_to_be_present_in_element((By.ID, "preview-banner-subtitle"), "A subtitle too"))
        wait.until(EC.text_to_be_present_in_element((By.ID, "preview-payload"), '"orderId": 42'))
        headers = driver.find_element(By.ID, "preview-headers").text
        check("apns-push-type: alert" in headers and "apns-priority: 10" in headers and "apns-topic: " in headers, f"headers: {headers}")
        payload = driver.find_element(By.ID, "preview-payload").text
        # The API's dry run: how many it would reach, before anything is sent.
        wait.until(EC.text_to_be_present_in_element((By.ID, "preview-reach"), "Would reach 1 device (1 alert)"))
        check('"badge": 3' in payload and '"body": "Sent through the dashboard"' in payload, f"payload: {payload}")
        # Bad custom JSON is explained before anything is sent.
        custom = driver.find_element(By.ID, "f-custom")
        custom.send_keys(" oops")
        wait.until(EC.text_to_be_present_in_element((By.ID, "preview-error"), "custom data must be a JSON object"))
        shot(driver, "05-send-form-error")
        custom.clear()
        custom.send_keys('{"orderId": 42}')
        wait.until(lambda d: d.find_element(By.ID, "preview-error").text == "" and '"orderId": 42' in d.find_element(By.ID, "preview-payload").text)
        shot(driver, "06-send-form-preview")
        # An invalid combination (background at priority 10): explained in words, and the last
        # good preview does not stay on screen as if it were current.
        Select(driver.find_element(By.ID, "f-pushType")).select_by_value("background")
        wait.until(lambda d: d.find_element(By.ID, "preview-error").text != "")
        error = driver.find_element(By.ID, "preview-error").text
        check(re.match(r"^[a-z_]+:", error) is None, f"the message starts with an internal code: {error!r}")
        check("priority" in error, f"the message does not say what is wrong: {error!r}")
        for stale in ("preview-headers", "preview-payload", "preview-bytes", "preview-banner-title"):
            check(driver.find_element(By.ID, stale).text == "", f"{stale} still shows the previous preview: {driver.find_element(By.ID, stale).text!r}")
        shot(driver, "06b-send-form-invalid")
        Select(driver.find_element(By.ID, "f-pushType")).select_by_value("")
        wait.until(lambda d: d.find_element(By.ID, "preview-error").text == "" and '"orderId": 42' in d.find_element(By.ID, "preview-payload").text)
        submit(driver, driver.find_element(By.ID, "send-button"))

        # The delivery log: sent, with its apns-id.
        wait.until(EC.presence_of_element_located((By.ID, "delivery-log")))
        deadline = time.time() + HANG_GUARD
        while driver.find_element(By.ID, "count-sent").text != "1":
            check(time.time() < deadline, "the delivery was not recorded sent")
            time.sleep(0.5)
            driver.get(driver.current_url)
        log = driver.find_element(By.ID, "delivery-log").text
        check("sent" in log and token[:16] in log, f"delivery log: {log}")
        check(driver.find_element(By.ID, "notification-state").text == "sent", "the notification's state")
        # What was sent and to whom: the content, the headers, the audience.
        check(driver.find_element(By.ID, "notification-title").text == "Hello from Selenium", "the notification's title")
        audience = driver.find_element(By.ID, "notification-audience").text
        check(audience.startswith("1 token") or audience.startswith("token " + token[:12]), f"the notification's audience: {audience!r}")
        driver.find_element(By.CSS_SELECTOR, "#notification-content + details summary").click()
        check("apns-priority: 10" in driver.find_element(By.ID, "notification-headers").text, "the notification's headers")
        check('"orderId": 42' in driver.find_element(By.ID, "notification-payload").text, "the notification's payload")
        notification_url = driver.current_url
        shot(driver, "07-delivery-log")
        # A link back to the app, whose recent notifications show each one's state and counts.
        submit(driver, driver.find_element(By.ID, "back-to-app"))
        recent = wait.until(EC.presence_of_element_located((By.ID, "recent-notifications"))).text
        check("sent" in recent and "Hello from Selenium" in recent, f"recent notifications: {recent}")
        driver.back()

        # The phone page, left open, received it live (no reload happened there).
        driver.switch_to.window(phone)
        check(driver.current_url == phone_url, "the phone tab moved")
        WebDriverWait(driver, HANG_GUARD).until(EC.text_to_be_present_in_element((By.ID, "phone-notifications"), "Hello from Selenium"))
        check(len(driver.find_elements(By.CSS_SELECTOR, "#phone-notifications li.arrived")) == 1, "not added live by the stream")
        check("A subtitle too" in driver.find_element(By.ID, "phone-notifications").text, "the subtitle is not on the emulated phone")
        shot(driver, "08-phone-received")

        # The phone's own actions, without the API: offline and back, then the app deleted.
        submit(driver, driver.find_element(By.ID, "phone-offline"))
        check("Offline" in driver.find_element(By.ID, "phone-state").text, "the phone did not go offline")
        submit(driver, driver.find_element(By.ID, "phone-online"))
        check("Online" in driver.find_element(By.ID, "phone-state").text, "the phone did not come back online")

        # The overview counts it; its chart has axes; the nav marks where you are.
        driver.get(BASE + "/dashboard")
        check(int(driver.find_element(By.ID, "sent-hour").text) >= 1, "the overview does not count the send")
        check(driver.find_elements(By.ID, "chart-x-axis") and driver.find_elements(By.ID, "chart-y-axis"), "the chart has no axes")
        check(len(driver.find_elements(By.CSS_SELECTOR, ".chart .ticks.x text")) == 3, "the time axis is not labelled")
        check(len(driver.find_elements(By.CSS_SELECTOR, ".chart .ticks.y text")) == 3, "the count axis is not labelled")
        current = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "nav.top a[aria-current=page]")]
        check(current == ["Overview"], f"the nav marks {current} on the overview")
        driver.get(BASE + "/dashboard/keys")
        current = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "nav.top a[aria-current=page]")]
        check(current == ["Keys"], f"the nav marks {current} on the keys page")

        # A notification nobody could receive says why.
        driver.get(BASE + f"/dashboard/apps/{APP}/send?to=tag&target=nobody-has-this-tag&title=Hello")
        check("Would reach nobody" in driver.find_element(By.ID, "preview-reach").text, "the form does not say nobody would get it")
        submit(driver, driver.find_element(By.ID, "send-button"))
        explanation = wait.until(EC.presence_of_element_located((By.ID, "empty-audience"))).text
        check("no active device" in explanation, f"the empty audience is not explained: {explanation}")
        check(driver.find_element(By.ID, "notification-state").text == "no audience", "the empty notification's state")
        empty_url = driver.current_url

        # The history: every notification with what, to whom, state and counts; filters by state and day.
        driver.get(BASE + f"/dashboard/apps/{APP}")
        submit(driver, driver.find_element(By.ID, "all-notifications"))
        history = driver.find_element(By.ID, "history").text
        check("Hello from Selenium" in history and "tag nobody-has-this-tag" in history, f"history: {history}")
        Select(driver.find_element(By.ID, "h-state")).select_by_value("no audience")
        submit(driver, driver.find_element(By.XPATH, "//form[@id='history-filter']//button"))
        history = driver.find_element(By.ID, "history").text
        check("nobody-has-this-tag" in history and "Hello from Selenium" not in history, f"history of state 'no audience': {history}")
        tomorrow = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)).strftime("%Y-%m-%d")
        driver.get(BASE + f"/dashboard/apps/{APP}/notifications?from={tomorrow}")
        check(not driver.find_elements(By.ID, "history") and "No notification matches" in driver.page_source, "a day filter")
        history_url = f"/dashboard/apps/{APP}/notifications"

        # A webhook added from the app page: its secret shown once.
        driver.get(BASE + f"/dashboard/apps/{APP}")
        driver.find_element(By.ID, "webhook-url").send_keys("https://example.com/herald-hook")
        submit(driver, driver.find_element(By.XPATH, "//button[text()='Add webhook']"))
        secret = wait.until(EC.presence_of_element_located((By.ID, "webhook-secret"))).text
        check(secret.startswith("whsec_"), f"secret: {secret}")
        shot(driver, "09-webhook")

        # A stale form (bad CSRF token) is refused, on a page of the dashboard: its layout and
        # navigation, a message in words, no internal code, no JSON.
        driver.execute_script("document.querySelector('form.inline-form input[name=csrf]').value = 'forged'")
        driver.find_element(By.ID, "webhook-url").send_keys("https://example.com/other")
        submit(driver, driver.find_element(By.XPATH, "//button[text()='Add webhook']"))
        message = driver.find_element(By.ID, "error-message").text
        check("CSRF" in message, "a forged CSRF token was accepted")
        check(re.match(r"^[a-z_]+:", message) is None and "forbidden" not in message, f"an internal code in the message: {message!r}")
        check(driver.find_elements(By.CSS_SELECTOR, "nav.top a[href='/dashboard/apps']"), "the error page has no navigation")
        check(driver.title != "Herald" and "Refused" in driver.title, f"the error page's title: {driver.title!r}")
        shot(driver, "09b-error-page")
        driver.get(BASE + f"/dashboard/apps/{APP}/notifications/no-such-notification")
        check(driver.find_elements(By.CSS_SELECTOR, "nav.top") and "not found" in driver.find_element(By.TAG_NAME, "main").text.lower(), "not found page")

        # Every page, at desktop and phone size: a title of its own, nothing wider than the viewport.
        pages = {
            "overview": "/dashboard", "apps": "/dashboard/apps", "app": f"/dashboard/apps/{APP}", "keys": "/dashboard/keys",
            "devices": f"/dashboard/apps/{APP}/devices", "device": f"/dashboard/apps/{APP}/devices/{token}",
            "send": f"/dashboard/apps/{APP}/send", "notification": notification_url.replace(BASE, ""),
            "notification-empty": empty_url.replace(BASE, ""), "emulator": "/dashboard/emulator", "phone": phone_url.replace(BASE, ""),
            "not-found": "/dashboard/apps/no-such-app", "history": history_url, "templates": f"/dashboard/apps/{APP}/templates",
        }
        titles = {}
        for size, (width, height) in (("desktop", (1366, 900)), ("phone", (390, 844))):
            driver.set_window_size(width, height)
            for name, path in pages.items():
                driver.get(BASE + path)
                check_fits(driver, path, width)
                titles[name] = driver.title
                shot(driver, f"page-{size}-{name}")
        repeated = {t for t in titles.values() if list(titles.values()).count(t) > 1}
        check(not repeated and "Herald" not in titles.values(), f"page titles not distinct: {titles}")
        shot(driver, "10-narrow-phone")
    except Exception:
        shot(driver, "failure")
        print("page at failure:", driver.current_url, file=sys.stderr)
        raise
    finally:
        driver.quit()

    # Without JavaScript every page still reads.
    plain = browser(javascript=False)
    try:
        sign_in(plain)
        plain.get(BASE + f"/dashboard/apps/{APP}/devices?by=tag&q=beta")
        check(token[:16] in plain.find_element(By.ID, "devices").text, "search by tag without JavaScript")
        plain.get(phone_url)
        check("Hello from Selenium" in plain.find_element(By.ID, "phone-notifications").text, "the phone's inbox without JavaScript")
        shot(plain, "11-no-javascript-phone")
    finally:
        plain.quit()
    print("dashboard browser test passed")


def pem_keys():
    """A P-256 signing key as Apple's .p8 holds it (PKCS#8 PEM), and its public key (PEM)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


def upload_key(driver, wait, key_id, team_id, private_pem, directory):
    """Uploads a .p8 file for the sandbox through the app page's form, as a person would."""
    path = os.path.join(directory, f"AuthKey_{key_id}.p8")
    with open(path, "w") as file:
        file.write(private_pem)
    details = driver.find_element(By.ID, "upload")
    if not details.get_attribute("open"):
        driver.find_element(By.CSS_SELECTOR, "#upload summary").click()
    Select(driver.find_element(By.ID, "c-env")).select_by_value("development")
    driver.find_element(By.ID, "c-key-id").send_keys(key_id)
    driver.find_element(By.ID, "c-team-id").send_keys(team_id)
    driver.find_element(By.ID, "c-key-file").send_keys(path)
    submit(driver, driver.find_element(By.ID, "upload-credentials"))
    notice = wait.until(EC.presence_of_element_located((By.ID, "setup-notice"))).text
    check("credentials saved" in notice, f"upload: {notice}")
    check(key_id in driver.find_element(By.ID, "credentials").find_element(By.XPATH, "following-sibling::dl[1]").text, "the key id is not shown")
    check(all(line not in driver.page_source for line in private_pem.splitlines()[1:-1]), "key material on the page")


def walk():
    """A new team, from an empty server to a first push, without curl: create the app, upload a
    key (a bad one first: the check says so), check it, make an API key, make a virtual device,
    send it a push, see it arrive and in the history."""
    import json
    import tempfile
    import urllib.request
    control = os.environ["HERALD_EMULATOR_CONTROL"].rstrip("/")
    directory = tempfile.mkdtemp(prefix="herald-walk-")
    driver = browser()
    wait = WebDriverWait(driver, HANG_GUARD)
    try:
        sign_in(driver)
        driver.get(BASE + "/dashboard/apps")
        check("No apps yet" in driver.page_source, "the server is not empty")
        # A bad id is explained and the form keeps what was typed.
        driver.find_element(By.ID, "a-id").send_keys("walk")
        driver.find_element(By.ID, "a-bundle").send_keys("not a bundle id")
        submit(driver, driver.find_element(By.XPATH, "//button[text()='Create the app']"))
        check(driver.find_element(By.ID, "setup-error").text != "", "a bad bundle id was not refused")
        check(driver.find_element(By.ID, "a-id").get_attribute("value") == "walk", "the form lost the id")
        bundle = driver.find_element(By.ID, "a-bundle")
        bundle.clear()
        bundle.send_keys("com.example.walk")
        submit(driver, driver.find_element(By.XPATH, "//button[text()='Create the app']"))
        wait.until(EC.presence_of_element_located((By.XPATH, "//h1[starts-with(normalize-space(.), 'walk')]")))
        shot(driver, "walk-01-app-created")

        # A key the emulator does not know: the check says the credentials are refused (403).
        bad_private, _ = pem_keys()
        upload_key(driver, wait, "BADKEY0001", "TEAM000001", bad_private, directory)
        submit(driver, driver.find_element(By.ID, "check-development"))
        result = wait.until(EC.presence_of_element_located((By.ID, "check-result"))).text
        check("not working" in result and "403" in result, f"a bad key was not reported: {result}")
        shot(driver, "walk-02-check-bad-key")

        # The team's real key (registered in the emulator as in a developer account): working.
        good_private, good_public = pem_keys()
        body = json.dumps({"keyId": "GOODKEY001", "teamId": "TEAM000001", "publicKey": good_public}).encode()
        urllib.request.urlopen(urllib.request.Request(control + "/v1/keys", data=body, headers={"content-type": "application/json"}, method="POST"))
        upload_key(driver, wait, "GOODKEY001", "TEAM000001", good_private, directory)
        submit(driver, driver.find_element(By.ID, "check-development"))
        result = wait.until(EC.presence_of_element_located((By.ID, "check-result"))).text
        check("working" in result and "not working" not in result and "BadDeviceToken" in result, f"a good key was not reported working: {result}")
        shot(driver, "walk-03-check-good-key")

        # An API key for the backend: its secret shown once, then never again; rotate and revoke.
        submit(driver, driver.find_element(By.LINK_TEXT, "Keys"))
        driver.find_element(By.ID, "k-name").send_keys("walk backend")
        Select(driver.find_element(By.ID, "k-scope")).select_by_value("send")
        Select(driver.find_element(By.ID, "k-app")).select_by_value("walk")
        submit(driver, driver.find_element(By.ID, "create-key"))
        secret = wait.until(EC.presence_of_element_located((By.ID, "new-key-secret"))).text
        check(secret.startswith("hk_"), f"the new key's secret: {secret!r}")
        key_id = secret.split("_")[1]
        shot(driver, "walk-04-key-made")
        driver.get(BASE + "/dashboard/keys")
        check(secret not in driver.page_source and "hk_" not in driver.page_source, "a secret is shown again")
        row = driver.find_element(By.CSS_SELECTOR, f"#keys tr[data-key='{key_id}']")
        submit(driver, row.find_element(By.CSS_SELECTOR, "button[data-action=rotate]"))
        rotated = wait.until(EC.presence_of_element_located((By.ID, "new-key-secret"))).text
        check(rotated.startswith("hk_") and rotated != secret, "rotation gave no new secret")
        new_id = rotated.split("_")[1]
        row = driver.find_element(By.CSS_SELECTOR, f"#keys tr[data-key='{new_id}']")
        submit(driver, row.find_element(By.CSS_SELECTOR, "button[data-action=revoke]"))
        state = driver.find_element(By.CSS_SELECTOR, f"#keys tr[data-key='{new_id}'] td.state").text
        check(state == "revoked", f"the rotated key's state after revoking: {state}")

        # A virtual device of the app, then a first push to its user.
        driver.get(BASE + "/dashboard/emulator")
        Select(driver.find_element(By.ID, "e-app")).select_by_value("walk")
        driver.find_element(By.ID, "e-user").send_keys("bo")
        submit(driver, driver.find_element(By.XPATH, "//button[text()='New virtual device']"))
        wait.until(EC.presence_of_element_located((By.ID, "phone-notifications")))
        phone_url = driver.current_url
        driver.get(BASE + "/dashboard/apps/walk/send?to=user&target=bo&title=First%20push")
        submit(driver, driver.find_element(By.ID, "send-button"))
        wait.until(EC.presence_of_element_located((By.ID, "notification-state")))
        deadline = time.time() + HANG_GUARD
        while driver.find_element(By.ID, "count-sent").text != "1":
            check(time.time() < deadline, "the first push was not sent")
            time.sleep(0.5)
            driver.get(driver.current_url)
        shot(driver, "walk-05-first-push")
        driver.get(phone_url)
        check("First push" in driver.find_element(By.ID, "phone-notifications").text, "the phone did not get the first push")
        submit(driver, driver.find_element(By.LINK_TEXT, "Apps"))
        submit(driver, driver.find_element(By.LINK_TEXT, "walk"))
        recent = driver.find_element(By.ID, "recent-notifications").text
        check("sent" in recent, f"the history: {recent}")
        shot(driver, "walk-06-history")

        # A template in two languages, made on the templates page; two more virtual devices, one
        # per language (a third locale, de, falls back to the default).
        phones = {}
        for locale in ("pt-BR", "de"):
            driver.get(BASE + "/dashboard/emulator")
            Select(driver.find_element(By.ID, "e-app")).select_by_value("walk")
            driver.find_element(By.ID, "e-user").send_keys("bo")
            driver.find_element(By.ID, "e-locale").send_keys(locale)
            submit(driver, driver.find_element(By.XPATH, "//button[text()='New virtual device']"))
            wait.until(EC.presence_of_element_located((By.ID, "phone-notifications")))
            phones[locale] = driver.current_url
        driver.get(BASE + "/dashboard/apps/walk/templates")
        driver.find_element(By.ID, "t-name").send_keys("Shipped")
        driver.find_element(By.ID, "t-title").send_keys("Order {{order}} shipped")
        driver.find_element(By.ID, "t-body").send_keys("On its way")
        driver.find_element(By.ID, "t-locale-0").send_keys("pt-BR")
        driver.find_element(By.ID, "t-title-0").send_keys("Pedido {{order}} enviado")
        driver.find_element(By.ID, "t-body-0").send_keys("A caminho")
        submit(driver, driver.find_element(By.ID, "create-template"))
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "section.template tr[data-locale='pt-BR']")))
        shot(driver, "walk-07-template")

        # Compose from it: choose it, preview (its variable gets an input), fill it, see each locale.
        driver.get(BASE + "/dashboard/apps/walk/send?to=user&target=bo")
        Select(driver.find_element(By.ID, "f-template")).select_by_visible_text("Shipped")
        submit(driver, driver.find_element(By.XPATH, "//button[@value='preview']"))
        variable = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "input[data-variable='order']")))
        variable.send_keys("A-7")
        submit(driver, driver.find_element(By.XPATH, "//button[@value='preview']"))
        wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#preview-locales li[data-locale='pt-BR']"), "Pedido A-7 enviado"))
        check("Order A-7 shipped" in driver.find_element(By.CSS_SELECTOR, "#preview-locales li[data-locale='default']").text, "the default's preview")
        shot(driver, "walk-08-compose-template")
        submit(driver, driver.find_element(By.ID, "send-button"))
        wait.until(EC.presence_of_element_located((By.ID, "notification-state")))
        deadline = time.time() + HANG_GUARD
        while driver.find_element(By.ID, "count-sent").text != "3":
            check(time.time() < deadline, "the templated push was not sent to bo's three devices")
            time.sleep(0.5)
            driver.get(driver.current_url)
        shot(driver, "walk-09-template-sent")
        for url, expected in ((phones["pt-BR"], "Pedido A-7 enviado"), (phones["de"], "Order A-7 shipped"), (phone_url, "Order A-7 shipped")):
            driver.get(url)
            check(expected in driver.find_element(By.ID, "phone-notifications").text, f"{url} did not get {expected!r}")
        shot(driver, "walk-10-phone-language")
        submit(driver, driver.find_element(By.LINK_TEXT, "Apps"))
        submit(driver, driver.find_element(By.LINK_TEXT, "walk"))
        shot(driver, "walk-11-history")

        # Every new page at phone size: nothing wider than the 390 px viewport.
        driver.set_window_size(390, 844)
        for path in ("/dashboard/apps/walk", "/dashboard/apps/walk/templates", "/dashboard/apps/walk/send", "/dashboard/emulator"):
            driver.get(BASE + path)
            check_fits(driver, path)
            shot(driver, "walk-phone-" + path.rstrip("/").split("/")[-1])
        driver.set_window_size(1280, 1000)
        driver.get(BASE + "/dashboard/apps/walk")

        # Deleting the app takes its id typed out.
        submit(driver, driver.find_element(By.XPATH, "//button[starts-with(text(), 'Delete walk')]"))
        check("Type the app's id" in driver.find_element(By.ID, "setup-error").text, "deleted without confirmation")
        driver.find_element(By.ID, "d-confirm").send_keys("walk")
        submit(driver, driver.find_element(By.XPATH, "//button[starts-with(text(), 'Delete walk')]"))
        check(driver.current_url.endswith("/dashboard/apps") and "No apps yet" in driver.page_source, "the app was not deleted")
    except Exception:
        shot(driver, "walk-failure")
        print("page at failure:", driver.current_url, file=sys.stderr)
        raise
    finally:
        driver.quit()
    print("dashboard walk passed")


def channels():
    """Live Activity broadcast channels on the dashboard, against the built-in emulator: a refusal
    shown with its code, a channel made and listed, a broadcast to it from the send page that the
    emulator's control API shows received once on that channel, and a delete that asks first."""
    control = os.environ["HERALD_EMULATOR_CONTROL"].rstrip("/")
    bundle = os.environ["HERALD_BUNDLE"]

    def emulator(method, path, body=None):
        return call_json(control, method, path, body)

    driver = browser()
    wait = WebDriverWait(driver, HANG_GUARD)
    try:
        sign_in(driver)
        driver.get(BASE + f"/dashboard/apps/{APP}")
        submit(driver, driver.find_element(By.LINK_TEXT, "Channels"))
        wait.until(EC.presence_of_element_located((By.XPATH, "//h1[starts-with(normalize-space(.), 'Channels')]")))
        check(driver.find_element(By.ID, "no-channels").is_displayed(), "a new app lists channels")

        # APNs refuses the first create (the Broadcast capability is off): the page says so, with the code.
        emulator("POST", "/v1/faults", {"type": "status", "status": 400, "reason": "FeatureNotEnabled", "scope": "channels"})
        Select(driver.find_element(By.ID, "ch-env")).select_by_value("sandbox")
        Select(driver.find_element(By.ID, "ch-policy")).select_by_value("1")
        submit(driver, driver.find_element(By.ID, "create-channel"))
        error = driver.find_element(By.ID, "channel-error").text
        check("Broadcast capability" in error and "broadcast_not_enabled" in error and "developer.apple.com" in error, f"the refusal: {error!r}")
        check(Select(driver.find_element(By.ID, "ch-policy")).first_selected_option.get_attribute("value") == "1", "the form lost its policy")
        shot(driver, "channels-01-refused")

        # Made: listed with its environment, policy, date and state, and known to the emulator.
        submit(driver, driver.find_element(By.ID, "create-channel"))
        check("made" in driver.find_element(By.ID, "channel-notice").text, "no notice of the new channel")
        rows = driver.find_elements(By.CSS_SELECTOR, "#channels tbody tr")
        check(len(rows) == 1, f"{len(rows)} channels listed")
        row = rows[0]
        channel = row.get_attribute("data-channel")
        check(row.find_element(By.CSS_SELECTOR, "td.environment").text == "sandbox", "environment")
        check("most recent" in row.find_element(By.CSS_SELECTOR, "td.policy").text, "storage policy")
        check(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row.find_element(By.CSS_SELECTOR, "td.created").text) is not None, "created")
        check(row.find_element(By.CSS_SELECTOR, "td.state").text == "active", "state: " + row.find_element(By.CSS_SELECTOR, "td.state").text)
        known = [c["channelId"] for c in emulator("GET", "/v1/channels?bundleId=" + bundle)["channels"]]
        check(known == [channel], f"the emulator's channels: {known}, not [{channel}]")
        shot(driver, "channels-02-listed")

        # A Live Activity on a phone, subscribed to the channel (as an activity started with it is).
        device = emulator("POST", "/v1/devices", {"bundleId": bundle, "environment": "development", "kind": "liveactivity"})
        emulator("POST", f"/v1/devices/{device['token']}/channels", {"channelId": channel})

        # Broadcast from the send page: the row's link chooses the channel; the preview shows the
        # one request to APNs before it is sent.
        submit(driver, row.find_element(By.CSS_SELECTOR, "a[data-action=broadcast]"))
        check(Select(driver.find_element(By.ID, "f-to")).first_selected_option.get_attribute("value") == "channel", "audience")
        check(Select(driver.find_element(By.ID, "f-channel")).first_selected_option.get_attribute("value") == channel, "channel")
        check("content state" in driver.find_element(By.ID, "preview-error").text, "an update without content state was not refused")
        Select(driver.find_element(By.ID, "f-event")).select_by_value("update")
        driver.find_element(By.ID, "f-contentState").send_keys('{"score": 3}')
        driver.find_element(By.ID, "f-title").send_keys("Goal")
        wait.until(EC.text_to_be_present_in_element((By.ID, "preview-headers"), "apns-channel-id: " + channel))
        check("liveactivity" in driver.find_element(By.ID, "preview-headers").text, "the preview's push type")
        check('"content-state"' in driver.find_element(By.ID, "preview-payload").text, "the preview's payload")
        check("One broadcast" in driver.find_element(By.ID, "preview-reach").text, "the preview's reach")
        shot(driver, "channels-03-compose")
        submit(driver, driver.find_element(By.ID, "send-button"))
        state = wait.until(EC.presence_of_element_located((By.ID, "notification-state"))).text
        check(state == "sent", f"the broadcast's state: {state}")
        audience = driver.find_element(By.ID, "notification-audience").text
        check("channel " + channel in audience and "every activity subscribed" in audience, f"the broadcast's audience: {audience}")
        shot(driver, "channels-04-sent")
        inbox = emulator("GET", f"/v1/devices/{device['token']}/inbox")["notifications"]
        check(len(inbox) == 1, f"{len(inbox)} notifications on the subscribed activity")
        received = inbox[0]
        check(received.get("channelId") == channel and received["pushType"] == "liveactivity", f"received: {received}")
        check(received["payload"]["aps"]["content-state"] == {"score": 3} and received["payload"]["aps"]["event"] == "update", f"payload: {received}")
        broadcasts = [r for r in emulator("GET", "/v1/requests?limit=1000")["requests"] if r["path"].startswith("/4/broadcasts/")]
        check(len(broadcasts) == 1 and broadcasts[0]["status"] == 200, f"broadcast requests at the emulator: {broadcasts}")

        # Delete: the first press asks, and only the confirmation deletes (at the emulator too).
        driver.get(BASE + f"/dashboard/apps/{APP}/channels")
        submit(driver, driver.find_element(By.CSS_SELECTOR, f"#channels tr[data-channel='{channel}'] button[data-action=delete]"))
        check(channel in driver.find_element(By.ID, "confirm-delete").text, "no confirmation asked")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#channels tbody tr")) == 1, "deleted without confirmation")
        shot(driver, "channels-05-confirm")
        submit(driver, driver.find_element(By.ID, "confirm-delete-button"))
        check(driver.current_url.endswith(f"/dashboard/apps/{APP}/channels"), f"after the delete: {driver.current_url}")
        check(driver.find_element(By.ID, "no-channels").is_displayed(), "the channel is still listed")
        known = emulator("GET", "/v1/channels?bundleId=" + bundle)["channels"]
        check(known == [], f"the emulator still has {known}")

        # At phone size, nothing wider than the 390 px viewport.
        driver.set_window_size(390, 844)
        for path in (f"/dashboard/apps/{APP}/channels", f"/dashboard/apps/{APP}/send?to=channel"):
            driver.get(BASE + path)
            check_fits(driver, path)
        shot(driver, "channels-06-phone")
    except Exception:
        shot(driver, "channels-failure")
        print("page at failure:", driver.current_url, file=sys.stderr)
        raise
    finally:
        driver.quit()
    print("dashboard channels passed")


if __name__ == "__main__":
    {"1": walk, "channels": channels}.get(os.environ.get("HERALD_WALK", ""), main)()
