"""app-discovery.md's sync (§4-§5) and mutating webhook (§6) written again from the spec alone,
compared with the server on random AppDiscovery requests and reviews (the sync's clock is the
server's: the windows here are minutes away)."""
import base64
import datetime as dt
import hashlib
import json
import math
import random
import re
import time

from common import TALLY, close, dns_subdomain, post, rfc3339

K = "lifecycle.keptn.sh/v1"
MANAGED_BY = "app.kubernetes.io/managed-by"
APPS = ["shop", "cart", "pay"]
LAST_SECOND = dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc).timestamp()
MAX_RESYNC = 3153600000  # 100 years of 365 days (DECISIONS)
# RFC 3339, with its note's lower-case `t` and `z` and a space for `T` (§5.6).
_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(\.\d+)?"
                   r"([Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)")


def parse_time(s):
    m = _TIME.fullmatch(s) if isinstance(s, str) else None
    if not m:
        return None
    try:
        t = dt.datetime(*map(int, m.groups()[:6]), tzinfo=dt.timezone.utc).timestamp()
    except ValueError:
        return None
    zone = m.group(8)
    if zone not in "Zz":
        t -= (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return t + (float(m.group(7)) if m.group(7) else 0.0)


def app_version(workloads):
    if len(workloads) == 1:
        return workloads[0]["spec"]["version"]
    text = "".join(f'{w["metadata"]["name"]}-{w["spec"]["version"]}' for w in workloads)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def without_ours(annotations):
    return {k: v for k, v in (annotations or {}).items()
            if not k.startswith("metacontroller.k8s.io/")}


def rebuilt(o, namespace):
    m = o["metadata"]
    r = {"apiVersion": o["apiVersion"], "kind": o["kind"],
         "metadata": {"name": m["name"], "namespace": m.get("namespace") or namespace,
                      "labels": m.get("labels") or {},
                      "annotations": without_ours(m.get("annotations"))}}
    if "spec" in o:
        r["spec"] = o["spec"]
    return r


def selector_of(selector):
    """(matchLabels, expressions) of a label selector, or a problem text (DECISIONS)."""
    if selector is None:  # the CRD's default
        return {MANAGED_BY: "keptn"}, []
    if not isinstance(selector, dict):
        return "spec.selector"
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        return "spec.selector.matchLabels"
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        return "spec.selector.matchExpressions"
    for e in expressions:
        values = e.get("values") or [] if isinstance(e, dict) else None
        if (not isinstance(e, dict) or not isinstance(e.get("key"), str)
                or not isinstance(values, list) or not all(isinstance(v, str) for v in values)
                or e.get("operator") not in ("In", "NotIn", "Exists", "DoesNotExist")
                or (e["operator"] in ("In", "NotIn")) != bool(values)):
            return "spec.selector.matchExpressions"
    return labels, expressions


def selects(selector, labels):
    match_labels, expressions = selector
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    for e in expressions:
        value, values = labels.get(e["key"]), e.get("values") or []
        if not {"In": value in values, "NotIn": value not in values,
                "Exists": value is not None, "DoesNotExist": value is None}[e["operator"]]:
            return False
    return True


def only_generated(selector):
    """Whether the selector selects only objects labelled managed-by=keptn (DECISIONS)."""
    match_labels, expressions = selector
    return match_labels.get(MANAGED_BY) == "keptn" or any(
        e["key"] == MANAGED_BY and e["operator"] == "In" and all(v == "keptn" for v in e["values"])
        for e in expressions)


def managed(app):
    return (app["metadata"].get("labels") or {}).get(MANAGED_BY) == "keptn"


def in_namespace(objects, namespace):
    return [o for o in (objects or {}).values() if (o["metadata"].get("namespace") or namespace)
            == namespace]


def short_name(name, app):
    return name[len(app) + 1:] if name.startswith(app + "-") else name


def sync(request, now):
    """What §4 answers, as {children, apps, pending, ready, malformed, resync}."""
    parent = request["parent"]
    namespace = parent["metadata"]["namespace"]
    spec = parent.get("spec") or {}
    children, related = request.get("children") or {}, request.get("related") or {}
    requests = sorted(in_namespace(children.get("KeptnAppCreationRequest." + K), namespace),
                      key=lambda o: o["metadata"]["name"].encode())
    child_apps = {o["metadata"]["name"]: o
                  for o in in_namespace(children.get("KeptnApp." + K), namespace)}
    related_apps = {o["metadata"]["name"]: o
                    for o in in_namespace(related.get("KeptnApp." + K), namespace)}
    workloads = in_namespace(related.get("KeptnWorkload." + K), namespace)
    timeout = spec.get("timeoutSeconds")
    timeout = 30 if timeout is None else timeout
    selector = selector_of(spec.get("selector"))
    made_labels = dict(selector[0], **{MANAGED_BY: "keptn"}) if isinstance(selector, tuple) else {}
    if (not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 0
            or not isinstance(selector, tuple) or not selects(selector, made_labels)
            or not only_generated(selector)):
        TALLY["app-discovery sync: InvalidSpec"] += 1
        if isinstance(selector, tuple) and not only_generated(selector):
            TALLY["app-discovery sync: InvalidSpec, a selector of objects without managed-by=keptn"] += 1
        apps = sorted(child_apps.values(), key=lambda o: o["metadata"]["name"].encode())
        emitted = [rebuilt(o, namespace) for o in requests + apps]
        return {"children": emitted, "apps": {a["metadata"]["name"]: app_status(a) for a in apps},
                "pending": [], "ready": ("False", "InvalidSpec"), "malformed": [], "resync": None}
    kept, pending, malformed, due, waits = [], [], set(), {}, []
    for r in requests:
        name, app = r["metadata"]["name"], (r.get("spec") or {}).get("appName")
        if not dns_subdomain(app):
            kept.append(r)
            malformed.add(f"KeptnAppCreationRequest {name}")
            continue
        found = child_apps.get(app) or related_apps.get(app)
        if found is not None and not managed(found):
            TALLY["app-discovery sync: a request for a user-defined app"] += 1
            continue
        created = parse_time(r["metadata"].get("creationTimestamp"))
        if created is None:
            kept.append(r)
            malformed.add(f"KeptnAppCreationRequest {name}")
            continue
        single = (r["metadata"].get("annotations") or {}).get("keptn.sh/app-type") == \
            "single-service"
        # Past the year 9999 a window ends at its last second (DECISIONS).
        due_at = min(created + (0 if single else timeout), LAST_SECOND)
        if single or now > due_at:
            due.setdefault(app, []).append((r, due_at))
        else:
            TALLY["app-discovery sync: a request waiting"] += 1
            kept.append(r)
            pending.append((name, app, due_at))
            waits.append(min(max(1, math.ceil(due_at - now)), MAX_RESYNC))
    emitted_apps = {n: rebuilt(a, namespace) for n, a in child_apps.items()}
    for app in sorted(due, key=str.encode):
        existing = child_apps.get(app)
        if existing is None and app in related_apps and managed(related_apps[app]):
            existing = related_apps[app]
            controller = next((o for o in existing["metadata"].get("ownerReferences") or []
                               if o.get("controller") is True), None)
            foreign = controller is not None and controller["uid"] != parent["metadata"].get("uid")
            if foreign or not selects(selector, existing["metadata"].get("labels") or {}):
                # Another object controls it, or the selector does not match it: Metacontroller
                # could not write it (DECISIONS).
                TALLY["app-discovery sync: an app held, "
                      + ("another object controls it" if foreign else "not selected")] += 1
                malformed.add(f"KeptnApp {app}")
                for r, due_at in due[app]:
                    kept.append(r)
                    pending.append((r["metadata"]["name"], app, due_at))
                continue
        mine = sorted((w for w in workloads if (w.get("spec") or {}).get("app") == app),
                      key=lambda w: w["metadata"]["name"].encode())
        versionless = [w for w in mine if not isinstance((w.get("spec") or {}).get("version"), str)]
        if versionless:
            TALLY["app-discovery sync: an app held"] += 1
            malformed.update(f"KeptnWorkload {w['metadata']['name']}" for w in versionless)
            for r, due_at in due[app]:
                kept.append(r)
                pending.append((r["metadata"]["name"], app, due_at))
            continue
        version = app_version(mine)
        entries = [(short_name(w["metadata"]["name"], app), w["spec"]["version"]) for w in mine]
        if existing is None:
            TALLY["app-discovery sync: an app created"] += 1
            first = due[app][0][0]
            labels = dict(made_labels)
            annotations = without_ours(first["metadata"].get("annotations"))
            if "traceparent" not in annotations:
                h = hashlib.sha256(f"{namespace}/{app}/{version}".encode()).hexdigest()
                annotations["traceparent"] = f"00-{h[:32]}-{h[32:48]}-01"
            emitted_apps[app] = {
                "apiVersion": K, "kind": "KeptnApp",
                "metadata": {"name": app, "namespace": namespace, "labels": labels,
                             "annotations": annotations},
                "spec": {"version": version,
                         "workloads": [{"name": n, "version": v} for n, v in entries]}}
            continue
        TALLY["app-discovery sync: an app updated"] += 1
        old = (existing.get("spec") or {}).get("workloads")
        listed = [dict(e) if isinstance(e, dict) else e for e in old] \
            if isinstance(old, list) else []
        for n, v in entries:
            same = [e for e in listed if isinstance(e, dict) and e.get("name") == n]
            if same:
                same[0]["version"] = v
            else:
                listed.append({"name": n, "version": v})
        names = {n for n, _ in entries}
        app_spec = {"version": version,
                    "workloads": [e for e in listed if isinstance(e, dict)
                                  and e.get("name") in names]}
        if "revision" in (existing.get("spec") or {}):
            app_spec["revision"] = existing["spec"]["revision"]
        emitted_apps[app] = dict(rebuilt(existing, namespace), spec=app_spec)
    kept.sort(key=lambda o: o["metadata"]["name"].encode())
    apps = [emitted_apps[n] for n in sorted(emitted_apps, key=str.encode)]
    ready = ("False", "MalformedObjects") if malformed else ("True", "Synced")
    TALLY[f"app-discovery sync: {ready[1]}"] += 1
    return {"children": [rebuilt(o, namespace) for o in kept] + apps,
            "apps": {a["metadata"]["name"]: app_status(a) for a in apps},
            "pending": sorted(((n, a, rfc3339(math.floor(d))) for n, a, d in pending),
                              key=lambda p: p[0].encode()),
            "ready": ready, "malformed": sorted(malformed),
            "resync": min(waits) if waits else None}


def app_status(app):
    workloads = (app.get("spec") or {}).get("workloads")
    return (app["spec"].get("version"), len(workloads) if isinstance(workloads, list) else 0)


def random_request(rng, now):
    namespace = "shop"
    spec = {"selector": {"matchLabels": {MANAGED_BY: "keptn"}}}
    r = rng.random()
    if r < 0.6:
        spec["timeoutSeconds"] = rng.choice([0, 5, 30, 600, 10 ** 12, 2 ** 63])
    elif r < 0.65:
        spec["timeoutSeconds"] = rng.choice([-1, 1.5, "30", None])
    if rng.random() < 0.2:
        spec["selector"]["matchLabels"]["team"] = "a"
    r = rng.random()
    if r < 0.15:
        # Expressions the apps the hook makes meet or miss, and some Metacontroller cannot read.
        spec["selector"]["matchExpressions"] = [rng.choice([
            {"key": "team", "operator": "In", "values": ["a"]},
            {"key": "team", "operator": "Exists"},
            {"key": "stage", "operator": "NotIn", "values": ["test"]},
            {"key": MANAGED_BY, "operator": "In", "values": ["keptn"]},
            {"key": "legacy", "operator": "DoesNotExist", "values": None},
            {"key": "team", "operator": "in", "values": ["a"]},
            {"key": "team", "operator": "In", "values": []},
            {"key": "team", "operator": "Exists", "values": ["a"]},
            {"operator": "Exists"}])]
    elif r < 0.2:
        spec["selector"] = rng.choice([
            None, "x", {}, {"matchLabels": {MANAGED_BY: "helm"}}, {"matchLabels": {"a": 1}}])
    elif r < 0.3:
        # managed-by=keptn by an expression, or not required at all.
        del spec["selector"]["matchLabels"][MANAGED_BY]
        spec["selector"]["matchExpressions"] = rng.choice([[], [
            {"key": MANAGED_BY, "operator": "In", "values": ["keptn"]}], [
            {"key": MANAGED_BY, "operator": "In", "values": ["keptn", "klt"]}], [
            {"key": MANAGED_BY, "operator": "Exists"}], [
            {"key": MANAGED_BY, "operator": "NotIn", "values": ["helm"]}]])
    parent = {"apiVersion": "metahooks.dev/v1alpha1", "kind": "AppDiscovery",
              "metadata": {"name": "discovery", "namespace": namespace, "generation": 4,
                           "uid": "p"},
              "spec": spec}
    offsets = [-3600, -100, -20, 20, 100, 3600]
    requests = {}
    for i in range(rng.randint(0, 4)):
        name = f"req-{rng.randint(0, 9)}"
        meta = {"name": name, "namespace": namespace, "uid": f"k{i}",
                "creationTimestamp": rfc3339(now + rng.choice(offsets)),
                "labels": {MANAGED_BY: "keptn"}, "annotations": {}}
        if rng.random() < 0.05:
            meta["creationTimestamp"] = rng.choice([
                "yesterday", "2026-06-01T12:00:00.123456789Z", "2026-06-01t12:00:00z",
                "2026-06-01 12:00:00Z", "2026-02-30T12:00:00Z", "2026-06-01T24:00:00Z",
                "2026-06-01T12:00:60Z", "2026-06-01T12:00:00+25:00", "2026-06-01T12:00:00"])
        elif rng.random() < 0.2:
            zone = dt.timezone(dt.timedelta(hours=rng.choice([0, 2, -5])))
            moment = now + rng.choice(offsets) + rng.random()
            meta["creationTimestamp"] = dt.datetime.fromtimestamp(moment, zone).isoformat()
        if rng.random() < 0.1:
            del meta["namespace"]
        if rng.random() < 0.4:
            meta["annotations"]["keptn.sh/app-type"] = rng.choice(
                ["single-service", "multi-service", ""])
        if rng.random() < 0.3:
            meta["annotations"]["traceparent"] = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
        if rng.random() < 0.2:
            meta["annotations"]["metacontroller.k8s.io/last-applied-configuration"] = "{}"
        app = rng.choice(APPS) if rng.random() < 0.95 else rng.choice(
            ["", "Bad_Name", 7, None, "Shop", "shop.v2", "a" * 64 + ".x", "a" * 254, "-a"])
        requests[name] = {"apiVersion": K, "kind": "KeptnAppCreationRequest", "metadata": meta,
                          "spec": {"appName": app}, "status": "x"}
    # Hook v1 keys a map by name, v2 by namespace/name: neither is read (§4).
    requests = {k if rng.random() < 0.5 else f"{namespace}/{k}": o for k, o in requests.items()}
    child_apps, related_apps = {}, {}
    for app in APPS:
        r = rng.random()
        if r < 0.5:
            continue
        labels = {MANAGED_BY: "keptn"} if r < 0.85 else rng.choice([{}, {MANAGED_BY: "klt"}])
        if rng.random() < 0.5:
            labels["team"] = "a"
        listed = [{"name": rng.choice(["api", "web", "db", "old"]), "version": "0"}
                  for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.1:
            listed.append(rng.choice([7, {"version": "1"}, {"name": 3}, "api"]))
        app_spec = {"version": "v0", "workloads": listed}
        if rng.random() < 0.3:
            app_spec["revision"] = rng.randint(1, 3)
        if rng.random() < 0.1:
            del app_spec["workloads"]
        o = {"apiVersion": K, "kind": "KeptnApp",
             "metadata": {"name": app, "namespace": namespace, "uid": f"a-{app}", "labels": labels,
                          "annotations": {"metacontroller.k8s.io/x": "y", "keep": "me"}},
             "spec": app_spec, "status": {"x": 1}}
        key = app if rng.random() < 0.5 else f"{namespace}/{app}"
        owner = {"apiVersion": "metahooks.dev/v1alpha1", "kind": "AppDiscovery",
                 "name": "discovery", "uid": "p", "controller": True}
        if r < 0.85 and rng.random() < 0.7:
            o["metadata"]["ownerReferences"] = [owner]
            child_apps[key] = o
        else:
            # Not adopted: no owner, another AppDiscovery controls it, or this one does and the
            # children have not caught up; an owner that is not the controller changes nothing.
            other = dict(owner, name="other", uid="q")
            o["metadata"]["ownerReferences"] = rng.choice(
                [[], [other], [owner], [dict(other, controller=False)]])
        related_apps[key] = o
    workloads = {}
    for _ in range(rng.randint(0, 6)):
        app = rng.choice(APPS)
        name = rng.choice([f"{app}-api", f"{app}-web", "api", f"{app}x", f"{app}-db"])
        w_spec = {"app": app, "version": rng.choice(["1.0", "2.0", "v3"])}
        if rng.random() < 0.05:
            del w_spec["version"]
        elif rng.random() < 0.03:
            w_spec["version"] = 2
        if rng.random() < 0.05:
            del w_spec["app"]
        w_namespace = namespace if rng.random() < 0.9 else "elsewhere"
        workloads[f"{w_namespace}/{name}"] = {
            "apiVersion": K, "kind": "KeptnWorkload",
            "metadata": {"name": name, "namespace": w_namespace}, "spec": w_spec}
    return {"controller": {}, "parent": parent,
            "children": {"KeptnAppCreationRequest." + K: requests, "KeptnApp." + K: child_apps},
            "related": {"KeptnWorkload." + K: workloads, "KeptnApp." + K: related_apps}}


def without_empty_maps(children):
    """Empty label and annotation maps are left out by the server (DECISIONS)."""
    for c in children:
        for k in ("labels", "annotations"):
            if c["metadata"].get(k) == {}:
                del c["metadata"][k]
    return children


def mutate(request):
    """§6: the JSONPatch that labels a new KeptnAppCreationRequest, or None."""
    kind = request.get("kind") or {}
    labels = ((request.get("object") or {}).get("metadata") or {}).get("labels")
    if (request.get("operation") != "CREATE" or kind.get("group") != "lifecycle.keptn.sh"
            or kind.get("kind") != "KeptnAppCreationRequest"
            or (labels or {}).get(MANAGED_BY) == "keptn"):
        return None
    if labels is None:
        return [{"op": "add", "path": "/metadata/labels", "value": {MANAGED_BY: "keptn"}}]
    return [{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1managed-by",
             "value": "keptn"}]


def random_review(rng, uid):
    kind = rng.choice([("lifecycle.keptn.sh", "v1", "KeptnAppCreationRequest"),
                       ("lifecycle.keptn.sh", "v1beta1", "KeptnAppCreationRequest"),
                       ("lifecycle.keptn.sh", "v1", "KeptnApp"), ("", "v1", "Pod")])
    meta = {"name": "req", "namespace": "shop"}
    r = rng.random()
    if r < 0.6:
        meta["labels"] = {"team": "a"} if r < 0.2 else {}
        if rng.random() < 0.5:
            meta["labels"][MANAGED_BY] = rng.choice(["keptn", "klt", "helm"])
    request = {"uid": uid, "operation": rng.choice(["CREATE", "CREATE", "UPDATE", "DELETE"]),
               "kind": dict(zip(("group", "version", "kind"), kind)),
               "object": {"apiVersion": "lifecycle.keptn.sh/v1", "kind": kind[2],
                          "metadata": meta, "spec": {"appName": "shop"}}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def run(base, seed, count):
    differences = []
    for case in range(seed, seed + count):
        rng = random.Random(case)
        review = random_review(rng, f"u{case}")
        want = mutate(review["request"])
        TALLY[f"app-discovery mutate: {'a patch' if want else 'no patch'}"] += 1
        answer = post(base, "/app-discovery/mutate", review)["response"]
        got = json.loads(base64.b64decode(answer["patch"])) if "patch" in answer else None
        if got != want or not answer["allowed"] or (got is None) != ("patchType" not in answer):
            differences.append(f"app-discovery/mutate case {case}: spec {want}, server {answer}")
        rng = random.Random(case)
        now = time.time()
        request = random_request(rng, now)
        want = sync(request, now)
        answer = post(base, "/app-discovery/sync", request)
        status = answer["status"]
        ready = status["conditions"][0]
        got = {"children": answer["children"],
               "apps": {k: (v["version"], v["workloads"]) for k, v in status["apps"].items()},
               "pending": [(p["name"], p["appName"], p["dueAt"])
                           for p in status["pendingRequests"]],
               "ready": (ready["status"], ready["reason"]),
               "malformed": sorted({problem.split(": ")[0]
                                    for problem in ready["message"].split("; ")}
                                   if ready["reason"] == "MalformedObjects" else []),
               "resync": answer.get("resyncAfterSeconds")}
        if close(want["resync"], got["resync"]):
            got["resync"] = want["resync"]
        without_empty_maps(want["children"])
        without_empty_maps(got["children"])
        if got != want:
            differences.append(f"app-discovery/sync case {case}: " + "; ".join(
                f"{k}: spec {json.dumps(want[k], sort_keys=True)}, server "
                f"{json.dumps(got[k], sort_keys=True)}" for k in want if want[k] != got[k]))
    return differences
