#!/usr/bin/env python3
"""Opens a page in headless Chromium and reports what it shows: its text once `--wait-for` appears
in it (after `--settle` more seconds, for charts drawn after their data arrives), and a PNG
screenshot. Drives Chromium through the DevTools protocol over a WebSocket, with the standard
library only.

Usage:
    page_capture.py URL --wait-for TEXT [--screenshot OUT.png] [--text OUT.txt]
                    [--width 1000 --height 620] [--timeout 60] [--settle 3]
Exit status 1 when TEXT does not appear within the timeout (the page's text is printed).
"""

import argparse
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


class DevTools:
    """One WebSocket to a page target: send a command, read until its reply."""

    def __init__(self, url):
        host_port, path = url[len("ws://"):].split("/", 1)
        host, port = host_port.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {host_port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        response = b""
        while b"\r\n\r\n" not in response:
            response += self.sock.recv(4096)
        if b" 101 " not in response.split(b"\r\n")[0]:
            raise RuntimeError(f"WebSocket handshake refused: {response[:200]!r}")
        self.buffer = response.split(b"\r\n\r\n", 1)[1]
        self.next_id = 0

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError("DevTools closed the connection")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _frame(self):
        message = b""
        while True:
            first, second = self._read(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            message += self._read(length)
            if first & 0x80:  # FIN
                return message

    def call(self, method, **params):
        self.next_id += 1
        payload = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        while True:
            reply = json.loads(self._frame())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("url")
    p.add_argument("--wait-for", required=True)
    p.add_argument("--screenshot")
    p.add_argument("--text")
    p.add_argument("--width", type=int, default=1000)
    p.add_argument("--height", type=int, default=620)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--settle", type=float, default=3)
    args = p.parse_args()

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        sys.exit("page_capture.py: no chromium on PATH (scripts/setup-deps.sh installs Debian's)")
    port = free_port()
    profile = tempfile.mkdtemp(prefix="page-capture-")
    chrome = subprocess.Popen([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               f"--remote-debugging-port={port}", f"--user-data-dir={profile}",
                               f"--window-size={args.width},{args.height}", "about:blank"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + args.timeout
        while True:
            try:
                targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2))
                page = next(t for t in targets if t["type"] == "page")
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        tools = DevTools(page["webSocketDebuggerUrl"])
        tools.call("Page.enable")
        tools.call("Page.navigate", url=args.url)
        text = ""
        while args.wait_for not in text:
            if time.time() > deadline:
                print(text)
                sys.exit(f"page_capture.py: '{args.wait_for}' did not appear on {args.url} within {args.timeout:g} s")
            time.sleep(0.5)
            text = tools.call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''",
                              returnByValue=True)["result"].get("value", "")
        time.sleep(args.settle)
        text = tools.call("Runtime.evaluate", expression="document.body.innerText", returnByValue=True)["result"]["value"]
        if args.text:
            open(args.text, "w").write(text)
        if args.screenshot:
            shot = tools.call("Page.captureScreenshot", format="png")
            open(args.screenshot, "wb").write(base64.b64decode(shot["data"]))
        print(f"'{args.wait_for}' shown on {args.url}" + (f"; screenshot {args.screenshot}" if args.screenshot else ""))
    finally:
        chrome.terminate()
        chrome.wait()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
