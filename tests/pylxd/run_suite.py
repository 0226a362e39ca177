"""pylxd's own integration suite (its source distribution's `integration/` folder, unchanged)
against Cohort's LXD-style API. Only how the suite connects is adapted, never what it asserts:

- `Client()` (the suite's local unix socket, which LXD trusts) is the controller, with a client
  certificate trusted as an admin;
- `Client("https://127.0.0.1:8443/")` (LXD's HTTPS listener, which the suite's `authenticate`
  tests join with `LXD_TOKEN`) is the controller too, with the certificate in
  `~/.config/lxc/` that no one trusts yet;
- every client pins the controller's certificate.

    python run_suite.py https://HOST:PORT ADMIN_CRT ADMIN_KEY SERVER_CRT SUITE_ROOT

Prints one JSON object: the ids of the tests that passed, failed (with the first line of why)
and were skipped (with the suite's reason); tests/tests/serial/pylxd_suite.rs decides.
"""

import json
import sys
import unittest

import pylxd.client

endpoint, admin_crt, admin_key, server_crt, suite_root = sys.argv[1:6]
lxd_https = "https://127.0.0.1:8443"
connect = pylxd.client.Client.__init__


def adapted(self, endpoint_=None, *args, **kwargs):
    if endpoint_ is None:
        endpoint_ = endpoint
        kwargs.setdefault("cert", (admin_crt, admin_key))
    elif endpoint_.rstrip("/") == lxd_https:
        endpoint_ = endpoint
    kwargs["verify"] = server_crt
    connect(self, endpoint_, *args, **kwargs)


pylxd.client.Client.__init__ = adapted

sys.path.insert(0, suite_root)
suite = unittest.TestLoader().discover(f"{suite_root}/integration", top_level_dir=suite_root)


class Collected(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.passed = []

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed.append(test.id())


def why(trace):
    lines = [l for l in trace.strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


result = Collected()
suite.run(result)
print(
    json.dumps(
        {
            "passed": sorted(result.passed),
            "failed": {t.id(): why(tb) for t, tb in result.failures + result.errors},
            "skipped": {t.id(): reason for t, reason in result.skipped},
        }
    )
)
