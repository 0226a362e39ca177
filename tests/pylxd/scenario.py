"""pylxd (from PyPI) against Cohort's LXD-style API: each call tests/tests/it/pylxd.rs asserts on.

    python scenario.py https://HOST:PORT CLIENT_CRT CLIENT_KEY SERVER_CRT

Runs the calls in order and prints one JSON object: per step its result, or {"error": "Type:
message"} when pylxd raised. The Rust test asserts on it, so this script decides nothing.
"""

import json
import sys

import pylxd
from pylxd.exceptions import LXDAPIException, NotFound

endpoint, crt, key, server_crt = sys.argv[1:5]
results = {}


def step(name, call):
    try:
        results[name] = call()
    except Exception as e:  # every failure is reported, none ends the run
        results[name] = {"error": f"{type(e).__name__}: {e}"}


# The server's certificate as `lxc remote add` saved it: pylxd verifies the controller with it.
client = pylxd.Client(endpoint=endpoint, cert=(crt, key), verify=server_crt, timeout=120)
step("trusted", lambda: client.trusted)
step("all", lambda: sorted(i.name for i in client.instances.all()))


def get_web1():
    web1 = client.instances.get("web1")
    return {"status": web1.status, "memory": web1.config.get("limits.memory")}


step("get", get_web1)


def missing():
    try:
        client.instances.get("no-such-container")
    except NotFound:
        return "NotFound"
    return "found"


step("missing", missing)


def execute():
    result = client.instances.get("web1").execute(
        ["sh", "-c", "echo out; echo err >&2; exit 3"]
    )
    return {"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr}


step("execute", execute)


def files():
    web1 = client.instances.get("web1")
    web1.files.put("/root/from-pylxd.txt", b"written by pylxd\n", mode=0o640)
    back = web1.files.get("/root/from-pylxd.txt")
    mode = web1.execute(["stat", "-c", "%a", "/root/from-pylxd.txt"]).stdout.strip()
    return {"content": back.decode(), "mode": mode}


step("files", files)


def lifecycle():
    seen = {}
    made = client.instances.create(
        {
            "name": "py1",
            "source": {"type": "image", "alias": "cohort/base"},
            "config": {"limits.memory": "256MiB"},
        },
        wait=True,
    )
    seen["created"] = made.status
    made.start(wait=True)
    made.sync()
    seen["started"] = made.status
    seen["hostname"] = made.execute(["hostname"]).stdout.strip()
    made.stop(wait=True)
    made.sync()
    seen["stopped"] = made.status
    made.delete(wait=True)
    seen["after_delete"] = sorted(i.name for i in client.instances.all())
    return seen


step("lifecycle", lifecycle)


def unsupported():
    try:
        client.profiles.all()
    except LXDAPIException as e:
        return {"refused": str(e)}
    return {"refused": None}


step("profiles", unsupported)
print(json.dumps(results))
