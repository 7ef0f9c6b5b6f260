#!/usr/bin/env python3
"""Opens a `boxlayer report` page in headless Chromium and checks it as a reader would see it.

Independent of boxlayer: it drives the browser through the DevTools protocol over
`--remote-debugging-pipe` (standard library only) and asks the page itself:
  - no console errors, no uncaught exceptions, no failed loads (Log and Runtime domains);
  - every <img> decoded (complete, naturalWidth > 0) and none loaded from outside the page;
  - the expected number of statistics plots (`img.plot`) and at least N gallery tiles.
Optionally saves a full-page screenshot.

usage: check_report.py REPORT.html [--plots N] [--min-tiles N] [--screenshot OUT.png] [--chromium PATH]
Exits 0 when every check passes, 1 naming each failure, 2 when the browser cannot be driven.
"""

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAGE_QUERY = r"""
(() => {
  const imgs = [...document.images];
  return JSON.stringify({
    images: imgs.length,
    broken: imgs.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.alt || i.className),
    external: imgs.filter(i => !i.src.startsWith('data:')).map(i => i.src.slice(0, 80)),
    plots: document.querySelectorAll('img.plot').length,
    tiles: document.querySelectorAll('figure.flagged img').length,
    tables: document.querySelectorAll('table').length,
    links: [...document.querySelectorAll('link[href],script[src]')].length,
    width: document.documentElement.scrollWidth,
    height: document.documentElement.scrollHeight,
    title: document.title,
  });
})()
"""


def find_chromium(given):
    for name in [given, "chromium", "chromium-browser", "google-chrome", "chrome"]:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """Chromium driven over the DevTools pipe: NUL-terminated JSON messages on fds 3 (in) and 4 (out)."""

    def __init__(self, exe, profile):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        def wire():
            # Copy first: a pipe may already sit on fd 3 or 4, and dup2 onto itself would keep
            # its close-on-exec flag.
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, close_fds=False)
        os.close(to_child_r)
        os.close(from_child_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def read(self, timeout):
        deadline = time.time() + timeout
        while b"\0" not in self.buffer:
            if time.time() > deadline:
                raise TimeoutError("no message from the browser")
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed the pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None, timeout=60):
        want = self.send(method, params, session)
        while True:
            msg = self.read(timeout)
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, name, timeout=60):
        for i, e in enumerate(self.events):
            if e.get("method") == name:
                return self.events.pop(i)
        deadline = time.time() + timeout
        while time.time() < deadline:
            msg = self.read(deadline - time.time())
            if msg.get("method") == name:
                return msg
            self.events.append(msg)
        raise TimeoutError(f"no {name} event")

    def close(self):
        try:
            self.send("Browser.close")
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report")
    ap.add_argument("--plots", type=int, help="expected number of img.plot")
    ap.add_argument("--min-tiles", type=int, default=0, help="gallery tiles at least")
    ap.add_argument("--screenshot", help="write a full-page PNG here")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--chromium")
    args = ap.parse_args()

    exe = find_chromium(args.chromium)
    if exe is None:
        print("check_report: no Chromium found (apt-get install chromium)", file=sys.stderr)
        return 2
    url = Path(args.report).resolve().as_uri()
    failures = []
    with tempfile.TemporaryDirectory() as profile:
        browser = Browser(exe, profile)
        try:
            target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ["Page.enable", "Runtime.enable", "Log.enable"]:
                browser.call(domain, session=session)
            browser.call("Emulation.setDeviceMetricsOverride",
                         {"width": args.width, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=session)
            nav = browser.call("Page.navigate", {"url": url}, session=session)
            if nav.get("errorText"):
                failures.append(f"navigation failed: {nav['errorText']}")
            browser.wait_event("Page.loadEventFired", timeout=120)
            page = json.loads(browser.call("Runtime.evaluate", {"expression": PAGE_QUERY, "returnByValue": True},
                                           session=session)["result"]["value"])
            if args.screenshot:
                browser.call("Emulation.setDeviceMetricsOverride",
                             {"width": args.width, "height": min(page["height"], 16000), "deviceScaleFactor": 1,
                              "mobile": False}, session=session)
                shot = browser.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                                    session=session)
                Path(args.screenshot).write_bytes(base64.b64decode(shot["data"]))
            # Let late console messages arrive.
            time.sleep(0.3)
            browser.call("Runtime.evaluate", {"expression": "1"}, session=session)
        finally:
            browser.close()

    for e in browser.events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            failures.append(f"console error: {params.get('args')}")
        elif method == "Runtime.exceptionThrown":
            failures.append(f"exception: {params.get('exceptionDetails', {}).get('text')}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            failures.append(f"log error: {params['entry'].get('text')} {params['entry'].get('url', '')}")
    if page["broken"]:
        failures.append(f"{len(page['broken'])} images did not load: {page['broken'][:5]}")
    if page["external"]:
        failures.append(f"images from outside the page: {page['external'][:5]}")
    if page["links"]:
        failures.append(f"{page['links']} external stylesheets or scripts")
    if args.plots is not None and page["plots"] != args.plots:
        failures.append(f"{page['plots']} plots, expected {args.plots}")
    if page["tiles"] < args.min_tiles:
        failures.append(f"{page['tiles']} gallery tiles, expected at least {args.min_tiles}")
    print(json.dumps({k: page[k] for k in ["title", "images", "plots", "tiles", "tables", "width", "height"]}))
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
