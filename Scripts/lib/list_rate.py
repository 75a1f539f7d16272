#!/usr/bin/env python3
"""Lists a whole Dropbox (emulator) tree recursively through list_folder + continue (or,
given a folder as third argument, that folder alone) and prints "ENTRIES SECONDS". Plain urllib over one keep-alive connection: the client stays out
of the way of what is measured."""
import http.client
import json
import sys
import time
from urllib.parse import urlparse

base, token = sys.argv[1], sys.argv[2]
folder = sys.argv[3] if len(sys.argv) > 3 else ""
url = urlparse(base)
conn = http.client.HTTPConnection(url.hostname, url.port)
headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}


def call(route, arg):
    conn.request("POST", "/2/" + route, body=json.dumps(arg), headers=headers)
    reply = conn.getresponse()
    body = reply.read()
    if reply.status != 200:
        sys.exit(f"{route}: HTTP {reply.status}: {body[:200]!r}")
    return json.loads(body)


start = time.monotonic()
page = call("files/list_folder", {"path": folder, "recursive": folder == ""})
count = len(page["entries"])
while page["has_more"]:
    page = call("files/list_folder/continue", {"cursor": page["cursor"]})
    count += len(page["entries"])
print(count, f"{time.monotonic() - start:.3f}")
