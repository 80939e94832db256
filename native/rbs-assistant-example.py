#!/usr/bin/env python3
"""The example assistant runtime in the default sandbox image.

The service runs an assistant's `config.command` in its sandbox with
RBS_API_URL, RBS_ASSISTANT_ID and RBS_ASSISTANT_TOKEN; this one shows the
contract with the standard library alone. On each start it reads its runtime
state, resolves the credential named by RBS_EXAMPLE_CREDENTIAL (its SHA-256,
never its value, goes into the state), reports a usage event, proposes
RBS_EXAMPLE_PATCH (JSON) as a config intent on its first start, counts its
starts in its home, and writes the state back with If-Match. Then it waits, as
a runtime waiting for work would. Run it with `config.command:
"rbs-assistant-example"`.
"""
import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.request

API = os.environ["RBS_API_URL"]
ME = os.environ["RBS_ASSISTANT_ID"]
TOKEN = os.environ["RBS_ASSISTANT_TOKEN"]


def call(method, path, body=None, headers=None):
    request = urllib.request.Request(
        API + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"authorization": "Bearer " + TOKEN, "content-type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null"), response.headers.get("etag")


def main():
    state, etag = call("GET", "/v1/assistants/%s/runtime-state" % ME)
    state = state["state"]
    boots = state.get("boots", 0) + 1
    credential = None
    name = os.environ.get("RBS_EXAMPLE_CREDENTIAL")
    if name:
        try:
            resolved, _ = call("POST", "/v1/assistants/resolve-credential", {"name": name})
            credential = {
                "name": name,
                "scope": resolved["scope"],
                "sha256": hashlib.sha256(resolved["value"].encode()).hexdigest(),
            }
        except urllib.error.HTTPError as error:
            credential = {"name": name, "error": error.code}
    call("POST", "/v1/assistants/%s/usage-events" % ME,
         {"model": os.environ.get("RBS_EXAMPLE_MODEL", "example"), "input_tokens": 10, "output_tokens": 5})
    patch = os.environ.get("RBS_EXAMPLE_PATCH")
    if patch and boots == 1:
        call("POST", "/v2/assistants/%s/config-intents" % ME,
             {"patch": json.loads(patch), "reason": "the example runtime asks"})
    home = os.path.expanduser("~/.assistant-boots")
    with open(home, "a") as f:
        f.write("%d\n" % boots)
    with open(home) as f:
        home_boots = len(f.read().splitlines())
    call("PUT", "/v1/assistants/%s/runtime-state" % ME,
         {"state": {**state, "boots": boots, "home_boots": home_boots, "credential": credential}},
         {"if-match": etag})
    print("assistant %s started (boot %d)" % (ME, boots), flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    try:
        main()
    except urllib.error.HTTPError as error:
        print("the service answered %d: %s" % (error.code, error.read().decode(errors="replace")), file=sys.stderr)
        sys.exit(1)
