"""Drives the admin page at /_utils/ in headless Chromium against a real couchette.

Run by scripts/test-ui (from scripts/test): COUCHETTE is the binary, SCREENSHOTS the folder
the screenshots of each screen go to. Every wait is for a condition, with a generous deadline.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

ADMIN, PASSWORD = "admin", "secret"
TIMEOUT = 30


class Server:
    """A couchette on an ephemeral loopback port, with its data in a temporary directory."""

    def __init__(self, binary, admin=True):
        self.directory = tempfile.mkdtemp(prefix="couchette-ui-")
        environment = dict(os.environ, COUCHETTE_CHTTPD_AUTH__ITERATIONS="1000")
        environment.pop("COUCHETTE_ADMIN", None)
        if admin:
            environment["COUCHETTE_ADMIN"] = f"{ADMIN}:{PASSWORD}"
        self.process = subprocess.Popen(
            [binary, "serve", "--port", "0", "--data-dir", self.directory + "/data", "--log-level", "warning"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment, text=True)
        banner = self.process.stdout.readline()
        if "listening on" not in banner:
            raise RuntimeError(f"couchette did not start: {banner!r}")
        self.base = banner.split("listening on ")[1].split("/ ")[0]
        self.auth = "Basic " + base64.b64encode(f"{ADMIN}:{PASSWORD}".encode()).decode()

    def request(self, method, path, body=None, expect=None):
        return self.call(method, path, body, expect)[1]

    def call(self, method, path, body=None, expect=None):
        """The status and parsed JSON of one request, as the server's admin."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Authorization", self.auth)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                status, text = response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        if expect is not None and status not in expect:
            raise AssertionError(f"{method} {path}: {status} {text}")
        return status, (json.loads(text) if text else None)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


class Page:
    def __init__(self, base, screenshots):
        options = webdriver.ChromeOptions()
        options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800",
                         "--disable-gpu", "--no-first-run", "--disable-extensions", "--disable-background-networking"]:
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
        self.driver = webdriver.Chrome(service=service, options=options)
        self.driver.set_window_size(1280, 800)
        self.base = base
        self.screenshots = screenshots

    def open(self, fragment):
        self.driver.get(f"{self.base}/_utils/#{fragment}")

    def go(self, fragment):
        self.driver.execute_script("location.hash = arguments[0]", fragment)

    def wait(self, condition, message):
        # A screen re-renders as answers arrive: an element seen a moment ago may be replaced.
        return WebDriverWait(self.driver, TIMEOUT, poll_frequency=0.1,
                             ignored_exceptions=[StaleElementReferenceException, NoSuchElementException]).until(condition, message)

    def value(self, selector):
        """The value of a control, read in one step in the page."""
        return self.driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.value : null", selector)

    def find(self, selector):
        return self.wait(EC.visibility_of_element_located((By.CSS_SELECTOR, selector)), f"no visible {selector}")

    def present(self, selector):
        return self.wait(EC.presence_of_element_located((By.CSS_SELECTOR, selector)), f"no {selector}")

    def click(self, selector):
        """Clicks what `selector` finds, again if the screen redrew it in between."""
        def attempt(driver):
            element = driver.find_element(By.CSS_SELECTOR, selector)
            if not element.is_displayed() or not element.is_enabled():
                return False
            element.click()
            return True
        self.wait(attempt, f"could not click {selector}")

    def text_in(self, selector, text):
        self.wait(EC.text_to_be_present_in_element((By.CSS_SELECTOR, selector), text), f"{text!r} never in {selector}")

    def heading(self, text):
        self.text_in("main h1", text)

    def type(self, selector, text):
        element = self.find(selector)
        element.clear()
        element.send_keys(text)
        return element

    def confirm(self):
        """Presses the confirming button of the open dialog."""
        self.find("dialog[open] button.danger").click()
        self.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, "dialog[open]"), "the dialog stayed open")

    def unlabelled(self):
        """Controls of the screen without an accessible name (a label, aria-label or text)."""
        return self.driver.execute_script("""
            const named = (e) => e.getAttribute('aria-label') || (e.id && document.querySelector(`label[for="${e.id}"]`))
                || e.closest('label') || (e.tagName === 'BUTTON' && e.textContent.trim());
            return [...document.querySelectorAll('input, select, textarea, button')]
                .filter((e) => e.type !== 'hidden' && !named(e)).map((e) => e.outerHTML.slice(0, 120));""")

    def shoot(self, name, at=None):
        """Saves the window as SCREENSHOTS/name.png, scrolled to `at` (a selector) if given;
        every control shown must have a label."""
        assert not self.unlabelled(), self.unlabelled()
        if at:
            self.driver.execute_script("document.querySelector(arguments[0]).scrollIntoView()", at)
        if self.screenshots:
            self.driver.save_screenshot(os.path.join(self.screenshots, f"{name}.png"))

    def quit(self):
        self.driver.quit()


def sign_in(page, server):
    page.open("/")
    page.find("#sign-in")
    page.shoot("sign-in")
    page.type("#sign-in input[name=name]", ADMIN)
    # By keyboard: Enter in the password field submits the form.
    page.type("#sign-in input[name=password]", PASSWORD + Keys.ENTER)
    page.text_in("#signed-in", f"Signed in as {ADMIN}")


def create_database(page, server):
    page.go("#/")
    page.type("#create-db input", "alpha")
    page.click("#create-db button[type=submit]")
    page.heading("alpha")
    assert server.request("GET", "/alpha", expect=[200])["db_name"] == "alpha"
    server.request("PUT", "/bravo", expect=[201])
    page.go("#/")
    page.find('#databases tr[data-db="alpha"]')
    page.find('#databases tr[data-db="bravo"]')
    page.type("input[type=search]", "alp")
    page.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, '#databases tr[data-db="bravo"]'), "search kept bravo")
    page.find('#databases tr[data-db="alpha"]')
    page.shoot("databases")

    page.go("#/db/alpha/security")
    page.type("#security-members-names", "bob, carol")
    page.type("#security-admins-roles", "editors")
    page.click("#security-form button[type=submit]")
    page.wait(lambda d: server.request("GET", "/alpha/_security").get("members", {}).get("names") == ["bob", "carol"],
              "the security object was not saved")
    assert server.request("GET", "/alpha/_security")["admins"]["roles"] == ["editors"]
    server.request("PUT", "/alpha/_security", {}, expect=[200])


def create_and_edit_document(page, server):
    page.go("#/db/alpha/new")
    page.present("#doc-editor")
    page.type("#doc-editor", '{"_id": "note", "text": "hello", "tags": ["a"]}')
    page.click("#save-doc")
    page.heading("note")
    assert server.request("GET", "/alpha/note", expect=[200])["text"] == "hello"
    first_rev = server.request("GET", "/alpha/note")["_rev"]

    body = json.loads(page.value("#doc-editor"))
    assert body["_rev"] == first_rev, body
    body["text"] = "edited"
    page.type("#doc-editor", json.dumps(body))
    page.click("#save-doc")
    page.wait(lambda d: server.request("GET", "/alpha/note")["text"] == "edited", "the edit was not saved")
    page.wait(lambda d: '"_rev": "2-' in (page.value("#doc-editor") or ""), "the editor did not reload the new revision")

    # A stale revision: the server's conflict, shown as it answered it.
    body["text"] = "stale"
    page.type("#doc-editor", json.dumps(body))
    page.click("#save-doc")
    page.text_in("#doc-errors", '409 {"error":"conflict","reason":"Document update conflict."}')
    assert server.request("GET", "/alpha/note")["text"] == "edited"
    page.click(f'#history button[aria-label="View revision {first_rev}"]')
    page.text_in("#revision-view", '"text": "hello"')


def mango_query(page, server):
    """The selector box posts to _find: its documents, or the server's error as returned."""
    page.go("#/db/alpha")
    page.find('#documents tr[data-id="note"]')
    page.click("#find-panel summary")
    page.type("#find-form textarea", '{"selector": {"text": "edited"}}')
    page.click("#find-form button[type=submit]")
    status, found = server.call("POST", "/alpha/_find", {"selector": {"text": "edited"}})
    if status == 200:
        page.find('#documents[data-mode="find"] tr[data-id="note"]')
        assert len(page.driver.find_elements(By.CSS_SELECTOR, "#documents tr[data-id]")) == len(found["docs"])
    else:
        page.text_in(".error", f'The server answered {status} {json.dumps(found, separators=(",", ":"))}')


def view_query(page, server):
    """A design document's view, picked in the page and queried with and without its reduce."""
    server.request("PUT", "/alpha/_design/app", {"views": {"by_text": {
        "map": "function (doc) { if (doc.text) emit(doc.text, 1); }", "reduce": "_count"}}}, expect=[201])
    page.go("#/")
    page.go("#/db/alpha")
    page.find('#documents tr[data-id="note"]')
    page.click("#views-panel summary")
    page.wait(lambda d: page.value("#view-form select") == "app/by_text", "the view is not offered")
    page.wait(lambda d: d.find_element(By.CSS_SELECTOR, "#view-reduce").is_selected(), "reduce not preselected")
    page.click("#view-form button[type=submit]")
    page.text_in('#documents[data-mode="view"] tr[data-key=\'"edited"\']', "1")
    page.click("#view-reduce")
    page.click("#view-form button[type=submit]")
    page.text_in('#documents[data-mode="view"] tr[data-key=\'"edited"\']', "note")


def attachments(page, server):
    page.go("#/db/alpha/doc/note")
    page.heading("note")
    content = "attached text, " * 2000
    path = os.path.join(tempfile.mkdtemp(prefix="couchette-ui-upload-"), "hello.txt")
    with open(path, "w") as file:
        file.write(content)
    page.present("#attachment-file").send_keys(path)
    page.wait(lambda d: page.value("#attachment-name") == "hello.txt",
              "the name was not taken from the file")
    page.click("#upload-form button[type=submit]")
    row = page.find('#attachments tr[data-attachment="hello.txt"]')
    stub = server.request("GET", "/alpha/note")["_attachments"]["hello.txt"]
    assert stub["length"] == len(content), stub
    link = row.find_element(By.CSS_SELECTOR, "a[download]")
    downloaded = page.driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0].href, {credentials: 'same-origin'}).then(r => r.text()).then(done, e => done(String(e)));", link)
    assert downloaded == content, downloaded[:80]
    page.shoot("document")


def conflicts(page, server):
    server.request("PUT", "/left", expect=[201])
    server.request("PUT", "/left/shared", {"v": 1, "color": "red", "size": 3}, expect=[201])
    server.request("POST", "/_replicate", {"source": "left", "target": "right", "create_target": True}, expect=[200])
    left = server.request("GET", "/left/shared")
    right = server.request("GET", "/right/shared")
    server.request("PUT", "/left/shared", {**left, "v": 2, "color": "blue"}, expect=[201])
    server.request("PUT", "/right/shared", {**right, "v": 2, "color": "green", "extra": True}, expect=[201])
    server.request("POST", "/_replicate", {"source": "right", "target": "left"}, expect=[200])
    doc = server.request("GET", "/left/shared?conflicts=true")
    assert len(doc.get("_conflicts", [])) == 1, doc
    loser = doc["_conflicts"][0]

    page.go("#/db/left/doc/shared")
    page.heading("shared")
    page.find(".conflicts")
    columns = page.driver.find_elements(By.CSS_SELECTOR, ".conflicts article.revision")
    assert len(columns) == 2, len(columns)
    differing = {e.get_attribute("data-field") for e in page.driver.find_elements(By.CSS_SELECTOR, ".conflicts article.revision:first-child dd.differs")}
    same = {e.get_attribute("data-field") for e in page.driver.find_elements(By.CSS_SELECTOR, ".conflicts article.revision:first-child dd:not(.differs)")}
    assert differing == {"color", "extra"}, differing
    assert same == {"v", "size"}, same
    page.shoot("conflicts", at="#conflicts-title")
    page.click(f'.conflicts article.revision[data-rev="{loser}"] button')
    page.confirm()
    page.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, ".conflicts"), "the conflicts stayed")
    resolved = server.request("GET", "/left/shared?conflicts=true")
    assert "_conflicts" not in resolved and resolved["_rev"] == loser and resolved["color"] == "green", resolved


def replication(page, server):
    page.go("#/replication")
    page.heading("Replication")
    page.find("#jobs-feed")
    page.text_in("#jobs-feed", "live")
    Select(page.find("#replication-kind")).select_by_value("once")
    Select(page.find("#source-db")).select_by_value("alpha")
    page.type("#target-new", "alpha-copy")
    page.click("#replication-create-target")
    page.click("#replication-form button[type=submit]")
    page.text_in("#replication-outcome", "Done")
    page.find('#jobs tr[data-state="completed"]')
    assert server.request("GET", "/alpha-copy/note", expect=[200])["text"] == "edited"

    # A continuous _replicate job, stopped from its row.
    Select(page.find("#replication-kind")).select_by_value("continuous")
    Select(page.find("#source-db")).select_by_value("alpha")
    page.type("#target-new", "alpha-follow")
    page.click("#replication-form button[type=submit]")
    page.text_in("#replication-outcome", "Started")
    row = '#jobs tr[data-state="running"]:has(button)'
    page.find(row)
    page.click(f"{row} button")
    page.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, row), "the continuous job was not stopped")
    page.wait(lambda d: not any(t.get("continuous") for t in server.request("GET", "/_active_tasks")), "still in _active_tasks")

    # A persistent continuous one through _replicator, suspended and resumed from the page.
    Select(page.find("#replication-kind")).select_by_value("persistent")
    page.type("#replication-doc-id", "alpha-live")
    page.click("#replication-doc-continuous")
    # The source as a URL with credentials: sent once, never shown again.
    Select(page.find("#source-db")).select_by_visible_text("Another server (URL)…")
    page.type("#source-url", f"{server.base}/alpha")
    page.type("#source-user", ADMIN)
    page.type("#source-password", PASSWORD)
    page.type("#target-new", "alpha-live")
    page.click("#replication-form button[type=submit]")
    page.text_in("#replication-outcome", "_replicator/alpha-live")
    page.find('#replicator-docs tr[data-doc="alpha-live"]')
    assert page.value("#source-password") == ""
    assert PASSWORD not in page.driver.page_source
    assert PASSWORD not in page.driver.execute_script("return document.body.innerText")
    page.wait(lambda d: server.request("GET", "/alpha-live/note", expect=[200, 404]).get("text") == "edited",
              "the continuous replication did not copy")
    page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, '#replicator-docs tr[data-doc="alpha-live"][data-state="running"]'),
              "the persistent job is not shown running")
    page.shoot("replication", at="#jobs-feed")

    # A sync pair: one document, a push and a pull.
    server.request("PUT", "/alpha-sync", expect=[201])
    server.request("PUT", "/alpha-sync/from-the-other-side", {"n": 1}, expect=[201])
    Select(page.find("#replication-kind")).select_by_value("sync")
    page.type("#replication-doc-id", "alpha-sync")
    Select(page.find("#source-db")).select_by_value("alpha")
    page.type("#target-new", "alpha-sync")
    page.click("#replication-form button[type=submit]")
    page.text_in("#replication-outcome", "_replicator/alpha-sync")
    assert server.request("GET", "/_replicator/alpha-sync")["sync"] is True
    page.text_in('#replicator-docs tr[data-doc="alpha-sync"]', "sync pair")
    page.wait(lambda d: server.call("GET", "/alpha/from-the-other-side")[0] == 200
              and server.call("GET", "/alpha-sync/note")[0] == 200, "the pair did not copy both ways")
    page.click('#replicator-docs tr[data-doc="alpha-live"][data-state="running"] button:not(.danger)')
    page.find('#replicator-docs tr[data-doc="alpha-live"][data-state="suspended"]')
    assert server.request("GET", "/_replicator/alpha-live")["suspended"] is True
    page.click('#replicator-docs tr[data-doc="alpha-live"][data-state="suspended"] button:not(.danger)')
    page.wait(lambda d: "suspended" not in server.request("GET", "/_replicator/alpha-live"), "not resumed")
    page.find('#replicator-docs tr[data-doc="alpha-live"][data-state="running"]')


def live_changes(page, server):
    page.go("#/db/alpha/changes")
    page.text_in("#changes-state", "live")
    server.request("PUT", "/alpha/live-1", {"n": 1}, expect=[201])
    page.find('#changes-list li[data-id="live-1"]')
    page.click("#changes-toggle")
    page.text_in("#changes-state", "paused")
    server.request("PUT", "/alpha/live-2", {"n": 2}, expect=[201])
    page.click("#changes-toggle")
    page.find('#changes-list li[data-id="live-2"]')
    page.shoot("changes")


def server_page(page, server):
    page.go("#/server")
    page.heading("Server")
    page.text_in("#health-up", "ok")
    page.type("#new-user-name", "bob")
    page.type("#new-user-password", "bobs-secret")
    page.type("#new-user-roles", "readers")
    page.click("#create-user button[type=submit]")
    page.find('#users tr[data-user="bob"]')
    user = server.request("GET", "/_users/org.couchdb.user:bob", expect=[200])
    assert user["roles"] == ["readers"] and "password" not in user, user
    page.find('#users tr[data-user="bob"] input[type=password]').send_keys("a-new-secret")
    page.click('#users tr[data-user="bob"] button:not(.danger)')
    page.wait(lambda d: server.call("POST", "/_session", {"name": "bob", "password": "a-new-secret"})[0] == 200,
              "the new password does not sign in")

    page.type("#config-section", "ui_test")
    page.type("#config-key", "greeting")
    page.type("#config-value", "hello")
    page.click("#config-form button[type=submit]")
    page.wait(lambda d: server.call("GET", "/_node/_local/_config/ui_test/greeting")[1] == "hello", "not configured")
    assert page.present('#config input[aria-label="ui_test/greeting"]').get_attribute("value") == "hello"
    page.shoot("server")


def narrow_and_only_this_server(page, server):
    page.driver.set_window_size(420, 800)
    page.go("#/")
    page.find('#databases tr[data-db="alpha"]')
    page.shoot("databases-narrow")
    page.driver.set_window_size(1280, 800)
    origins = page.driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => new URL(e.name).origin)"
        ".concat([location.origin]).filter((o, i, all) => all.indexOf(o) === i)")
    assert origins == [server.base], origins
    # No script error and no request refused by the page's Content-Security-Policy, all along.
    problems = [entry["message"] for entry in page.driver.get_log("browser")
                if "Uncaught" in entry["message"] or "Content Security Policy" in entry["message"]]
    assert not problems, problems


def sign_out(page, server):
    page.click("#sign-out")
    page.find("#sign-in")


def admin_party(page, server):
    """A server with no admin: the page says everyone is one, and needs no sign-in."""
    party = Server(os.environ["COUCHETTE"], admin=False)
    try:
        page.driver.get(f"{party.base}/_utils/#/")
        page.text_in("#session .badge", "Admin party")
        page.find('#databases tr[data-db="_replicator"]')
        assert not page.driver.find_elements(By.CSS_SELECTOR, "#sign-in")
    finally:
        party.stop()


STEPS = [sign_in, create_database, create_and_edit_document, mango_query, view_query, attachments, conflicts, replication, live_changes,
         server_page, narrow_and_only_this_server, sign_out, admin_party]


def main():
    binary = os.environ["COUCHETTE"]
    screenshots = os.environ.get("SCREENSHOTS")
    if screenshots:
        os.makedirs(screenshots, exist_ok=True)
    server = Server(binary)
    page = None
    failed = False
    try:
        page = Page(server.base, screenshots)
        for step in STEPS:
            started = time.monotonic()
            try:
                step(page, server)
            except Exception:
                failed = True
                print(f"✘ {step.__name__}", file=sys.stderr)
                traceback.print_exc()
                if screenshots:
                    page.driver.save_screenshot(os.path.join(screenshots, f"failed-{step.__name__}.png"))
                break
            print(f"✔ {step.__name__} ({time.monotonic() - started:.1f} s)")
    finally:
        if page:
            page.quit()
        server.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
