"""What the spec models share: the call to the server, the name and duration rules, the tally."""
import collections
import datetime as dt
import json
import re
import urllib.error
import urllib.request

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DURATION = re.compile(r"(\d+)([hms])")

# Every comparison counts its cases here by outcome, so that a run shows which branches of the
# spec its random requests reached.
TALLY = collections.Counter()


def call(base, route, body):
    """The status and JSON answer of `route` to `body`."""
    request = urllib.request.Request(base + route, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def post(base, route, body):
    """The JSON answer of `route` to `body`; anything but a 200 raises."""
    status, answer = call(base, route, body)
    if status != 200:
        raise RuntimeError(f"{route}: {status} {answer}")
    return answer


def dns_label(s):
    return isinstance(s, str) and len(s) <= 63 and bool(_LABEL.match(s))


def dns_subdomain(s):
    """An object's name as Kubernetes checks it: a part between dots may pass 63 characters."""
    return isinstance(s, str) and 0 < len(s) <= 253 and bool(_SUBDOMAIN.match(s))


def dns_name(s):
    """A DNS name: labels of at most 63 characters, 253 in all."""
    return isinstance(s, str) and len(s) <= 253 and all(dns_label(p) for p in s.split("."))


def validity_seconds(text):
    """cert-rotation.md §3.4: `<integer><h|m|s>` groups, 24h when absent, at least 10m; None for
    a text that does not parse or is longer than the CAs' 87600h (DECISIONS)."""
    if text is None:
        text = "24h"
    if not isinstance(text, str) or not re.fullmatch(r"(\d+[hms])+", text):
        return None
    seconds = sum(int(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in _DURATION.findall(text))
    return None if seconds > 87600 * 3600 else max(seconds, 600)


def rfc3339(t):
    """Whole seconds, UTC, `Z`."""
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def close(a, b, slack=2):
    """Two resync delays computed a moment apart: equal, or both there and within `slack`."""
    return a == b or (a is not None and b is not None and abs(a - b) <= slack)
