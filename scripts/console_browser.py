"""Headless Chromium for the console's tests (Tests/*/Console*Tests.swift), in one place.

The tests run their Selenium scripts with `python3 -c`; `ConsoleBrowser.run` (Tests/TestSupport)
puts this directory on the path first, so a script starts with `from console_browser import …`.
"""
import base64
import json
import time
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait


def settled(read):
    """What `read()` returns, read again if the page redrew a list under it (a stale element)."""
    for _ in range(50):
        try:
            return read()
        except StaleElementReferenceException:
            time.sleep(0.1)
    return read()


def chromium(width=412, height=900):
    """A headless Chromium the size of a phone by default (Debian's chromium and chromedriver)."""
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=%d,%d" % (width, height)):
        options.add_argument(flag)
    options.binary_location = "/usr/bin/chromium"
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def waiting(driver, seconds=20):
    """A wait that looks an element up again when the page redrew it mid-read."""
    return WebDriverWait(driver, seconds, ignored_exceptions=(StaleElementReferenceException,))


def api_reader(base):
    """GET of the HTTP API as an account reads it (Basic credentials): its JSON."""
    def api(path, user, password):
        token = base64.b64encode((user + ":" + password).encode()).decode()
        request = urllib.request.Request(base + path, headers={"Authorization": "Basic " + token})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())
    return api
