"""How pylxd's own integration suite reaches Cohort instead of a local LXD: the one thing the
suite is adapted in. Loaded before the suite (as `sitecustomize`), it gives every `Client` made
without an endpoint, or with the suite's fixed local address, Cohort's LXD-style address and the
test's trusted certificate; nothing else of the suite (its tests, their assertions) changes.
The token the suite's `authenticate` tests redeem is `LXD_TOKEN`, as the suite reads it."""

import os

import pylxd.client

_ENDPOINT = os.environ["COHORT_LXD_ENDPOINT"]
_CERT = (os.environ["COHORT_LXD_CERT"], os.environ["COHORT_LXD_KEY"])
_SERVER_CERT = os.environ["COHORT_LXD_SERVER_CERT"]
_SUITES_OWN = ("https://127.0.0.1:8443", "https://127.0.0.1:8443/")
_init = pylxd.client.Client.__init__


# The certificate a client the suite points at its own address presents: a new one, not yet
# trusted, as a fresh machine's ~/.config/lxc/client.crt would be (it then redeems a token).
_NEW_CERT = (os.environ["COHORT_LXD_NEW_CERT"], os.environ["COHORT_LXD_NEW_KEY"])


def _to_cohort(self, endpoint=None, version="1.0", cert=None, verify=True, timeout=None, project=None):
    if endpoint is None:
        endpoint, cert, verify = _ENDPOINT, _CERT, _SERVER_CERT
    elif endpoint in _SUITES_OWN:
        endpoint, cert, verify = _ENDPOINT, cert or _NEW_CERT, _SERVER_CERT
    _init(self, endpoint, version, cert, verify, timeout, project)


pylxd.client.Client.__init__ = _to_cohort
