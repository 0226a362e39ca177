"""pylxd's own `Client.authenticate(token)` against Cohort's LXD-style API.

    python authenticate.py https://HOST:PORT CLIENT_CRT CLIENT_KEY SERVER_CRT TOKEN

Prints one JSON object: whether the client was trusted before and after, the user it acts as,
and the certificate pylxd read back; tests/tests/it/lxd_clients.rs asserts on it.
"""

import json
import sys

import pylxd

endpoint, crt, key, server_crt, token = sys.argv[1:6]
client = pylxd.Client(endpoint=endpoint, cert=(crt, key), verify=server_crt, timeout=60)
seen = {"before": client.trusted}
try:
    client.authenticate(token)
except Exception as e:  # reported, the Rust test decides
    seen["error"] = f"{type(e).__name__}: {e}"
seen["after"] = client.trusted
seen["user"] = client.host_info.get("auth_user_name")
seen["certificates"] = [c.fingerprint for c in client.certificates.all()] if client.trusted else []
print(json.dumps(seen))
