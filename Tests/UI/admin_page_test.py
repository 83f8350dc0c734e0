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
    """A couchette on a loopback port (ephemeral unless given), its data in a temporary directory."""

    def __init__(self, binary, admin=True, port=0, environment=None):
        self.binary, self.admin, self.environment = binary, admin, environment or {}
        self.directory = tempfile.mkdtemp(prefix="couchette-ui-")
        self.auth = "Basic " + base64.b64encode(f"{ADMIN}:{PASSWORD}".encode()).decode()
        self.start(port)

    def start(self, port=0):
        """Starts the process (again, on the same data and `port`, after halt())."""
        environment = dict(os.environ, COUCHETTE_CHTTPD_AUTH__ITERATIONS="1000", **self.environment)
        environment.pop("COUCHETTE_ADMIN", None)
        if self.admin:
            environment["COUCHETTE_ADMIN"] = f"{ADMIN}:{PASSWORD}"
        self.process = subprocess.Popen(
            [self.binary, "serve", "--port", str(port), "--data-dir", self.directory + "/data", "--log-level", "warning"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment, text=True)
        banner = self.process.stdout.readline()
        if "listening on" not in banner:
            raise RuntimeError(f"couchette did not start: {banner!r}")
        self.base = banner.split("listening on ")[1].split("/ ")[0]
        self.port = int(self.base.rsplit(":", 1)[1])

    def request(self, method, path, body=None, expect=None):
        return self.call(method, path, body, expect)[1]

    def call(self, method, path, body=None, expect=None):
        """The status and parsed JSON of one request, as the server's admin (if it has one)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if self.admin:
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

    def halt(self):
        """Stops the process, keeping its data for start()."""
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def stop(self):
        self.halt()
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

    def code(self, textarea_id, text):
        """Replaces a code editor's text (CodeMirror's, else the text area's), as pasting would."""
        self.editor_ready(textarea_id)
        self.driver.execute_script("""
            const area = document.getElementById(arguments[0]);
            const cm = area.nextElementSibling && area.nextElementSibling.CodeMirror;
            if (cm) cm.setValue(arguments[1]);
            else { area.value = arguments[1]; area.dispatchEvent(new Event('input')); }""", textarea_id, text)

    def type_code(self, textarea_id, text):
        """Types into a code editor by keyboard: select all, then the keys."""
        self.editor_ready(textarea_id)
        if self.js("return document.getElementById(arguments[0]).closest('.code').dataset.editor", textarea_id) == "codemirror":
            self.driver.find_element(By.CSS_SELECTOR, f"#{textarea_id} + .CodeMirror").click()
            target = self.driver.switch_to.active_element
        else:
            target = self.driver.find_element(By.ID, textarea_id)
        target.send_keys(Keys.CONTROL, "a")
        target.send_keys(text)

    def editor_ready(self, textarea_id):
        self.wait(lambda d: d.execute_script(
            "const e = document.getElementById(arguments[0]); return !!e && e.closest('.code').dataset.editor !== 'loading'",
            textarea_id), f"the editor {textarea_id} never finished loading")

    def js(self, script, *arguments):
        return self.driver.execute_script(script, *arguments)

    def gone(self, selector, message):
        self.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, selector), message)

    def exactly(self, selector, text):
        self.wait(lambda d: d.find_element(By.CSS_SELECTOR, selector).text.strip() == text, f"{selector} never showed {text!r}")

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
    """The first screen of a server with an admin is a sign-in form, not an error."""
    page.open("/")
    page.find("main #sign-in")
    assert not page.driver.find_elements(By.CSS_SELECTOR, ".error"), "an error before signing in"
    assert page.driver.find_element(By.ID, "admin-party").get_attribute("hidden") is not None
    # A wrong password: the server's answer, and the form stays.
    page.type("#sign-in input[name=name]", ADMIN)
    page.type("#sign-in input[name=password]", "wrong" + Keys.ENTER)
    page.text_in("#sign-in .error", "401")
    page.shoot("sign-in")
    # By keyboard: Enter in the password field submits the form.
    page.type("#sign-in input[name=password]", PASSWORD + Keys.ENTER)
    page.text_in("#signed-in", f"Signed in as {ADMIN}")
    page.find('#databases tr[data-db="_replicator"]')


def create_database(page, server):
    page.go("#/")
    page.type("#create-db input[name=db-name]", "alpha")
    page.click("#create-db button[type=submit]")
    page.heading("alpha")
    assert server.request("GET", "/alpha", expect=[200])["db_name"] == "alpha"
    server.request("PUT", "/bravo", expect=[201])
    page.go("#/")
    page.find('#databases tr[data-db="alpha"]')
    page.find('#databases tr[data-db="bravo"]')
    page.type("input[type=search]", "alp")
    page.gone('#databases tr[data-db="bravo"]', "search kept bravo")
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


def partitioned_database(page, server):
    """A partitioned database created from the page, and its documents listed by partition."""
    page.go("#/")
    page.type("#create-db input[name=db-name]", "parts")
    page.click("#create-db-partitioned")
    page.click("#create-db button[type=submit]")
    page.heading("parts")
    page.find("#partitioned-badge")
    assert server.request("GET", "/parts")["props"] == {"partitioned": True}
    server.request("POST", "/parts/_bulk_docs", {"docs": [{"_id": "p1:a", "n": 1}, {"_id": "p1:b", "n": 2}, {"_id": "p2:c", "n": 3}]}, expect=[201])
    page.go("#/")
    page.go("#/db/parts")
    page.find('#documents tr[data-id="p2:c"]')
    page.type("#documents-partition", "p1")
    page.click("#range-form button[type=submit]")
    page.gone('#documents tr[data-id="p2:c"]', "the other partition stayed")
    page.find('#documents tr[data-id="p1:a"]')
    page.find('#documents tr[data-id="p1:b"]')


def create_and_edit_document(page, server):
    page.go("#/db/alpha/new")
    page.present("#doc-editor")
    page.editor_ready("doc-editor")
    # CodeMirror from Debian's package, served by the server itself, highlighting JSON.
    assert page.js("return document.querySelector('#doc-editor').closest('.code').dataset.editor") == "codemirror"
    page.type_code("doc-editor", '{"_id": "note", "text": "hello", "tags": ["a"]')
    page.text_in("#doc-editor-message", "Line 1")
    page.type_code("doc-editor", '{"_id": "note", "text": "hello", "tags": ["a"]}')
    page.wait(lambda d: page.js("return document.querySelector('#doc-editor').closest('.code').dataset.valid") == "yes",
              "valid JSON still flagged")
    assert page.driver.find_elements(By.CSS_SELECTOR, ".CodeMirror .cm-string"), "no highlighting"
    page.click("#save-doc")
    page.heading("note")
    assert server.request("GET", "/alpha/note", expect=[200])["text"] == "hello"
    first_rev = server.request("GET", "/alpha/note")["_rev"]

    page.editor_ready("doc-editor")
    body = json.loads(page.value("#doc-editor"))
    assert body["_rev"] == first_rev, body
    body["text"] = "edited"
    page.code("doc-editor", json.dumps(body))
    page.click("#save-doc")
    page.wait(lambda d: server.request("GET", "/alpha/note")["text"] == "edited", "the edit was not saved")
    page.wait(lambda d: '"_rev": "2-' in (page.value("#doc-editor") or ""), "the editor did not reload the new revision")

    # A stale revision: the server's conflict, shown as it answered it.
    body["text"] = "stale"
    page.code("doc-editor", json.dumps(body))
    page.click("#save-doc")
    page.text_in("#doc-errors", '409 {"error":"conflict","reason":"Document update conflict."}')
    assert server.request("GET", "/alpha/note")["text"] == "edited"
    page.click(f'#history button[aria-label="View revision {first_rev}"]')
    page.text_in("#revision-view", '"text": "hello"')
    # A document called "new" opens as itself, not as a blank new one.
    server.request("PUT", "/alpha/new", {"called": "new"}, expect=[201])
    page.go("#/db/alpha/doc/new")
    page.heading("new")
    page.wait(lambda d: '"called": "new"' in (page.value("#doc-editor") or ""), "the document called new did not open")
    server.request("DELETE", "/alpha/new?rev=" + server.request("GET", "/alpha/new")["_rev"], expect=[200])


def design_document(page, server):
    """A design document made in the page: a function that does not compile is refused with
    CouchDB's compilation_error shown on it; then its view runs with options, by pages."""
    server.request("POST", "/alpha/_bulk_docs", {"docs": [{"_id": f"n{i:02}", "text": f"t{i % 3}", "n": i} for i in range(30)]}, expect=[201])
    page.go("#/db/alpha/design")
    page.click("#new-design")
    page.heading("New design document")
    page.type("#design-name", "app")
    block = "#design-views .view-block"
    name = page.find(f'{block} input[aria-label="View name"]')
    name.clear()
    name.send_keys("by_text")
    map_id = page.js("return document.querySelector(arguments[0]).querySelector('.code textarea').id", block)
    page.code(map_id, "function (doc) { if (doc.text) emit(doc.text 1); }")
    Select(page.find(f'{block} select[aria-label="Reduce"]')).select_by_value("_count")
    # A filter, added from its section.
    page.click("#section-filters summary")
    page.click("#add-filters")
    filter_block = "#design-filters .function-block"
    page.find(f'{filter_block} input[aria-label="Filter name"]').send_keys("texts")
    filter_id = page.js("return document.querySelector(arguments[0]).querySelector('.code textarea').id", filter_block)
    page.code(filter_id, "function (doc, req) { return !!doc.text; }")
    page.click("#save-design")
    page.text_in("#design-errors", "compilation_error")
    page.text_in(f"#{map_id}-message", "Compilation of the map function in the 'by_text' view failed")
    assert server.call("GET", "/alpha/_design/app")[0] == 404
    page.js("document.querySelector('main h1').scrollIntoView()")
    page.shoot("design")

    page.code(map_id, "function (doc) { if (doc.text) emit(doc.text, doc.n); }")
    page.click(f"{block} button[aria-label^='Save and run']")
    page.heading("View by_text")
    saved = server.request("GET", "/alpha/_design/app", expect=[200])
    assert saved["views"]["by_text"]["reduce"] == "_count" and "texts" in saved["filters"], saved
    # Reduced and grouped by default: one row per text.
    page.text_in('#view-rows tr[data-key=\'"t0"\']', "10")
    # The map's rows, a key range, descending, with their documents, by pages of 10.
    page.click("#view-reduce")
    page.click("#view-include_docs")
    page.click("#view-descending")
    page.type("#view-startkey", '"t2"')
    page.type("#view-endkey", '"t1"')
    Select(page.find("#view-limit")).select_by_value("10")
    page.click("#view-query button[type=submit]")
    page.text_in("#view-url", "descending=true")
    page.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#view-rows tbody tr")) == 10, "not a page of 10")
    keys = {e.get_attribute("data-key") for e in page.driver.find_elements(By.CSS_SELECTOR, "#view-rows tbody tr")}
    assert keys == {'"t2"'}, keys
    page.click('nav.pager[aria-label="View pages"] button:nth-child(2)')
    page.wait(lambda d: {e.get_attribute("data-key") for e in d.find_elements(By.CSS_SELECTOR, "#view-rows tbody tr")} == {'"t1"'},
              "the second page does not hold t1")
    page.text_in("#view-rows", '"n":')
    # A key that is not JSON is caught before asking.
    page.type("#view-key", "t1")
    page.text_in("#view-option-errors", "key is not JSON")
    page.find("#view-key").send_keys(Keys.CONTROL, "a")
    page.find("#view-key").send_keys(Keys.BACKSPACE)
    page.gone("#view-option-errors p", "the error stayed")
    page.shoot("view")
    # Keys go in a POST body.
    for selector in ("#view-startkey", "#view-endkey"):
        page.type(selector, "")
    page.click("#view-descending")
    page.type("#view-keys", '["t0", "t2"]')
    page.click("#view-query button[type=submit]")
    page.text_in("#view-url", 'POST /alpha/_design/app/_view/by_text')
    page.wait(lambda d: {e.get_attribute("data-key") for e in d.find_elements(By.CSS_SELECTOR, "#view-rows tbody tr")} == {'"t0"'},
              "the first page of keys t0 and t2 does not hold t0 only")
    # Mango's design documents are not offered as views.
    server.request("POST", "/alpha/_index", {"index": {"fields": ["n"]}, "ddoc": "mango-n", "name": "by-n"}, expect=[200])
    page.go("#/db/alpha/design")
    page.find('#design-docs tr[data-ddoc="app"] a[aria-label="Run view app/by_text"]')
    page.text_in('#design-docs tr[data-ddoc="mango-n"]', "Mango index")
    assert not page.driver.find_elements(By.CSS_SELECTOR, '#design-docs tr[data-ddoc="mango-n"] a.chip')


def mango(page, server):
    """An index made from fields, picked by _explain beside the results, then deleted."""
    page.go("#/db/alpha/mango")
    page.find('#indexes tr[data-index="by-n"]')
    page.type("#index-fields", "text, n")
    page.type("#index-name", "by-text-n")
    page.click("#index-form button[type=submit]")
    page.find('#indexes tr[data-index="by-text-n"]')
    assert any(i["name"] == "by-text-n" for i in server.request("GET", "/alpha/_index")["indexes"])
    page.code("mango-query", '{"selector": {"text": "t1", "n": {"$gt": 10}}, "limit": 5}')
    page.click("#mango-form button[type=submit]")
    page.find('#explain-index[data-name="by-text-n"]')
    page.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#documents[data-mode=find] tbody tr")) == 5, "not 5 results")
    page.text_in("#mango-stats", "documents examined")
    page.shoot("mango", at="#mango-form")
    page.code("mango-query", '{"selector": {"other": 1}}')
    page.click("#mango-explain-only")
    page.find('#explain-index[data-type="special"]')
    page.click('#indexes tr[data-index="by-text-n"] button')
    page.confirm()
    page.gone('#indexes tr[data-index="by-text-n"]', "the index stayed")
    assert not any(i["name"] == "by-text-n" for i in server.request("GET", "/alpha/_index")["indexes"])


def maintenance(page, server):
    """Compaction of the database and of a design document's views, cleanup, _revs_limit, purge."""
    for i in range(5):
        note = server.request("GET", "/alpha/n01")
        server.request("PUT", "/alpha/n01", {**note, "i": i}, expect=[201])
    server.request("PUT", "/alpha/purge-me", {"x": 1}, expect=[201])
    page.go("#/db/alpha/maintenance")
    page.text_in("#db-sizes", "File")
    page.click("#compact-db")
    page.find("#compact-done")
    page.click('#view-compaction tr[data-ddoc="app"] button')
    page.find('#view-compaction tr[data-ddoc="app"] [data-started="yes"]')
    page.click("#view-cleanup")
    page.text_in("#compact-result", "cleaned up")
    page.type("#revs-limit", "500")
    page.click("#revs-limit-form button[type=submit]")
    page.wait(lambda d: server.request("GET", "/alpha/_revs_limit") == 500, "_revs_limit not set")
    page.type("#purge-id", "purge-me")
    page.click("#purge-form button[type=submit]")
    rev = server.request("GET", "/alpha/purge-me")["_rev"]
    page.click(f'#purge-revisions input[value="{rev}"]')
    page.shoot("maintenance")
    page.click("#purge-selected")
    page.confirm()
    page.text_in("#purge-outcome", rev)
    assert server.call("GET", "/alpha/purge-me")[0] == 404
    page.go("#/tasks")
    page.heading("Active tasks")
    page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "#tasks, #no-tasks"), "no task list")
    page.shoot("tasks")


def javascript_checks(page, server):
    """What the editor flags as you type in a function, before the server compiles it."""
    cases = [
        ("function (doc) { emit(doc._id, 1); }", None),
        ("(doc) => { emit(doc.a / 2, /[{(]/.test(doc.b)); }", None),
        ("function (doc) { var s = '}' + \"{\" + `${doc.x}`; /* { */ // (\n emit(s); }", None),
        ("async function (doc) { return (1 + 2) / 3; }", None),
        ("function (doc) { emit(doc._id, 1); ", "never closed"),
        ("function (doc) { emit(doc._id, 1)); }", "Unexpected ')'"),
        ("function (doc) { emit('x, 1); }", "Unterminated string"),
        ("function (doc) { /* emit } ", "Unterminated comment"),
        ("emit(doc._id, 1)", "Not a function"),
        ("", "Empty"),
    ]
    page.go("#/")
    results = page.driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('./js/editor.js').then((m) => done(arguments[0].map((source) => m.checkFunction(source))), (e) => done(String(e)));""",
        [source for source, _ in cases])
    for (source, expected), result in zip(cases, results):
        if expected is None:
            assert result is None, (source, result)
        else:
            assert result and expected in result["message"], (source, result)


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
    """Every kind of replication from the form: one-shot by document IDs, continuous, persistent
    by selector from a URL with credentials, by filter with query_params, with an interval, a
    sync pair; suspended and resumed; a finished job offers no Suspend."""
    page.go("#/replication")
    page.heading("Replication")
    Select(page.find("#replication-kind")).select_by_value("once")
    Select(page.find("#source-db")).select_by_value("alpha")
    page.type("#target-new", "alpha-copy")
    page.click("#replication-create-target")
    Select(page.find("#replication-selection")).select_by_value("doc_ids")
    page.type("#replication-doc-ids", "note, n00")
    page.click("#replication-form button[type=submit]")
    page.text_in("#replication-outcome", "Done")
    copied = server.request("GET", "/alpha-copy/_all_docs")
    assert [row["id"] for row in copied["rows"]] == ["n00", "note"], copied

    # A continuous _replicate job, stopped from the dashboard.
    Select(page.find("#replication-kind")).select_by_value("continuous")
    Select(page.find("#replication-selection")).select_by_value("all")
    Select(page.find("#source-db")).select_by_value("alpha")
    page.type("#target-new", "alpha-follow")
    page.click("#replication-form button[type=submit]")
    page.text_in("#replication-outcome", "Started")
    page.go("#/sync")
    page.text_in("#jobs-feed", "live")
    stop = '.sync-card[data-doc=""] button[aria-label^="Stop"]'
    page.click(stop)
    page.gone(stop, "the continuous job was not stopped")
    page.wait(lambda d: not any(t.get("continuous") for t in server.request("GET", "/_active_tasks")), "still in _active_tasks")

    # A persistent continuous one through _replicator, by selector, its source a URL with credentials.
    page.go("#/replication")
    Select(page.find("#replication-kind")).select_by_value("persistent")
    page.type("#replication-doc-id", "alpha-live")
    page.click("#replication-doc-continuous")
    Select(page.find("#source-db")).select_by_visible_text("Another server (URL)…")
    page.type("#source-url", f"{server.base}/alpha")
    page.type("#source-user", ADMIN)
    page.type("#source-password", PASSWORD)
    page.type("#target-new", "alpha-live")
    page.click("#replication-create-target")
    Select(page.find("#replication-selection")).select_by_value("selector")
    page.code("replication-selector", '{"text": "edited"}')
    page.click("#replication-form button[type=submit]")
    page.text_in("#replication-outcome", "_replicator/alpha-live")
    page.find('#replicator-docs tr[data-doc="alpha-live"]')
    assert page.value("#source-password") == ""
    assert PASSWORD not in page.driver.page_source
    assert PASSWORD not in page.driver.execute_script("return document.body.innerText")
    page.wait(lambda d: server.request("GET", "/alpha-live/note", expect=[200, 404]).get("text") == "edited",
              "the continuous replication did not copy")
    assert server.request("GET", "/_replicator/alpha-live")["selector"] == {"text": "edited"}
    assert server.call("GET", "/alpha-live/n00")[0] == 404
    page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, '#replicator-docs tr[data-doc="alpha-live"][data-state="running"]'),
              "the persistent job is not shown running")

    # One-shot through a filter with query_params: once completed, nothing to suspend.
    Select(page.find("#source-db")).select_by_value("alpha")
    page.type("#replication-doc-id", "alpha-filtered")
    page.click("#replication-doc-continuous")
    page.type("#target-new", "alpha-filtered")  # created: "Create the target" is still ticked
    Select(page.find("#replication-selection")).select_by_value("filter")
    page.type("#replication-filter", "app/texts")
    page.code("replication-query-params", '{"kind": "texts"}')
    page.click("#replication-more summary")
    page.type("#replication-worker_batch_size", "50")
    page.click("#replication-form button[type=submit]")
    page.text_in("#replication-outcome", "_replicator/alpha-filtered")
    stored = server.request("GET", "/_replicator/alpha-filtered")
    assert stored["filter"] == "app/texts" and stored["query_params"] == {"kind": "texts"} and stored["worker_batch_size"] == 50, stored
    completed = '#replicator-docs tr[data-doc="alpha-filtered"][data-state="completed"]'
    page.find(completed)
    assert [b.text for b in page.driver.find_elements(By.CSS_SELECTOR, f"{completed} button")] == ["Delete"]
    assert server.request("GET", "/alpha-filtered/n05", expect=[200])["text"] == "t2"
    assert server.call("GET", "/alpha-filtered/_design/app")[0] == 404

    # Every hour: the next run is shown.
    Select(page.find("#replication-selection")).select_by_value("all")
    page.type("#replication-doc-id", "alpha-hourly")
    page.type("#target-new", "alpha-hourly")
    page.type("#replication-interval", "3600")
    page.click("#replication-form button[type=submit]")
    page.text_in("#replication-outcome", "_replicator/alpha-hourly")
    assert server.request("GET", "/_replicator/alpha-hourly")["interval"] == 3600
    page.text_in('#replicator-docs tr[data-doc="alpha-hourly"] .next-run', "next run")
    page.shoot("replication", at="#replicator-docs")

    # A sync pair: one document, a push and a pull.
    server.request("PUT", "/alpha-sync", expect=[201])
    server.request("PUT", "/alpha-sync/from-the-other-side", {"n": 1}, expect=[201])
    Select(page.find("#replication-kind")).select_by_value("sync")
    page.type("#replication-doc-id", "alpha-sync")
    page.click("#replication-doc-continuous")
    page.type("#replication-interval", "")
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


def sync_dashboard(page, server):
    """A sync pair with another server: push and pull side by side, both going offline when the
    peer stops, with the reason, pending documents and history, and back when it restarts."""
    peer = Server(os.environ["COUCHETTE"])
    try:
        peer.request("PUT", "/remote", expect=[201])
        # A fresh form (the last step left this one filled in).
        page.go("#/tasks")
        page.heading("Active tasks")
        page.go("#/replication")
        page.heading("Replication")
        Select(page.find("#replication-kind")).select_by_value("sync")
        page.type("#replication-doc-id", "to-peer")
        page.click("#replication-doc-continuous")
        Select(page.find("#source-db")).select_by_value("alpha")
        Select(page.find("#target-db")).select_by_visible_text("Another server (URL)…")
        page.type("#target-url", f"{peer.base}/remote")
        page.type("#target-user", ADMIN)
        page.type("#target-password", PASSWORD)
        page.click("#replication-form button[type=submit]")
        page.text_in("#replication-outcome", "_replicator/to-peer")
        page.wait(lambda d: peer.call("GET", "/remote/note")[0] == 200, "the push did not reach the peer")

        page.go("#/sync")
        page.text_in("#jobs-feed", "live")
        card = '.sync-card[data-doc="to-peer"]'
        side = lambda role, states: ", ".join(f'{card} section[data-role="{role}"][data-state="{s}"]' for s in states)
        page.find(side("push", ["running", "idle"]))
        page.find(side("pull", ["running", "idle"]))
        # Side by side: the push on the left, the pull on its right.
        push, pull = (page.find(f'{card} section[data-role="{role}"]').rect for role in ("push", "pull"))
        assert push["y"] == pull["y"] and push["x"] < pull["x"], (push, pull)
        page.exactly(f'{card} section[data-role="push"] dd.pending', "0")
        page.find('.sync-card[data-doc="alpha-sync"] section[data-role="pull"]')

        peer.halt()
        server.request("PUT", "/alpha/while-offline", {"n": 1}, expect=[201])
        page.find(side("push", ["offline"]))
        page.find(side("pull", ["offline"]))
        page.wait(lambda d: d.find_element(By.CSS_SELECTOR, f'{card} section[data-role="push"] .reason').text.strip(), "no reason shown")
        page.text_in(f'{card} section[data-role="push"] dd.pending', "while-offline")
        page.shoot("sync-offline", at=card)

        peer.start(peer.port)
        page.find(side("push", ["running", "idle"]))
        page.find(side("pull", ["running", "idle"]))
        page.wait(lambda d: peer.call("GET", "/remote/while-offline")[0] == 200, "nothing replicated after the restart")
        page.click(f'{card} section[data-role="push"] details summary')
        page.find(f'{card} section[data-role="push"] ol.history li[data-state="offline"]')
        # Live redraws keep the keyboard where it was and what was opened open.
        server.request("PUT", "/alpha/after-restart", {"n": 2}, expect=[201])
        page.wait(lambda d: peer.call("GET", "/remote/after-restart")[0] == 200, "nothing replicated after the restart")
        page.wait(lambda d: "after-restart" not in page.js(f"return document.querySelector('{card}').innerText"), "pending never emptied")
        assert page.js(f"""return document.activeElement === document.querySelector('{card} section[data-role="push"] details > summary')
                           && document.querySelector('{card} section[data-role="push"] details').open""")
        page.exactly(f'{card} section[data-role="push"] dd.pending', "0")
        page.shoot("sync", at=card)
    finally:
        peer.stop()
    server.request("DELETE", "/_replicator/to-peer?rev=" + server.request("GET", "/_replicator/to-peer")["_rev"], expect=[200])


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
    page.go("#/sync")
    page.find('.sync-card[data-doc="alpha-sync"] .sync-side')
    page.shoot("sync-narrow")
    page.go("#/db/alpha/design/app")
    page.find("#save-design")
    assert page.js("return document.documentElement.scrollWidth") <= 420, "wider than the window"
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
    page.find("main #sign-in")
    # Going on without signing in: a public database reads, a refusal brings the sign-in
    # screen back, saying why.
    page.click("#continue-anonymous")
    page.heading("_design/app")
    page.go("#/")
    page.text_in("main #sign-in", "401")


def admin_party(page, server):
    """A server with no admin: the page says everyone is one, and needs no sign-in. This one has
    no CodeMirror: the editors are plain text areas, validated all the same."""
    party = Server(os.environ["COUCHETTE"], admin=False,
                   environment={"COUCHETTE_COUCHETTE__CODEMIRROR_DIR": "/nonexistent/codemirror"})
    try:
        page.driver.get(f"{party.base}/_utils/#/")
        page.text_in("#session .badge", "Admin party")
        page.find("#admin-party")
        page.text_in("#admin-party", "everyone who can reach it is one")
        page.find('#databases tr[data-db="_replicator"]')
        assert not page.driver.find_elements(By.CSS_SELECTOR, "#sign-in")
        page.shoot("admin-party")
        party.request("PUT", "/plain", expect=[201])
        page.go("#/db/plain/new")
        page.editor_ready("doc-editor")
        assert page.js("return document.querySelector('#doc-editor').closest('.code').dataset.editor") == "plain"
        page.type_code("doc-editor", '{"_id": "typed", "n": [1, 2}')
        page.text_in("#doc-editor-message", "Line 1")
        page.type_code("doc-editor", '{"_id": "typed", "n": [1, 2]}')
        page.click("#save-doc")
        page.heading("typed")
        assert party.request("GET", "/plain/typed", expect=[200])["n"] == [1, 2]
    finally:
        party.stop()


STEPS = [sign_in, create_database, partitioned_database, create_and_edit_document, design_document, mango, maintenance, javascript_checks,
         attachments, conflicts, replication, sync_dashboard, live_changes, server_page, narrow_and_only_this_server,
         sign_out, admin_party]


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
        # UI_ONLY=step,step runs only those (while working on them; later steps rely on earlier ones).
        only = set(filter(None, os.environ.get("UI_ONLY", "").split(",")))
        for step in [step for step in STEPS if not only or step.__name__ in only]:
            started = time.monotonic()
            try:
                step(page, server)
            except Exception:
                failed = True
                print(f"✘ {step.__name__}", file=sys.stderr)
                traceback.print_exc()
                if screenshots:
                    page.driver.save_screenshot(os.path.join(screenshots, f"failed-{step.__name__}.png"))
                print(page.js("return document.querySelector('main').innerText")[-4000:], file=sys.stderr)
                break
            print(f"✔ {step.__name__} ({time.monotonic() - started:.1f} s)")
    finally:
        if page:
            page.quit()
        server.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
