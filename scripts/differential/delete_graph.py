"""delete-graph.md written again from the spec alone: the sync (§3-§8) and the validating webhook
(§9), compared with the server on random WorkloadSets and Pods."""
import copy
import hashlib
import json
import random

from common import TALLY, dns_label, post

CONDITIONS = ("ADD_COND_RUNNING", "ADD_COND_SUCCEEDED", "ADD_COND_FAILED")
POLICIES = {"NEVER": "Never", "ON_FAILURE": "OnFailure", "ALWAYS": "Always"}
WORKLOAD = "metahooks.dev/workload"
SET = "metahooks.dev/workload-set"
DEPENDENCIES = "metahooks.dev/dependencies"
NPNR = "DelCondNotPendingNorRunning"
NAMES = ["a", "b", "c", "d", "e"]


def field(workload, key, default):
    """A workload's field, null read as absent (as the server reads it; a workload that is not an
    object has none of its fields)."""
    value = workload.get(key) if isinstance(workload, dict) else None
    return default if value is None else value


def shown(value):
    """A value in a §9 message: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def dependencies(workload):
    return field(workload, "dependencies", {})


def policy(workload):
    return field(workload, "restartPolicy", "NEVER")


def canonical(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def rendered(workload):
    r = copy.deepcopy(workload["template"])
    r.setdefault("spec", {})["restartPolicy"] = POLICIES[policy(workload)]
    return r


def pod_name(set_name, name, workload):
    digest = hashlib.sha256(canonical(rendered(workload)).encode()).hexdigest()
    return f"{set_name}-{name}-{digest[:10]}"


def problems(set_name, spec):
    """§9's problems in their order, then the cycle check's name (or None)."""
    workloads = spec.get("workloads")
    if workloads is None:
        return [], None
    if not isinstance(workloads, dict):
        return ["spec.workloads must be an object"], None
    found = []
    for name in sorted(workloads):
        w = workloads[name]
        if not dns_label(name):
            found.append(f"workload name '{name}' is not a DNS-1123 label")
        deps = dependencies(w)
        if not isinstance(deps, dict):
            found.append(f"workload '{name}': dependencies must be an object")
        else:
            for d in sorted(deps):
                if not dns_label(d):
                    found.append(f"workload '{name}': dependency name '{d}' is not a DNS-1123 "
                                 "label")
                if deps[d] not in CONDITIONS:
                    found.append(f"workload '{name}': dependency '{d}' has unknown condition "
                                 f"'{shown(deps[d])}' (expected ADD_COND_RUNNING, "
                                 "ADD_COND_SUCCEEDED or ADD_COND_FAILED)")
        if policy(w) not in POLICIES:
            found.append(f"workload '{name}': unknown restartPolicy '{shown(policy(w))}' "
                         "(expected NEVER, ON_FAILURE or ALWAYS)")
        template = field(w, "template", None)
        if not isinstance(template, dict):
            found.append(f"workload '{name}': template is missing")
            continue
        pod_spec = template.get("spec")
        containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
        if not isinstance(containers, list) or not containers:
            found.append(f"workload '{name}': template.spec.containers must be a non-empty list")
        # `<set>-<workload>-<10 hex>`: its length needs no valid policy or containers.
        if len(set_name) + len(name) + 12 > 253:
            found.append(f"workload '{name}': Pod name would exceed 253 characters")
    return found, (None if found else cycle(workloads))


def cycle(workloads):
    """§9's procedure, step for step."""
    visited, path, on_path = set(), [], set()
    for start in sorted(workloads):
        if start in visited:
            continue
        stack = [start]
        while stack:
            top = stack[-1]
            if top not in workloads:
                stack.pop()
                continue
            if top not in visited:
                visited.add(top)
                path.append(top)
                on_path.add(top)
            else:
                if path:
                    on_path.discard(path.pop())
                stack.pop()
            for d in sorted(dependencies(workloads[top])):
                if d not in visited:
                    stack.append(d)
                elif d in on_path:
                    return d
    return None


def pod_state(pod):
    if pod["metadata"].get("deletionTimestamp"):
        return ("Stopping", "RequestedAtRuntime")
    phase = (pod.get("status") or {}).get("phase")
    return {None: ("Pending", "Starting"), "Pending": ("Pending", "Starting"),
            "Running": ("Running", "Ok"), "Succeeded": ("Succeeded", "Ok"),
            "Failed": ("Failed", "ExecFailed")}.get(phase, ("Failed", "Unknown"))


HOLDS = {"ADD_COND_RUNNING": ("Running", "Ok"), "ADD_COND_SUCCEEDED": ("Succeeded", "Ok"),
         "ADD_COND_FAILED": ("Failed", "ExecFailed")}


def components(nodes, edges):
    """node -> its strongly connected component, by Tarjan (recursive: the graphs are tiny)."""
    index, low, comp, stack, on_stack = {}, {}, {}, [], set()

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in nodes:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp[w] = v
                if w == v:
                    break

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comp


def rebuilt(pod):
    m = pod["metadata"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": m["name"], "namespace": m.get("namespace"),
                         "labels": m.get("labels") or {},
                         "annotations": m.get("annotations") or {}},
            "spec": pod.get("spec")}


def desired(set_name, namespace, name, workload, pod):
    r = rendered(workload)
    meta = r.get("metadata") or {}
    labels = dict(meta.get("labels") or {}, **{SET: set_name, WORKLOAD: name})
    annotations = dict(meta.get("annotations") or {})
    annotations[DEPENDENCIES] = canonical(dependencies(workload))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": namespace, "labels": labels,
                         "annotations": annotations},
            "spec": r["spec"]}


def sync(request, teardown):
    """What §6-§8 answer, as {condition, children, workloads, deleteGraph[, finalized]}."""
    parent = request["parent"]
    set_name, namespace = parent["metadata"]["name"], parent["metadata"].get("namespace")
    spec = parent.get("spec") or {}
    pods = list(((request.get("children") or {}).get("Pod.v1") or {}).values())
    found, looped = problems(set_name, spec)
    if found:
        condition = ("False", "InvalidSpec", "; ".join(found))
    elif looped is not None:
        condition = ("False", "CycleInDependencies",
                     f"workload dependency '{looped}' is part of a cycle.")
    else:
        condition = ("True", "Valid", "")
    TALLY[f"delete-graph sync: {condition[1]}{', teardown' if teardown else ''}"] += 1
    if condition[0] == "False" and not teardown:
        old = parent.get("status") or {}
        return {"condition": condition,
                "children": sorted((rebuilt(p) for p in pods
                                    if not p["metadata"].get("deletionTimestamp")),
                                   key=lambda c: c["metadata"]["name"]),
                "workloads": {k: (v["state"], v["subState"])
                              for k, v in (old.get("workloads") or {}).items()},
                "deleteGraph": old.get("deleteGraph") or {}}
    workloads = {} if teardown else (spec.get("workloads") or {})
    names = {w: pod_name(set_name, w, workloads[w]) for w in workloads}

    def label(p):
        return (p["metadata"].get("labels") or {}).get(WORKLOAD)

    def terminating(p):
        return bool(p["metadata"].get("deletionTimestamp"))

    current, obsolete, by_workload = {}, [], {}
    for p in pods:
        w = label(p)
        if w is not None:
            by_workload.setdefault(w, []).append(p)
        if w in names and p["metadata"]["name"] == names[w]:
            current[w] = p
        else:
            obsolete.append(p)
    graph = {}
    for x in workloads:
        for d, c in dependencies(workloads[x]).items():
            if c == "ADD_COND_RUNNING":
                graph.setdefault(d, {})[x] = NPNR
    for p in obsolete:
        if label(p) is None:
            continue
        try:
            deps = json.loads((p["metadata"].get("annotations") or {}).get(DEPENDENCIES))
        except (TypeError, ValueError):
            continue
        for d, c in (deps.items() if isinstance(deps, dict) else ()):
            if c == "ADD_COND_RUNNING":
                graph.setdefault(d, {})[label(p)] = NPNR
    lingering = {label(p) for p in obsolete if not terminating(p) and label(p) is not None}
    component = components(lingering, {d: sorted(xs) for d, xs in graph.items()})

    def busy(p):
        return not terminating(p) and pod_state(p) in (("Pending", "Starting"), ("Running", "Ok"))

    kept, created, children = set(), set(), []
    for p in obsolete:
        if terminating(p):
            continue
        d, keep = label(p), False
        for x in graph.get(d, {}) if d is not None else ():
            if d in lingering and x in lingering and component[d] == component[x]:
                TALLY["delete-graph sync: an edge inside a loop of lingering workloads"] += 1
                watched = [current[x]] if x in current else []
            else:
                watched = by_workload.get(x, [])
            keep = keep or any(busy(q) for q in watched)
        TALLY[f"delete-graph sync: an obsolete Pod {'kept' if keep else 'deleted'}"] += 1
        if keep:
            kept.add(p["metadata"]["name"])
            children.append(rebuilt(p))
    for w in sorted(workloads):
        pod = current.get(w)
        if pod is not None and not terminating(pod):
            children.append(desired(set_name, namespace, w, workloads[w], names[w]))
            continue
        if by_workload.get(w):
            continue
        ready = all(d in current and not terminating(current[d])
                    and pod_state(current[d]) == HOLDS[c]
                    for d, c in dependencies(workloads[w]).items())
        TALLY[f"delete-graph sync: a workload {'created' if ready else 'waiting'}"] += 1
        if ready:
            created.add(w)
            children.append(desired(set_name, namespace, w, workloads[w], names[w]))
    status = {}
    for w in set(workloads) | set(by_workload):
        pod = current.get(w)
        if pod is not None and not terminating(pod):
            status[w] = pod_state(pod)
        elif by_workload.get(w):
            status[w] = ("Stopping", "WaitingToStop" if any(
                p["metadata"]["name"] in kept for p in by_workload[w]) else "RequestedAtRuntime")
        else:
            status[w] = ("Pending", "Starting" if w in created else "WaitingToStart")
    answer = {"condition": condition, "children": sorted(children,
                                                         key=lambda c: c["metadata"]["name"]),
              "workloads": status, "deleteGraph": graph}
    if teardown:
        answer["finalized"] = not pods
    return answer


def admission(set_name, spec):
    """§9: (allowed, denial message, warnings)."""
    found, looped = problems(set_name, spec)
    if found:
        return False, "; ".join(found), []
    if looped is not None:
        return False, f"workload dependency '{looped}' is part of a cycle.", []
    workloads = spec.get("workloads") or {}
    warnings = []
    for w in sorted(workloads):
        deps = dependencies(workloads[w])
        for d in sorted(deps):
            if d not in workloads:
                warnings.append(f"workload '{w}' depends on '{d}', which is not part of this "
                                "WorkloadSet; it waits until such a workload exists")
                continue
            then = policy(workloads[d])
            if (then == "ALWAYS" and deps[d] != "ADD_COND_RUNNING") or (
                    then == "ON_FAILURE" and deps[d] == "ADD_COND_FAILED"):
                warnings.append(f"workload '{w}': condition {deps[d]} on '{d}' can never hold "
                                f"with restartPolicy {then}")
    return True, None, warnings


def random_workload(rng, bad, name):
    template = {"spec": {"containers": [{"name": "main", "image": f"img:{rng.randint(1, 2)}"}]}}
    if rng.random() < 0.3:
        template["metadata"] = {"labels": {"tier": rng.choice(["x", "y"])}}
        if rng.random() < 0.3:
            template["metadata"]["labels"][WORKLOAD] = "spoof"
    if rng.random() < 0.2:
        template["metadata"] = dict(template.get("metadata", {}), annotations={"note": "n"})
    if rng.random() < 0.2:
        template["spec"]["restartPolicy"] = "Whatever"
    if rng.random() < 0.3:
        # What the canonical JSON of §3 escapes, and what it does not; keys that sort by byte.
        texts = ["é", "\u0001", "\u001f", "\u2028", '"q"\\', "🚀", "\x7f", "\t\n"]
        template["spec"]["containers"][0]["env"] = [
            {"name": rng.choice(["Z", "a", "é", "🚀", "a\u0000"]), "value": rng.choice(texts)}]
        template["spec"]["priority"] = rng.choice([0, -1, 2 ** 53, 2 ** 63, 1.5, 0.25])
        keys = rng.sample(["Z", "a", "é", "🚀", "a\u0000", "a0", "ﬀ"], 4)
        template["spec"]["nodeSelector"] = {k: rng.choice(texts) for k in keys}
    workload = {"template": template}
    # Mostly towards later names, so that most sets have no cycle.
    pool = NAMES + ["ghost"]
    if rng.random() < 0.85:
        pool = [n for n in pool if n > name]
    deps = {d: rng.choice(CONDITIONS) for d in rng.sample(pool, rng.randint(0, min(3, len(pool))))}
    if bad and deps and rng.random() < 0.1:
        deps[next(iter(deps))] = "ADD_COND_WHENEVER"
    if deps or rng.random() < 0.5:
        workload["dependencies"] = deps
    if rng.random() < 0.7:
        workload["restartPolicy"] = rng.choice(list(POLICIES))
    if rng.random() < 0.05:
        workload[rng.choice(["dependencies", "restartPolicy"])] = None
    if bad:
        # One way for a workload to be wrong (§9), now and then.
        r = rng.random()
        if r < 0.05:
            workload["restartPolicy"] = "SOMETIMES"
        elif r < 0.1:
            workload["template"] = rng.choice([None, "pod", {"spec": {"containers": []}},
                                               {"spec": {}}, {"metadata": {}}])
        elif r < 0.15:
            workload["dependencies"] = rng.choice([["a"], "a", 5])
        elif r < 0.2:
            workload["dependencies"] = {rng.choice(["B_1", "-a", "x" * 64]): CONDITIONS[0]}
        elif r < 0.25 and deps:
            workload["dependencies"] = dict(deps, **{next(iter(deps)): rng.choice([5, None])})
        elif r < 0.3:
            return rng.choice(["x", None, []])
    return workload


def random_pod(rng, set_name, namespace, workload, name):
    meta = {"name": name, "namespace": namespace, "uid": f"u-{name}"}
    if workload is not None:
        meta["labels"] = {WORKLOAD: workload, SET: set_name}
    deps = {d: rng.choice(CONDITIONS) for d in rng.sample(NAMES, rng.randint(0, 2))}
    r = rng.random()
    if r < 0.7:
        meta["annotations"] = {DEPENDENCIES: json.dumps(deps)}
    elif r < 0.8:
        meta["annotations"] = {DEPENDENCIES: "{not json"}
    elif r < 0.85:
        meta["annotations"] = {DEPENDENCIES: json.dumps(dict(deps, z="ADD_COND_SOMETIME"))}
    if rng.random() < 0.2:
        meta["deletionTimestamp"] = "2026-06-01T10:00:00Z"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
           "spec": {"containers": [{"name": "main", "image": "old"}]}}
    phase = rng.choice([None, "Pending", "Running", "Running", "Succeeded", "Failed", "Unknown"])
    if phase is not None:
        pod["status"] = {"phase": phase}
    return pod


def random_request(rng):
    # A set name long enough for a Pod name past 253 characters, now and then (§9).
    set_name, namespace = ("set" if rng.random() < 0.97 else "s" * 180), "ns"
    bad = rng.random() < 0.15
    names = rng.sample(NAMES, rng.randint(0, 5))
    if bad and rng.random() < 0.2:
        names.append(rng.choice(["Bad", "-x", "x" * 64, "x" * 63]))
    workloads = {n: random_workload(rng, bad, n) for n in names}
    pods = {}
    for w in NAMES + [None]:
        for _ in range(rng.choice([0, 0, 1, 1, 2])):
            if w in workloads and isinstance(field(workloads[w], "template", None), dict) and \
                    policy(workloads[w]) in POLICIES and rng.random() < 0.6:
                name = pod_name(set_name, w, workloads[w])
            else:
                name = f"{set_name}-{w}-old{rng.randint(0, 99)}"
            pods[name] = random_pod(rng, set_name, namespace, w, name)
    # Hook v1 keys a map by name, v2 by namespace/name: neither is read (§1).
    pods = {k if rng.random() < 0.5 else f"{namespace}/{k}": o for k, o in pods.items()}
    parent = {"apiVersion": "metahooks.dev/v1alpha1", "kind": "WorkloadSet",
              "metadata": {"name": set_name, "namespace": namespace, "uid": "p", "generation": 2},
              "spec": {"workloads": workloads if rng.random() < 0.99 else list(workloads)}}
    if rng.random() < 0.5:
        parent["status"] = {"workloads": {"a": {"state": "Running", "subState": "Ok",
                                                "message": ""}},
                            "deleteGraph": {"a": {"b": NPNR}}}
    return {"controller": {}, "parent": parent, "children": {"Pod.v1": pods}, "related": {},
            "finalizing": rng.random() < 0.15}


def server_view(answer):
    status = answer["status"]
    valid = status["conditions"][0]
    view = {"condition": (valid["status"], valid["reason"], valid["message"]),
            "children": answer["children"],
            "workloads": {k: (e["state"], e["subState"]) for k, e in status["workloads"].items()},
            "deleteGraph": status["deleteGraph"]}
    if "finalized" in answer:
        view["finalized"] = answer["finalized"]
    return view


def run(base, seed, count):
    differences = []
    for case in range(seed, seed + count):
        rng = random.Random(case)
        request = random_request(rng)
        route = rng.choice(["sync", "sync", "finalize"])
        want = sync(request, route == "finalize" or request["finalizing"])
        got = server_view(post(base, "/delete-graph/" + route, request))
        if got != want:
            differences.append(f"delete-graph/{route} case {case}: " + "; ".join(
                f"{k}: spec {json.dumps(want.get(k), sort_keys=True)}, server "
                f"{json.dumps(got.get(k), sort_keys=True)}"
                for k in sorted(want.keys() | got.keys()) if want.get(k) != got.get(k)))
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": f"u{case}", "operation": rng.choice(["CREATE", "UPDATE"]),
                              "kind": {"group": "metahooks.dev", "version": "v1alpha1",
                                       "kind": "WorkloadSet"},
                              "object": request["parent"]}}
        answer = post(base, "/delete-graph/validate", review)["response"]
        allowed, message, warnings = admission(request["parent"]["metadata"]["name"],
                                               request["parent"]["spec"])
        TALLY[f"delete-graph validate: {'allowed' if allowed else 'denied'}"] += 1
        got = (answer["allowed"], (answer.get("status") or {}).get("message"),
               answer.get("warnings") or [] if answer["allowed"] else [])
        if got != (allowed, message, warnings):
            differences.append(f"delete-graph/validate case {case}: spec "
                               f"{(allowed, message, warnings)}, server {got}")
    return differences
