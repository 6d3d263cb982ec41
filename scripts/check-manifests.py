#!/usr/bin/env python3
"""Offline checks of manifests/ (run by `make manifests-check`).

1. Renders the kustomize base and manifests/keptn-crds with `kubectl kustomize` and reads
   manifests/examples/.
2. Validates every built-in object against the Kubernetes schemas (kubernetes-validate, strict).
3. Validates every custom resource against the openAPIV3Schema of its CRD in the rendered set,
   and evaluates its CRD's validation rules (x-kubernetes-validations, CEL, as the API server
   does): an object a rule refuses, or a rule fails to evaluate on, would not be stored.
4. Checks the Metacontroller objects and the webhook configurations against the hook table that
   `metahooks list` prints: each URL or path is a route of the right kind, the parent CRD has the
   status subresource, every declared resource exists, and every route is wired somewhere. Each
   field of a CompositeController or DecoratorController spec is one Metacontroller's CRDs
   declare (any other is dropped by the API server, unread), and each update strategy one it
   knows.
5. Checks that the CRD of each parent whose name the hooks write as a label value on its children
   refuses a name longer than a label value can be (63 characters), and takes one that long.
6. Checks that the metahooks container runs `serve` with flags that `metahooks serve --help`
   lists, that its Pod's termination grace period is longer than the shutdown delay plus the
   drain timeout (else the kubelet kills it with requests still in flight), that its image's
   tag is the binary's version (`metahooks --version`), that a `prometheus.io/port`
   annotation names the port of `--listen`, and that `--listen` and `--tls-listen` are `[::]`
   on a port of the container (`[::]` takes IPv4 and IPv6: `0.0.0.0` would leave the Pod
   unreachable in an IPv6 or IPv6-first cluster, a loopback address everywhere).
7. Checks that every webhook configuration carries the label app.kubernetes.io/part-of=metahooks
   and holds one webhook: the README's deploy step finds them by that label and sets the
   caBundle of `/webhooks/0`. Each webhook passes what the API server checks beyond the schema:
   a name of at least three DNS labels, a timeout of 1 to 30 s, side effects None or
   NoneOnDryRun, a review version it speaks, at most 64 match conditions of distinct qualified
   names, and a service path that starts with /.
8. Checks that the base applies no CRD of Keptn's group (lifecycle.keptn.sh): where Keptn runs,
   which app discovery needs, they would replace Keptn's own. They are in manifests/keptn-crds
   for clusters without Keptn, rendered apart and checked with the rest. Every CRD the base
   applies is in the category `metahooks`, so that `kubectl get metahooks -A` (README) lists
   every object whose status a hook writes.
9. Checks that every Metacontroller hook calls a Service port these manifests define, and that
   the hooks of a controller with Secrets among its children or attachments (whose requests and
   answers carry private keys) call it over HTTPS, verified against the CA in the ConfigMap that
   the README's deploy step makes.
10. Evaluates each webhook's matchConditions (CEL, as the API server does) on every admission
   fixture of its route: a condition that leaves a call out (the API server then admits the
   object unchanged) may leave out only calls that the hook answers by allowing the object
   unchanged, must leave out at least one fixture (so that one shows what it is for), and must
   not fail to evaluate (the API server would then apply the failurePolicy). Each is type-checked
   as the API server does when it creates the configuration (scripts/cel_check.py): a condition
   cel-go refuses, or one that is not a bool, keeps the configuration from being created.
11. Renders manifests/network-policy (opt-in) and checks that its NetworkPolicy selects the
   metahooks Pods and restricts their ingress, leaving the port of `--tls-listen` open to every
   source (the API server's calls come from the control plane's addresses), the port of every
   Metacontroller hook open to Metacontroller's namespace, and `/metrics` to someone, while the
   port of `--listen` (every route, no authentication) is not open to every source.
12. Renders manifests/monitoring (opt-in, for the Prometheus Operator) and checks that its
   PodMonitor scrapes /metrics on the port of `--listen` of the metahooks Pods, under the job its
   alerts name; that the Prometheus it binds a Role to may list those Pods and reach that port
   through the NetworkPolicy; that every metric and label its alerts read is one the server exports
   (a `metahooks serve` started here, its /metrics linted by `promtool check metrics`); that the
   PrometheusRule's groups pass `promtool check rules` and the cases of scripts/alerts-test.yaml
   (`promtool test rules`), which test every alert; and that on Debian's Prometheus scraping that
   server, after requests that set off what its state can (a 400, a 429 and a 503 after 1.1 s on
   every route, frozen syncs of two controllers, connections past --max-connections, a certificate
   that ends in 10 days), exactly the alerts that watch for those fire, on each route and condition,
   and MetahooksDown once it has stopped (each alert's expression, without its `for`). The Grafana
   dashboard (manifests/monitoring/dashboard.json, imported) is read through Grafana's dashboard
   schema (grafana-foundation-sdk's models, generated from it), which must keep every field and
   value as written, and is held to what the alerts are held to: each panel's and variable's query,
   its variables put in as Grafana puts them, passes `promtool check rules` and reads only the job,
   metrics and labels the server gives; every metric the server exports is on a panel; each query
   shows series when that Prometheus runs it, the server having answered those requests, a sync
   on every route that keeps requests and an HTTPS request, and every series of a panel is above
   0 at one scrape at least (a stat's fallback `or vector(0)` is 0; a bound's share rises while
   the late requests are held, the share read from memory with the syncs sent again); the panels
   query the data source of its variable, have a title and a description, and lie side by side
   on the grid without overlapping.
13. Evaluates the CRDs' validation rules on the cases of scripts/crd-rules-test.yaml and on the
   objects of every fixture (parent, children, related objects), but those listed in
   STORED_BEFORE_THE_RULES. Each case's object is stored exactly when the case says so. For the
   cases and RANDOM_CASES random ones of each kind in AGREEMENT (AppDiscovery selectors,
   CertificateManager specs), the hook's sync (`metahooks run`) answers `InvalidSpec` exactly
   when the API server would not store the object: the CRD refuses up front each spec that the
   hook reports, and the hook reports each one stored before the rules.
14. Type-checks every CRD's validation rules and estimates their cost as the API server does when
   the CRD is created (scripts/cel_check.py, itself held to cases of Kubernetes' own tests first):
   each rule a bool, every field it selects declared, every operator and function applied to
   types cel-go has an overload for, a rule's cost times the values it can run on in one object
   at most 10,000,000, the CRD's sum at most 100,000,000, else the API server refuses the CRD and
   nothing of the controller installs.
15. Checks every CRD as the API server does when it creates it: its name is its plural and group,
   it has one storage version, and each version's schema is a structural schema (a type on every
   node but int-or-string and preserve-unknown-fields ones, nothing in allOf/anyOf/oneOf/not but
   value checks on declared fields, metadata restricted only in its name and generateName), nothing
   apiextensions.k8s.io/v1 forbids (properties beside additionalProperties, additionalProperties or
   preserve-unknown-fields false, uniqueItems), the keys of a map list required or defaulted
   scalars, and every default, with the defaults below it applied, free of fields the API server
   would prune and passing the schema and the validation rules of its node. Each validation rule
   has a rule, a message of one line (needed when the rule has several) of at most 2048
   characters, a reason the API server knows and a fieldPath that names a field of its node.
16. Evaluates every CRD's printer columns (`kubectl get`) on the objects as the hooks leave them,
   each fixture's parent or decorated object with the status its answer writes: each column shows
   a value on at least one, and only values of its type. First, each column is one the API
   server takes: a name, a type and format it knows, and a JSONPath that starts with a dot.
17. Checks that the metahooks namespace enforces the restricted Pod Security Standard
   (`pod-security.kubernetes.io/enforce`), and that every Pod template of a namespace these
   manifests make meets the standard it enforces: no host namespaces, ports or paths, only the
   volume types restricted admits, and in every container no privilege or its escalation, all
   capabilities dropped (but NET_BIND_SERVICE), a non-root user and a RuntimeDefault or Localhost
   seccomp profile.
18. Checks that the metahooks Deployment stays available through a rollout and a node drain, as
   every webhook fails closed and every sync goes through it: at least two replicas, a rollout
   that keeps one, a PodDisruptionBudget that keeps one and lets one go (else drains hang), a
   spread over nodes that selects its Pods, and readiness and liveness probes that ask the
   server's /readyz and /healthz on the port of --listen.
"""
import atexit
import contextlib
import copy
import functools
import glob
import itertools
import json
import math
import os
import random
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from urllib.parse import urlparse

import celpy
import cel_check
from grafana_foundation_sdk.cog import plugins as grafana_plugins
from grafana_foundation_sdk.cog.encoder import JSONEncoder as GrafanaEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard as GrafanaDashboard
import jsonschema
import kubernetes_validate
import yaml

# Parents whose name each of their children carries as a label value (API.md, cert-rotation.md
# section 2), so that a longer name than a label value holds leaves every child uncreatable.
NAME_IN_CHILD_LABEL = {
    ("metahooks.dev", "WorkloadSet"): "metahooks.dev/workload-set",
    ("metahooks.dev", "CertificateManager"): "metahooks.dev/certificate-manager",
}
LABEL_VALUE_MAX = 63
PART_OF = "app.kubernetes.io/part-of"
KEPTN_GROUP = "lifecycle.keptn.sh"
# The category of every CRD the base applies: `kubectl get metahooks -A` lists their objects.
CATEGORY = "metahooks"
ROOT = sys.argv[1] if len(sys.argv) > 1 else "manifests"
BINARY = sys.argv[2] if len(sys.argv) > 2 else "target/debug/metahooks"
PROMTOOL = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else shutil.which("promtool") or "promtool"
PROMETHEUS = os.path.abspath(sys.argv[4]) if len(sys.argv) > 4 else shutil.which("prometheus") or "prometheus"
ALERT_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alerts-test.yaml")
BUILTIN_RESOURCES = {("v1", "pods"), ("v1", "configmaps"), ("v1", "secrets")}
SECRETS = ("v1", "secrets")
# The webhook CA that Metacontroller checks metahooks' certificate against (README, Deploying).
# The namespace metahooks runs in.
NAMESPACE = "metahooks-system"
CA_CONFIGMAP = {"name": "metahooks-ca", "namespace": NAMESPACE, "key": "ca.crt"}
# Where Metacontroller's own manifests install it, and the label every namespace has its name in.
METACONTROLLER_NAMESPACE = "metacontroller"
NAMESPACE_NAME = "kubernetes.io/metadata.name"
MONITORING_GROUP = "monitoring.coreos.com"
# Labels that Prometheus gives every series a PodMonitor scrapes.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "container", "endpoint"}
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
RULE_CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crd-rules-test.yaml")
# Random cases of each kind on which a hook and its CRD's rules must agree (check 13).
RANDOM_CASES = 400
MANAGED_BY = "app.kubernetes.io/managed-by"
# Fixture objects the CRDs' validation rules refuse: (fixture, kind/name, why the hook is sent it).
STORED_BEFORE_THE_RULES = {
    ("app-discovery/sync-selector-misses-made-apps.request.json", "AppDiscovery/discovery"):
        "a selector that does not select the apps the hook makes, stored before the CRD's rule",
    ("app-discovery/sync-selector-selects-users-apps.request.json", "AppDiscovery/discovery"):
        "a selector that selects users' own apps, stored before the CRD's rule",
    ("cert-rotation/sync-common-name-not-ascii-freezes.request.json", "CertificateManager/mesh"):
        "a commonName that is not ASCII without dnsNames, stored before the CRD's rule",
    ("cert-rotation/sync-validity-too-long-freezes.request.json", "CertificateManager/mesh"):
        "a validity past 87600h, stored before the CRD's rule",
}
errors = []


def fail(where, message):
    errors.append(f"{where}: {message}")


def load_all(text, source):
    return [(source, d) for d in yaml.safe_load_all(text) if d]


def render(path):
    text = subprocess.run(["kubectl", "kustomize", path], check=True, capture_output=True, text=True).stdout
    return load_all(text, f"kubectl kustomize {path}")


objects = render(ROOT)
for source, obj in objects:
    if obj.get("kind") != "CustomResourceDefinition":
        continue
    where = f"{source}: CustomResourceDefinition {obj['metadata']['name']}"
    if obj["spec"]["group"] == KEPTN_GROUP:
        fail(where, f"is applied by the base; where Keptn runs it would replace Keptn's own (keep it in {ROOT}/keptn-crds)")
    if CATEGORY not in obj["spec"]["names"].get("categories", []):
        fail(where, f"is not in the category {CATEGORY}, which the README's `kubectl get {CATEGORY}` lists")
objects += render(f"{ROOT}/keptn-crds")
objects += render(f"{ROOT}/network-policy")
objects += render(f"{ROOT}/monitoring")
for path in sorted(glob.glob(f"{ROOT}/examples/*.yaml")):
    with open(path) as f:
        objects += load_all(f.read(), path)

CEL = celpy.Environment()


def crd_rules(schema, path=()):
    """The validation rules of a CRD schema as (path, compiled rule, message): the path leads from
    the object to the values the rule is on, "*" standing for each item of a list."""
    rules = []
    for rule in schema.get("x-kubernetes-validations") or []:
        rules.append((path, CEL.program(CEL.compile(rule["rule"])), rule.get("message", rule["rule"])))
    for key, sub in (schema.get("properties") or {}).items():
        rules += crd_rules(sub, path + (key,))
    if "items" in schema:
        rules += crd_rules(schema["items"], path + ("*",))
    if isinstance(schema.get("additionalProperties"), dict) and crd_rules(schema["additionalProperties"]):
        raise ValueError(f"a rule under additionalProperties at {path}, which check 3 does not evaluate")
    return rules


def values_at(value, path, at=""):
    """(field path, value) of each value a rule at `path` is on; an absent field has none."""
    if not path:
        yield at.lstrip("."), value
    elif path[0] == "*":
        for i, item in enumerate(value if isinstance(value, list) else []):
            yield from values_at(item, path[1:], f"{at}[{i}]")
    elif isinstance(value, dict) and value.get(path[0]) is not None:
        yield from values_at(value[path[0]], path[1:], f"{at}.{path[0]}")


def rule_refusals(rules, obj):
    """What the API server says of `obj` under its CRD's rules: a message for each refusal."""
    refusals = []
    for path, program, message in rules:
        for at, value in values_at(obj, path):
            try:
                verdict = program.evaluate({"self": celpy.json_to_cel(value)})
            except celpy.CELEvalError as e:
                refusals.append(f"{at or '.'}: the rule {message!r} fails to evaluate ({e.args[0]})")
                continue
            # A rule that is not a bool refuses (check 14 says the API server would not take it).
            if not isinstance(verdict, celpy.celtypes.BoolType) or not verdict:
                refusals.append(f"{at}: {message}" if at else message)
    return refusals


# The hook table: route -> kind text.
routes = {}
for line in subprocess.run([BINARY, "list"], check=True, capture_output=True, text=True).stdout.splitlines()[1:]:
    parts = line.split(None, 2)
    routes[parts[1]] = parts[2]
used_routes = set()

crds = {}  # (group, kind, version) -> (schema, has_status, validation rules)
plurals = set()
for source, obj in objects:
    if obj.get("kind") == "CustomResourceDefinition":
        spec = obj["spec"]
        for v in spec["versions"]:
            crds[(spec["group"], spec["names"]["kind"], v["name"])] = (
                v["schema"]["openAPIV3Schema"],
                "status" in (v.get("subresources") or {}),
                crd_rules(v["schema"]["openAPIV3Schema"]),
            )
            plurals.add((f"{spec['group']}/{v['name']}", spec["names"]["plural"]))


def strip_k8s(schema):
    """The CRD schema as plain JSON schema (drop the x-kubernetes-* extensions)."""
    if isinstance(schema, dict):
        return {k: strip_k8s(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if isinstance(schema, list):
        return [strip_k8s(v) for v in schema]
    return schema


def duplicate_keys(schema, value, at=""):
    """Items of an `x-kubernetes-list-type: map` list with the key of an item before them."""
    found = []
    if isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            found += duplicate_keys(sub, value.get(name), f"{at}.{name}")
    elif isinstance(value, list):
        keys = schema.get("x-kubernetes-list-map-keys") if schema.get("x-kubernetes-list-type") == "map" else None
        seen = set()
        for i, item in enumerate(value):
            if keys and isinstance(item, dict):
                key = tuple(json.dumps(item.get(k)) for k in keys)
                if key in seen:
                    found.append(f"{at}[{i}]: Duplicate value: {dict(zip(keys, key))}")
                seen.add(key)
            found += duplicate_keys(schema.get("items") or {}, item, f"{at}[{i}]")
    return found


SCALAR_TYPES = {"string", "integer", "number", "boolean"}
JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
# What a schema inside allOf, anyOf, oneOf or not may not set (a structural schema).
NOT_IN_JUNCTORS = ("description", "type", "default", "additionalProperties", "nullable")


def junctor_schemas(schema):
    """The schemas of a node's logical junctors, each with the junctor's name."""
    for junctor in JUNCTORS:
        subs = schema.get(junctor)
        for sub in ([subs] if isinstance(subs, dict) else subs or []):
            yield junctor, sub


# The reasons a validation rule may give, and the longest message. Cluster API's copy of the API
# server's check of a rule bounds a message at 2048 characters; the Kubernetes copy read for this
# does not. The bound is kept, as the stricter.
RULE_REASONS = ("FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate")
RULE_MESSAGE_CHARS = 2048
LINE_BREAK = re.compile(r"[\n\r]")
FIELD_PATH_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\['([^']*)'\]|\[([0-9]+)\]")


def rule_faults(schema, where):
    """What the API server refuses in a node's validation rules, beside their type and cost: an
    empty rule or message, a message too long or of several lines, a rule of several lines
    without a message, an unknown reason, and a fieldPath that names no field of the node."""
    faults = []
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        at = f"{where} rule {i}"
        text, message = str(rule.get("rule", "")).strip(), rule.get("message")
        if not text:
            faults.append(f"{at}: no rule")
        elif message is not None and not str(message).strip():
            faults.append(f"{at}: an empty message")
        elif message is not None and len(str(message)) > RULE_MESSAGE_CHARS:
            faults.append(f"{at}: a message over {RULE_MESSAGE_CHARS} characters")
        elif message is not None and LINE_BREAK.search(str(message).strip()):
            faults.append(f"{at}: a message of several lines")
        elif LINE_BREAK.search(text) and not str(message or "").strip():
            faults.append(f"{at}: a rule of several lines without a message")
        if "reason" in rule and rule["reason"] not in RULE_REASONS:
            faults.append(f"{at}: the reason {rule['reason']}, not one of {', '.join(RULE_REASONS)}")
        if "fieldPath" in rule and field_path_schema(schema, str(rule["fieldPath"])) is None:
            faults.append(f"{at}: the fieldPath {rule['fieldPath']!r} names no field of the node")
    return faults


def field_path_schema(schema, path):
    """The schema a rule's fieldPath (`.a`, `['a']`, `[0]` steps) leads to; None if it leads
    nowhere, is empty or has a line break."""
    if not path.strip() or LINE_BREAK.search(path):
        return None
    pos = 0
    while pos < len(path):
        step = FIELD_PATH_STEP.match(path, pos)
        if step is None:
            return None
        name, index = step.group(1) or step.group(2), step.group(3)
        if index is not None:
            schema = schema.get("items") if schema.get("type") == "array" else None
        elif isinstance(schema.get("additionalProperties"), dict):
            schema = schema["additionalProperties"]
        else:
            schema = (schema.get("properties") or {}).get(name)
        if not isinstance(schema, dict):
            return None
        pos = step.end()
    return schema


def structural_faults(schema, at="", root=True):
    """What makes a CRD version's schema one the API server refuses: not structural, or using
    what apiextensions.k8s.io/v1 forbids (each with where it is)."""
    where = at or "."
    faults = rule_faults(schema, where)
    int_or_string = schema.get("x-kubernetes-int-or-string") is True
    if not (schema.get("type") or int_or_string or schema.get("x-kubernetes-preserve-unknown-fields") is True):
        faults.append(f"{where}: no type")
    if root and schema.get("type") != "object":
        faults.append(f"{where}: the root is not of type object")
    if "properties" in schema and "additionalProperties" in schema:
        faults.append(f"{where}: both properties and additionalProperties")
    if schema.get("additionalProperties") is False:
        faults.append(f"{where}: additionalProperties false")
    if schema.get("uniqueItems") is True:
        faults.append(f"{where}: uniqueItems true")
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        faults.append(f"{where}: x-kubernetes-preserve-unknown-fields false")
    for junctor, sub in junctor_schemas(schema):
        for key in NOT_IN_JUNCTORS:
            # int-or-string's own pattern: anyOf [{type: integer}, {type: string}].
            if key in sub and not (int_or_string and junctor == "anyOf" and key == "type"):
                faults.append(f"{where}.{junctor}: sets {key}")
        for name in sub.get("properties") or {}:
            if name not in (schema.get("properties") or {}):
                faults.append(f"{where}.{junctor}: the field {name}, which properties does not declare")
    list_type = schema.get("x-kubernetes-list-type")
    items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
    if list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        if items.get("type") != "object" or not keys:
            faults.append(f"{where}: a list of type map needs object items and list-map-keys")
        for key in keys:
            key_schema = (items.get("properties") or {}).get(key, {})
            if key_schema.get("type") not in SCALAR_TYPES:
                faults.append(f"{where}: the list-map key {key} is not a scalar field of the items")
            if key not in (items.get("required") or []) and "default" not in key_schema:
                faults.append(f"{where}: the list-map key {key} is neither required nor defaulted")
    elif list_type == "set" and items.get("type") not in SCALAR_TYPES:
        faults.append(f"{where}: a list of type set of items that are not scalars")
    if "items" in schema and not isinstance(schema["items"], dict):
        faults.append(f"{where}: items is not one schema")
    for name, sub in (schema.get("properties") or {}).items():
        if root and name == "metadata":
            extra = set(sub.get("properties") or {}) - {"name", "generateName"}
            if extra or set(sub) - {"type", "properties"}:
                faults.append(".metadata: restricts more than name and generateName")
        faults += structural_faults(sub, f"{at}.{name}", root=False)
    if isinstance(schema.get("additionalProperties"), dict):
        faults += structural_faults(schema["additionalProperties"], f"{at}{{*}}", root=False)
    if items:
        faults += structural_faults(items, f"{at}[*]", root=False)
    return faults


def with_defaults(schema, value):
    """`value` with the defaults of `schema` applied below it, as the API server applies them."""
    if isinstance(value, dict):
        value = dict(value)
        for name, sub in (schema.get("properties") or {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = with_defaults(sub, value[name])
        if isinstance(schema.get("additionalProperties"), dict):
            for name in set(value) - set(schema.get("properties") or {}):
                value[name] = with_defaults(schema["additionalProperties"], value[name])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        value = [with_defaults(schema["items"], item) for item in value]
    return value


def unknown_fields(schema, value, at):
    """The fields of `value` that `schema` would prune."""
    found = []
    if schema.get("x-kubernetes-preserve-unknown-fields") is True:
        return found
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for name, sub_value in value.items():
            if name in props:
                found += unknown_fields(props[name], sub_value, f"{at}.{name}")
            elif isinstance(extra, dict):
                found += unknown_fields(extra, sub_value, f"{at}.{name}")
            elif extra is not True:
                found.append(f"{at}.{name}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            found += unknown_fields(schema["items"], item, f"{at}[{i}]")
    return found


def default_faults(schema, at=""):
    """Each default of a CRD version's schema that the API server refuses: one it would prune or
    that fails the schema or the validation rules of its node, its own defaults applied."""
    faults = []
    if "default" in schema:
        where = f"{at or '.'}: the default {json.dumps(schema['default'])}"
        value = with_defaults(schema, schema["default"])
        pruned = unknown_fields(schema, value, at)
        if pruned:
            faults.append(f"{where} has fields the API server prunes: {', '.join(pruned)}")
        try:
            jsonschema.validate(value, strip_k8s(schema))
        except jsonschema.ValidationError as e:
            faults.append(f"{where} does not match the schema: {e.message}")
        faults += [f"{where} is refused by a rule: {refusal}" for refusal in rule_refusals(crd_rules(schema), value)]
    for name, sub in (schema.get("properties") or {}).items():
        faults += default_faults(sub, f"{at}.{name}")
    for key, mark in (("additionalProperties", "{*}"), ("items", "[*]")):
        if isinstance(schema.get(key), dict):
            faults += default_faults(schema[key], at + mark)
    return faults


# The JSONPath forms of printer columns that check 16 reads: a field, an item by index, and an
# item of a list whose field has a value.
COLUMN_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[(\d+)\]|\[\?\(@\.([A-Za-z0-9_]+)\s*==\s*'([^']*)'\)\]")
COLUMN_TYPES = {"integer": (int,), "number": (int, float), "string": (str,), "boolean": (bool,), "date": (str,)}
COLUMN_FORMATS = {"int32", "int64", "float", "double", "byte", "date", "date-time", "password"}


def column_faults(columns):
    """What the API server refuses in a version's printer columns: no name, a type or format it
    does not know, a JSONPath that does not start with a dot."""
    faults = []
    for column in columns:
        at = f"column {column.get('name')!r}"
        if not column.get("name"):
            faults.append(f"{at}: no name")
        if column.get("type") not in COLUMN_TYPES:
            faults.append(f"{at}: the type {column.get('type')!r}, not one of {', '.join(COLUMN_TYPES)}")
        if "format" in column and column["format"] not in COLUMN_FORMATS:
            faults.append(f"{at}: the format {column['format']!r}, not one of {', '.join(sorted(COLUMN_FORMATS))}")
        if not str(column.get("jsonPath", "")).startswith("."):
            faults.append(f"{at}: a jsonPath that does not start with a dot")
    return faults


def column_values(path, obj):
    """What a printer column's JSONPath gives of `obj` (kubectl prints them joined)."""
    values, at = [obj], 0
    while at < len(path):
        step = COLUMN_STEP.match(path, at)
        if step is None:
            raise ValueError(f"a JSONPath step check 16 does not read: {path[at:]!r}")
        field, index, key, wanted = step.groups()
        if field:
            values = [v[field] for v in values if isinstance(v, dict) and field in v]
        elif index:
            values = [v[int(index)] for v in values if isinstance(v, list) and int(index) < len(v)]
        else:
            values = [item for v in values if isinstance(v, list) for item in v
                      if isinstance(item, dict) and item.get(key) == wanted]
        at = step.end()
    return values


POD_SECURITY = "pod-security.kubernetes.io/enforce"
# The kinds whose spec.template is a Pod template.
POD_OWNERS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
# The volume types the restricted Pod Security Standard admits.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}


def restricted_faults(pod):
    """What in a Pod spec the restricted Pod Security Standard refuses (the rules of the
    baseline profile and of restricted that a Pod spec can break)."""
    faults = []
    pod_context = pod.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            faults.append(f"{field} is set")
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            faults.append(f"volume {volume['name']} is of type {', '.join(sorted(kinds - RESTRICTED_VOLUMES))}")
    containers = [c for key in ("initContainers", "containers", "ephemeralContainers") for c in pod.get(key) or []]
    for c in containers:
        context = c.get("securityContext") or {}
        where = f"container {c['name']}"
        if context.get("privileged"):
            faults.append(f"{where} is privileged")
        if context.get("allowPrivilegeEscalation") is not False:
            faults.append(f"{where} does not set allowPrivilegeEscalation false")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            faults.append(f"{where} does not drop ALL capabilities")
        if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
            faults.append(f"{where} adds capabilities other than NET_BIND_SERVICE")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            faults.append(f"{where} has a hostPort")
        if context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is not True:
            faults.append(f"{where} does not run as non-root (runAsNonRoot)")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            faults.append(f"{where} runs as user 0")
        seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            faults.append(f"{where} has no RuntimeDefault or Localhost seccomp profile")
        if context.get("procMount", "Default") != "Default":
            faults.append(f"{where} sets procMount")
    return faults


def api_server_refusals(key, obj):
    """Why the API server would not store `obj` under the CRD `key`: its schema (with the keys
    of its map lists), then its rules."""
    # A CRD schema may constrain only metadata.name (and generateName) in metadata.
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    body["metadata"] = {"name": obj["metadata"]["name"]}
    try:
        jsonschema.validate(body, strip_k8s(crds[key][0]))
    except jsonschema.ValidationError as e:
        return [f"does not match its CRD schema: {e.message} at {list(e.absolute_path)}"]
    duplicates = duplicate_keys(crds[key][0], body)
    if duplicates:
        return [f"does not match its CRD schema: {duplicates[0]}"]
    return [f"its CRD's rule refuses {refusal}" for refusal in rule_refusals(crds[key][2], obj)]


# The fields of Metacontroller's CompositeController and DecoratorController specs
# (metacontroller-contract.md sections 2.1 to 2.3, Metacontroller 4.17.2), whose CRDs prune any
# other: a dict for an object, a one-item list for a list of such items, None for a value not
# looked into. A field spelt otherwise would be dropped unread.
METACONTROLLER_WEBHOOK = {
    "url": None, "timeout": None, "path": None, "responseUnMarshallMode": None,
    "service": {"name": None, "namespace": None, "port": None, "protocol": None},
    "etag": {"enabled": None, "cacheTimeoutSeconds": None, "cacheCleanupSeconds": None},
    "caBundle": None, "authorization": None, "basicAuth": None, "clientTLS": None,
}
METACONTROLLER_HOOK = {"version": None, "webhook": METACONTROLLER_WEBHOOK}
LABEL_SELECTOR = {"matchLabels": None, "matchExpressions": None}
METACONTROLLER_SPECS = {
    "CompositeController": {
        "parentResource": {"apiVersion": None, "resource": None, "labelSelector": LABEL_SELECTOR,
                           "revisionHistory": {"fieldPaths": None}, "ignoreStatusChanges": None},
        "childResources": [{"apiVersion": None, "resource": None,
                            "updateStrategy": {"method": None, "statusChecks": {"conditions": None}}}],
        "hooks": dict.fromkeys(("sync", "finalize", "customize", "preUpdateChild", "postUpdateChild"),
                               METACONTROLLER_HOOK),
        "endpointConfigs": None,
        "resyncPeriodSeconds": None,
        "generateSelector": None,
    },
    "DecoratorController": {
        "resources": [{"apiVersion": None, "resource": None, "labelSelector": LABEL_SELECTOR,
                       "annotationSelector": {"matchAnnotations": None, "matchExpressions": None},
                       "ignoreStatusChanges": None}],
        "attachments": [{"apiVersion": None, "resource": None, "updateStrategy": {"method": None}}],
        "hooks": dict.fromkeys(("sync", "finalize", "customize"), METACONTROLLER_HOOK),
        "endpointConfigs": None,
        "resyncPeriodSeconds": None,
    },
}
# The update strategies Metacontroller knows; it fails every sync of a controller with another.
UPDATE_METHODS = {"OnDelete", "Recreate", "InPlace", "RollingRecreate", "RollingInPlace"}


def shape_schema(shape):
    """A shape of METACONTROLLER_SPECS as the schema `unknown_fields` reads."""
    if isinstance(shape, dict):
        return {"type": "object", "properties": {name: shape_schema(sub) for name, sub in shape.items()}}
    if isinstance(shape, list):
        return {"type": "array", "items": shape_schema(shape[0])}
    return {"x-kubernetes-preserve-unknown-fields": True}


# A qualified name's part after its optional prefix/, and the prefix (a DNS subdomain), as the API
# server checks a matchCondition's name.
QUALIFIED_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = re.compile(rf"(?=.{{1,253}}$){DNS_LABEL}(?:\.{DNS_LABEL})*")
# A webhook's name: a DNS subdomain of at least three labels.
WEBHOOK_NAME = re.compile(rf"^{DNS_LABEL}(?:\.{DNS_LABEL}){{2,}}$")


def webhook_faults(hook):
    """What the API server refuses in one webhook of an admissionregistration.k8s.io/v1
    configuration, beyond its schema."""
    faults = []
    if len(hook["name"]) > 253 or not WEBHOOK_NAME.match(hook["name"]):
        faults.append("a name that is not a DNS subdomain of at least three labels")
    if not 1 <= hook.get("timeoutSeconds", 10) <= 30:
        faults.append(f"timeoutSeconds {hook['timeoutSeconds']} outside 1 to 30")
    if hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
        faults.append(f"sideEffects {hook.get('sideEffects')}, neither None nor NoneOnDryRun")
    if not {"v1", "v1beta1"} & set(hook.get("admissionReviewVersions") or []):
        faults.append("no admissionReviewVersions the API server speaks (v1, v1beta1)")
    names = [c["name"] for c in hook.get("matchConditions") or []]
    if len(names) > 64 or len(names) != len(set(names)):
        faults.append("more than 64 matchConditions, or two of one name")
    for name in names:
        prefix, _, local = name.rpartition("/")
        if not QUALIFIED_NAME.fullmatch(local) or (prefix and not DNS_SUBDOMAIN.fullmatch(prefix)):
            faults.append(f"a matchCondition named {name!r}, not a qualified name (an optional prefix/, then 1 to 63 "
                          "letters, digits, -, _ and . from an alphanumeric to one)")
    if not hook["clientConfig"].get("service", {}).get("path", "/").startswith("/"):
        faults.append("a service path that does not start with /")
    return faults


def check_hooks(where, hooks, expected, carries_secrets):
    for name, hook in (hooks or {}).items():
        url = hook.get("webhook", {}).get("url")
        if not url:
            fail(where, f"hook {name} has no webhook url")
            continue
        parsed = urlparse(url)
        path = parsed.path
        # A Service's names: name.namespace, with .svc or .svc.cluster.local after it or not.
        host = re.sub(r"\.svc(\.cluster\.local)?$", "", parsed.hostname or "")
        service, _, namespace = host.partition(".")
        port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme)
        metacontroller_calls.add((namespace, service, port))
        if port not in service_ports.get((namespace, service), set()):
            fail(where, f"hook {name} calls {parsed.netloc}, not a Service port of these manifests")
        if carries_secrets:
            if parsed.scheme != "https":
                fail(where, f"hook {name} sends Secrets (private keys) over {parsed.scheme}, not https")
            if hook["webhook"].get("caBundle", {}).get("configMapRef") != CA_CONFIGMAP:
                fail(where, f"hook {name} does not check metahooks' certificate against the ConfigMap {CA_CONFIGMAP}")
        want = expected.get(name)
        if path not in routes:
            fail(where, f"hook {name} calls {path}, which metahooks does not serve")
        elif want and not routes[path].startswith(want):
            fail(where, f"hook {name} calls {path}, a {routes[path]} hook, not {want}")
        used_routes.add(path)


def check_match_conditions(where, hook, path):
    conditions = hook.get("matchConditions") or []
    cel = celpy.Environment()
    programs = []
    for condition in conditions:
        try:
            tree = cel.compile(condition["expression"])
        except celpy.CELParseError as e:
            fail(where, f"matchCondition {condition['name']} does not parse: {e}")
            continue
        programs.append((condition["name"], cel.program(tree)))
        try:
            cel_check.match_condition_check(tree)
        except cel_check.IllTyped as e:
            fail(where, f"matchCondition {condition['name']}: the API server's type check refuses it ({e})")
        except cel_check.Unmodelled as e:
            fail(where, f"matchCondition {condition['name']} is not checked ({e}): extend scripts/cel_check.py")
    left_out = {name: 0 for name, _ in programs}
    controller, _, hook_name = path.strip("/").partition("/")
    for request_file in sorted(glob.glob(os.path.join(FIXTURES, controller, f"{hook_name}-*.request.json"))):
        with open(request_file.replace(".request.json", ".response.json")) as f:
            answer = json.load(f).get("response")
        if answer is None:  # a request the hook refuses with a 400
            continue
        with open(request_file) as f:
            request = json.load(f)["request"]
        variables = {name: celpy.json_to_cel(value) for name, value in (
            ("request", request), ("object", request.get("object")), ("oldObject", request.get("oldObject")))}
        fixture = os.path.relpath(request_file, os.path.join(FIXTURES, ".."))
        for name, program in programs:
            try:
                called = bool(program.evaluate(variables))
            except celpy.CELEvalError as e:
                fail(where, f"matchCondition {name} fails on {fixture} ({e.args[0]}); the API server then applies the failurePolicy")
                continue
            if not called:
                left_out[name] += 1
                if answer.get("allowed") is not True or "patch" in answer:
                    fail(where, f"matchCondition {name} leaves out {fixture}, which the hook does not simply allow")
    for name, count in left_out.items():
        if count == 0:
            fail(where, f"matchCondition {name} leaves out no fixture of {path}: none shows what it is for")


def check_resource(where, api_version, resource):
    if (api_version, resource) not in BUILTIN_RESOURCES and (api_version, resource) not in plurals:
        fail(where, f"{resource}.{api_version} is neither built in nor a CRD of these manifests")


service_ports = {}
service_targets = {}  # (namespace, name, port) -> targetPort (a number or a container port's name)
metacontroller_calls = set()  # (namespace, Service, port) of every Metacontroller hook
for source, obj in objects:
    if obj.get("kind") == "Service":
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        service_ports[key] = {p["port"] for p in obj["spec"]["ports"]}
        for p in obj["spec"]["ports"]:
            service_targets[(*key, p["port"])] = p.get("targetPort", p["port"])

for source, obj in objects:
    kind = obj.get("kind")
    name = obj.get("metadata", {}).get("name")
    where = f"{source}: {kind} {name}"
    api_version = obj.get("apiVersion", "")
    group, _, version = api_version.rpartition("/")
    if kind in ("CompositeController", "DecoratorController"):
        spec = obj["spec"]
        for field in unknown_fields(shape_schema(METACONTROLLER_SPECS[kind]), spec, "spec"):
            fail(where, f"{field} is not a field of a {kind}: the API server drops it and Metacontroller never reads it")
        for section in ("childResources", "attachments"):
            for resource in spec.get(section) or []:
                method = (resource.get("updateStrategy") or {}).get("method", "OnDelete")
                if method not in UPDATE_METHODS:
                    fail(where, f"{resource['resource']}: update strategy {method} is none Metacontroller knows")
        if kind == "CompositeController":
            parent = spec["parentResource"]
            check_resource(where, parent["apiVersion"], parent["resource"])
            pg, _, pv = parent["apiVersion"].rpartition("/")
            owners = [k for k in crds if k[0] == pg and k[2] == pv and (parent["apiVersion"], parent["resource"]) in plurals]
            if not any(crds[k][1] for k in owners):
                fail(where, "the parent CRD has no status subresource (Metacontroller refuses it)")
            children = [(c["apiVersion"], c["resource"]) for c in spec.get("childResources", [])]
            for child in children:
                check_resource(where, *child)
            check_hooks(where, spec.get("hooks"), {"sync": "CompositeController sync", "finalize": "CompositeController", "customize": "customize"},
                        SECRETS in children)
        else:
            for r in spec.get("resources", []):
                check_resource(where, r["apiVersion"], r["resource"])
            attachments = [(a["apiVersion"], a["resource"]) for a in spec.get("attachments", [])]
            for attachment in attachments:
                check_resource(where, *attachment)
            check_hooks(where, spec.get("hooks"), {"sync": "DecoratorController sync", "customize": "customize"},
                        SECRETS in attachments)
        continue
    if kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        want = "validating admission" if kind.startswith("Validating") else "mutating admission"
        if (obj["metadata"].get("labels") or {}).get(PART_OF) != "metahooks":
            fail(where, f"has no label {PART_OF}=metahooks, by which the README's deploy step finds it to set its caBundle")
        if len(obj["webhooks"]) != 1:
            fail(where, f"holds {len(obj['webhooks'])} webhooks; the README's deploy step sets the caBundle of the first only")
        for hook in obj["webhooks"]:
            for fault in webhook_faults(hook):
                fail(where, f"webhook {hook['name']}: {fault}, which the API server refuses")
            svc = hook["clientConfig"]["service"]
            path = svc.get("path", "")
            if routes.get(path) != want:
                fail(where, f"webhook {hook['name']} calls {path}, which is not a {want} route")
            used_routes.add(path)
            check_match_conditions(f"{where} webhook {hook['name']}", hook, path)
            if svc.get("port", 443) not in service_ports.get((svc["namespace"], svc["name"]), set()):
                fail(where, f"webhook {hook['name']} calls Service {svc['namespace']}/{svc['name']}:{svc.get('port', 443)}, which these manifests do not define")
    if group == MONITORING_GROUP:  # the Prometheus Operator's kinds: check 12
        continue
    if (group, kind, version) in crds:
        for refusal in api_server_refusals((group, kind, version), obj):
            fail(where, refusal)
        continue
    try:
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        fail(where, "no Kubernetes schema and no CRD in these manifests")
    except kubernetes_validate.ValidationError as e:
        fail(where, f"invalid: {e.message} at {list(e.path)}")

for (group, kind), label in NAME_IN_CHILD_LABEL.items():
    versions = [k for k in crds if k[:2] == (group, kind)]
    if not versions:
        fail("manifests", f"no CRD for {kind}.{group}")
    for key in versions:
        metadata = strip_k8s(crds[key][0]).get("properties", {}).get("metadata", {})
        for length, allowed in ((LABEL_VALUE_MAX, True), (LABEL_VALUE_MAX + 1, False)):
            try:
                jsonschema.validate({"name": "a" * length}, metadata)
                taken = True
            except jsonschema.ValidationError:
                taken = False
            if taken != allowed:
                fail(f"CRD {kind}.{group} {key[2]}", f"{'refuses' if allowed else 'takes'} a name of {length} characters; "
                     f"its children carry the name as the value of {label}, which holds at most {LABEL_VALUE_MAX}")

def seconds(duration):
    """A `metahooks serve` duration (`250ms`, `8s`, `2m`, a bare number of seconds) in seconds."""
    number, unit = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|)\s*", duration).groups()
    return int(number) * {"ms": 0.001, "s": 1, "": 1, "m": 60}[unit]


serve_help = subprocess.run([BINARY, "serve", "--help"], check=True, capture_output=True, text=True).stdout
serve_flags = set(re.findall(r"^\s+(?:-\w, )?(--[a-z0-9-]+)", serve_help, re.MULTILINE))
# Each flag's block runs to the next line that starts with a dash.
serve_defaults = dict(re.findall(r"^\s+(--[a-z0-9-]+) <\w+>\n(?:(?!\s*-).*\n)*?\s+\[default: ([^\]]+)\]", serve_help, re.MULTILINE))
version = subprocess.run([BINARY, "--version"], check=True, capture_output=True, text=True).stdout.split()[-1]
servers = []  # the Pods that run `metahooks serve`, for checks 11, 12 and 18
for source, obj in objects:
    if obj.get("kind") != "Deployment":
        continue
    pod = obj["spec"]["template"]["spec"]
    for container in pod["containers"]:
        args = container.get("args", [])
        if not container.get("image", "").startswith("metahooks") or args[:1] != ["serve"]:
            continue
        where = f"{source}: Deployment {obj['metadata']['name']} container {container['name']}"
        if container["image"].rpartition(":")[2] != version:
            fail(where, f"runs image {container['image']}, not the tag of this build's version, {version}")
        given = {}
        for arg in args[1:]:
            flag, _, value = arg.partition("=")
            if flag not in serve_flags:
                fail(where, f"metahooks serve has no flag {flag}")
            given[flag] = value
        scrape_port = obj["spec"]["template"]["metadata"].get("annotations", {}).get("prometheus.io/port")
        listen = given.get("--listen") or serve_defaults.get("--listen", "")
        if scrape_port is not None and scrape_port != listen.rpartition(":")[2]:
            fail(where, f"prometheus.io/port {scrape_port} is not the port of --listen {listen}, where /metrics is")
        container_ports = {str(port["containerPort"]) for port in container.get("ports", [])}
        listener_ports = {}
        for flag in ("--listen", "--tls-listen"):
            address = given.get(flag) or serve_defaults.get(flag, "")
            host, _, port = address.rpartition(":")
            if host != "[::]":
                fail(where, f"{flag} {address} does not listen on every address of both families ([::])")
            if port not in container_ports:
                fail(where, f"{flag} {address} is on none of the container's ports {sorted(container_ports)}")
            listener_ports[flag] = int(port) if port.isdigit() else None
        stop = sum(seconds(given.get(flag) or serve_defaults[flag]) for flag in ("--shutdown-delay", "--drain-timeout"))
        grace = pod.get("terminationGracePeriodSeconds", 30)
        if grace <= stop:
            fail(where, f"terminationGracePeriodSeconds {grace} is not longer than --shutdown-delay plus --drain-timeout ({stop:g} s)")
        servers.append({
            "where": where,
            "deployment": obj,
            "container": container,
            "namespace": obj["metadata"]["namespace"],
            "labels": obj["spec"]["template"]["metadata"].get("labels") or {},
            "names": {port["name"]: port["containerPort"] for port in container.get("ports", []) if "name" in port},
            "listen": listener_ports["--listen"],
            "tls_listen": listener_ports["--tls-listen"],
            "scrape": int(scrape_port) if (scrape_port or "").isdigit() else None,
        })
if not servers:
    fail("manifests", "no Deployment runs `metahooks serve`")


def port_admitted(rule, port, names):
    """Whether an ingress rule takes TCP to container port `port` (`names`: port names to numbers)."""
    return any(entry.get("protocol", "TCP") == "TCP" and ("port" not in entry or names.get(entry["port"], entry["port"]) == port)
               for entry in rule.get("ports") or [{}])


def source_admitted(rule, namespace):
    """Whether an ingress rule takes every Pod of `namespace`, or every source when it is None."""
    peers = rule.get("from") or []
    if not peers:
        return True
    if namespace is None:
        return False
    for peer in peers:
        selector = peer.get("namespaceSelector")
        if selector is None or peer.get("podSelector") not in (None, {}) or selector.get("matchExpressions"):
            continue
        if all(key == NAMESPACE_NAME and value == namespace for key, value in (selector.get("matchLabels") or {}).items()):
            return True
    return False


def selects(selector, labels):
    """Whether a label selector selects an object of `labels`."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if {"In": labels.get(key) not in values, "NotIn": key in labels and labels[key] in values,
                "Exists": key not in labels, "DoesNotExist": key in labels}[operator]:
            return False
    return True


policies = [(source, obj) for source, obj in objects if obj.get("kind") == "NetworkPolicy"]
policed = []  # (where, server, ingress rules) of each NetworkPolicy and Pod it selects, for check 12
if not policies:
    fail(f"{ROOT}/network-policy", "holds no NetworkPolicy")
for source, policy in policies:
    where = f"{source}: NetworkPolicy {policy['metadata']['name']}"
    spec = policy["spec"]
    selected = [server for server in servers if server["namespace"] == policy["metadata"]["namespace"]
                and selects(spec.get("podSelector") or {}, server["labels"])]
    if not selected:
        fail(where, "selects no Pod that runs `metahooks serve`")
    if "Ingress" not in spec.get("policyTypes", ["Ingress"]):
        fail(where, "does not restrict ingress (no Ingress in policyTypes)")
    rules = spec.get("ingress") or []
    for server in selected:
        policed.append((where, server, rules))

        def admitted(port, namespace):
            return any(port_admitted(rule, port, server["names"]) and source_admitted(rule, namespace) for rule in rules)
        if not admitted(server["tls_listen"], None):
            fail(where, f"does not take port {server['tls_listen']} (--tls-listen) from every source; "
                 "the API server's admission calls come from the control plane's addresses")
        if admitted(server["listen"], None):
            fail(where, f"takes port {server['listen']} (--listen: every route, no authentication) from every source")
        for namespace, service, port in sorted(metacontroller_calls):
            target = service_targets.get((namespace, service, port))
            target = server["names"].get(target, target)
            if target is not None and not admitted(target, METACONTROLLER_NAMESPACE):
                fail(where, f"keeps Metacontroller (namespace {METACONTROLLER_NAMESPACE}) from port {target}, "
                     f"which its hooks call through {service}.{namespace}:{port}")
        if server["scrape"] is not None and not any(port_admitted(rule, server["scrape"], server["names"]) for rule in rules):
            fail(where, f"lets no one reach /metrics on port {server['scrape']} (prometheus.io/port)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What the server that check 12 starts is run with, so that a few requests set off every alert
# that the server's state can: one sync and one admission request in flight at a time (a second
# one of either is shed, 429), a request that must end within 1.1 s (a slower one is answered 503,
# and its time is over the 1 s of MetahooksSlow), five connections at a time (more are refused)
# and an HTTPS certificate that ends in 10 days (MetahooksCertificateExpiry's warning, not yet its
# critical).
CHECK_12_SERVE_FLAGS = ["--max-in-flight=1", "--max-in-flight-admission=1", "--request-timeout=1100ms",
                        "--max-connections=5"]
CHECK_12_CERTIFICATE_DAYS = 10
# Check 12's server is sent a refusal (400), a shed request (429) and a late answer (503) on every
# route `metahooks list` gives, and frozen syncs of two controllers, whose False conditions differ
# (SYNC, OTHER_SYNC). An alert that leaves out a route, a kind of route or a condition then stays
# quiet where it should fire, and is caught.
SYNC, OTHER_SYNC = "/delete-graph/sync", "/cert-rotation/sync"
# A fixture answered 200 of each route that keeps the requests it decodes (a sync or finalize),
# sent in each of its rounds of requests: decoded whole before Prometheus scrapes it, then read
# from memory while it does, so that the share the dashboard shows rises on every such route.
KEPT_SYNCS = {SYNC: "sync-chain-database-running", "/delete-graph/finalize": "finalize-teardown-starts-with-leaf",
              OTHER_SYNC: "sync-step0-issues-leaves", "/app-discovery/sync": "sync-single-service-created-at-once",
              "/mesh-root-certificate/sync": "sync-active-signing"}
for route in sorted({route for route, kind in routes.items() if kind.endswith(("sync", "finalize"))} - KEPT_SYNCS.keys()):
    fail(f"{BINARY} list", f"{route} ({routes[route]}) has no fixture in KEPT_SYNCS for check 12 to send it")


def post(url, body):
    """POSTs a JSON body; the status of the answer."""
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code


class Served:
    """A `metahooks serve` started by `metahooks_serving`: its plain listener's URL (`base`)."""

    def __init__(self, server, http, https):
        self.server, self.http, self.https = server, http, https
        self.base = f"http://127.0.0.1:{http}"

    def traffic(self):
        """What the metrics, the alerts and the dashboard show: a sync on every route that keeps
        requests, syncs of two controllers that freeze their objects (False conditions), a request
        it refuses (400) on every route, a request over HTTPS (a handshake), on every route a
        request whose body never ends (503 after --request-timeout, a Metacontroller route's beside
        an admission route's), the first pair of those while a request to every route is shed (429),
        and connections past --max-connections. Fails the check where the server answers otherwise,
        as each is what an alert or a panel is checked to show."""
        answers = []  # (what was sent, the status it got, the status check 12 needs)
        for route, fixture in (*KEPT_SYNCS.items(), (SYNC, "sync-invalid-spec-freezes"),
                               (OTHER_SYNC, "sync-invalid-spec-freezes")):
            with open(os.path.join(FIXTURES, route.split("/")[1], f"{fixture}.request.json"), "rb") as f:
                answers.append((f"{route} {fixture}", post(self.base + route, f.read()), 200))
        for route in routes:
            answers.append((f"{route} {{}}", post(self.base + route, b"{}"), 400))
        with urllib.request.urlopen(f"https://127.0.0.1:{self.https}/readyz", timeout=5,
                                    context=ssl._create_unverified_context()) as answer:
            answers.append(("HTTPS /readyz", answer.status, 200))
        late, beside = {}, {}
        kinds = ([route for route, kind in routes.items() if "admission" not in kind],
                 [route for route, kind in routes.items() if "admission" in kind])
        for round_number, pair in enumerate(itertools.zip_longest(*kinds)):
            for _ in range(20):
                with contextlib.ExitStack() as stack:
                    stalled = {route: stack.enter_context(socket.create_connection(("127.0.0.1", self.http), timeout=5))
                               for route in pair if route}
                    for route, connection in stalled.items():
                        connection.sendall(f"POST {route} HTTP/1.1\r\nHost: metahooks\r\nContent-Type: "
                                           "application/json\r\nContent-Length: 100\r\n\r\n{".encode())
                    time.sleep(0.1)
                    tried = {route: post(self.base + route, b"{}") for route in (routes if round_number == 0 else ())}
                    beside.update(tried)
                    if all(status == 429 for status in tried.values()):  # shed: each stalled one holds its kind's only place
                        late.update({route: int(connection.recv(64).split()[1]) for route, connection in stalled.items()})
                        break
                # Else another came first, and a stalled one was shed or given up: again.
        answers += [(f"a {route} request beside a stalled one", beside.get(route), 429) for route in routes]
        answers += [(f"a {route} request whose body never ends", late.get(route), 503) for route in routes]
        crowd = [socket.create_connection(("127.0.0.1", self.http), timeout=5) for _ in range(8)]
        time.sleep(0.2)
        for connection in crowd:
            connection.close()
        self.answering()  # the crowd's places given back
        for request, status, needed in answers:
            if status != needed:
                fail(f"{BINARY} serve {' '.join(CHECK_12_SERVE_FLAGS)}",
                     f"answered {request} with {status or 'nothing'}, where check 12 needs {needed}")

    def answering(self):
        """Waits (up to 10 s) until the server answers a new connection."""
        for _ in range(200):
            try:
                with urllib.request.urlopen(f"{self.base}/readyz", timeout=1):
                    return
            except OSError:
                time.sleep(0.05)

    def stop(self):
        if self.server.poll() is None:
            self.server.terminate()
            self.server.wait()


@contextlib.contextmanager
def metahooks_serving():
    """A `metahooks serve` started here (`CHECK_12_SERVE_FLAGS`, HTTPS on a certificate of
    `CHECK_12_CERTIFICATE_DAYS` made by `metahooks certs`), once it has served `Served.traffic`.
    Yields its `Served` while it runs."""
    http, https = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tls:
        subprocess.run([BINARY, "certs", f"--out={tls}", f"--days={CHECK_12_CERTIFICATE_DAYS}"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server = subprocess.Popen([BINARY, "serve", f"--listen=127.0.0.1:{http}", f"--tls-listen=127.0.0.1:{https}",
                                   f"--tls-cert={tls}/tls.crt", f"--tls-key={tls}/tls.key", *CHECK_12_SERVE_FLAGS],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        served = Served(server, http, https)
        try:
            served.answering()
            served.traffic()
            yield served
        finally:
            served.stop()


def exported_metrics(base):
    """The label names of each sample name in the /metrics of the server at `base`; `promtool
    check metrics` lints the text on the way."""
    text = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True)
    if lint.returncode != 0 or lint.stdout.strip():
        fail(f"{BINARY} /metrics", f"promtool check metrics: {(lint.stdout + lint.stderr).strip()}")
    labels = {}
    for line in text.splitlines():
        sample = re.match(r"(\w+)(?:\{(.*)\})? ", line)
        if sample and not line.startswith("#"):
            labels.setdefault(sample.group(1), set()).update(re.findall(r'(\w+)="', sample.group(2) or ""))
    return labels


def lists_pods(role):
    return role is not None and any(
        "" in rule.get("apiGroups", []) and {"pods", "*"} & set(rule.get("resources", []))
        and ({"list", "watch"} <= set(rule.get("verbs", [])) or "*" in rule.get("verbs", []))
        for rule in role.get("rules") or [])


jobs = set()  # the job label under which Prometheus scrapes metahooks
monitors = [(source, obj) for source, obj in objects if obj.get("kind") == "PodMonitor"]
if not monitors:
    fail(f"{ROOT}/monitoring", "holds no PodMonitor")
for source, monitor in monitors:
    where = f"{source}: PodMonitor {monitor['metadata']['name']}"
    spec = monitor["spec"]
    namespaces = (spec.get("namespaceSelector") or {}).get("matchNames") or [monitor["metadata"]["namespace"]]
    selected = [server for server in servers if server["namespace"] in namespaces
                and selects(spec.get("selector") or {}, server["labels"])]
    if not selected:
        fail(where, "selects no Pod that runs `metahooks serve`")
    for server in selected:
        if not any(server["names"].get(endpoint.get("port")) == server["listen"] and endpoint.get("path", "/metrics") == "/metrics"
                   for endpoint in spec.get("podMetricsEndpoints") or []):
            fail(where, f"scrapes /metrics on no named port of --listen ({server['listen']}), where metahooks serves it")
        job_label = spec.get("jobLabel")
        if job_label and job_label not in server["labels"]:
            fail(where, f"jobLabel {job_label} is not a label of the metahooks Pods")
        elif job_label:
            jobs.add(server["labels"][job_label])
        else:
            jobs.add(f"{monitor['metadata']['namespace']}/{monitor['metadata']['name']}")

# The namespaces of the ServiceAccounts that may list the metahooks Pods: Prometheus runs there.
roles = {(obj["metadata"]["namespace"], obj["metadata"]["name"]): obj for _, obj in objects if obj.get("kind") == "Role"}
scrapers = set()
for source, binding in objects:
    if binding.get("kind") != "RoleBinding" or binding["roleRef"]["kind"] != "Role":
        continue
    namespace = binding["metadata"]["namespace"]
    if any(server["namespace"] == namespace for server in servers) and lists_pods(roles.get((namespace, binding["roleRef"]["name"]))):
        scrapers |= {subject["namespace"] for subject in binding.get("subjects") or [] if subject["kind"] == "ServiceAccount"}
if not scrapers:
    fail(f"{ROOT}/monitoring", "binds no ServiceAccount to a Role that lists and watches the metahooks Pods, which Prometheus needs to find them")
for where, server, rules in policed:
    for namespace in sorted(scrapers):
        if not any(port_admitted(rule, server["listen"], server["names"]) and source_admitted(rule, namespace) for rule in rules):
            fail(where, f"keeps Prometheus (namespace {namespace}, {ROOT}/monitoring) from /metrics on port {server['listen']}")

# The server whose metrics the alerts and the dashboard are held to, running until the dashboard's
# queries have run on a Prometheus that scrapes it.
check_12_server = contextlib.ExitStack()
served = check_12_server.enter_context(metahooks_serving())
atexit.register(check_12_server.close)  # should a check below crash
exported = exported_metrics(served.base)
with open(ALERT_TESTS) as f:
    tested = {case["alertname"] for test in yaml.safe_load(f)["tests"] for case in test.get("alert_rule_test") or []}
prometheus_rules = [(source, obj) for source, obj in objects if obj.get("kind") == "PrometheusRule"]
if not prometheus_rules:
    fail(f"{ROOT}/monitoring", "holds no PrometheusRule")


def promql_faults(expr):
    """What in a PromQL expression reads what the server does not give: a job other than the
    PodMonitor's, a metric metahooks does not export, a label matched or grouped by that none of
    the metrics it reads has."""
    faults = []
    for job in re.findall(r'\bjob="([^"]*)"', expr):
        if job not in jobs:
            faults.append(f"reads job {job!r}; the PodMonitor scrapes metahooks as {sorted(jobs)}")
    read = set()
    for metric, matchers in re.findall(r"\b(metahooks_\w+)(?:\{([^}]*)\})?", expr):
        if metric not in exported:
            return faults + [f"reads {metric}, which metahooks does not export"]
        read |= exported[metric]
        for label in re.findall(r'(\w+)\s*(?:=~|!~|!=|=)\s*"', matchers):
            if label not in exported[metric] | TARGET_LABELS:
                faults.append(f"matches {metric} on label {label}, which it does not have")
    for grouping in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        for label in filter(None, re.split(r"\s*,\s*", grouping.strip())):
            if label not in read | TARGET_LABELS:
                faults.append(f"groups by {label}, a label of none of the metrics it reads")
    return faults


def promtool_faults(groups, tests=None):
    """promtool's complaints about rule groups, written to rules.yaml: `promtool check rules`, and
    with `tests` (a file of cases that reads rules.yaml) `promtool test rules` too."""
    faults = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "rules.yaml"), "w") as f:
            yaml.safe_dump({"groups": groups}, f)
        commands = [["check", "rules", "rules.yaml"]]
        if tests:
            shutil.copy(tests, tmp)
            commands.append(["test", "rules", os.path.basename(tests)])
        for command in commands:
            run = subprocess.run([PROMTOOL, *command], cwd=tmp, capture_output=True, text=True)
            if run.returncode != 0:
                faults.append(f"promtool {' '.join(command[:2])}:\n{(run.stdout + run.stderr).strip()}")
    return faults


alerts = []  # (where, the alert's name and severity, its expression)
for source, rule_set in prometheus_rules:
    where = f"{source}: PrometheusRule {rule_set['metadata']['name']}"
    groups = rule_set["spec"].get("groups") or []
    for rule in (rule for group in groups for rule in group.get("rules") or []):
        name, expr = rule.get("alert") or rule.get("record"), rule["expr"]
        if "alert" in rule and name not in tested:
            fail(where, f"alert {name} has no case in {os.path.relpath(ALERT_TESTS)}")
        if "alert" in rule:
            alerts.append((where, (name, (rule.get("labels") or {}).get("severity")), expr))
        for fault in promql_faults(expr):
            fail(where, f"{name} {fault}")
    for fault in promtool_faults(groups, ALERT_TESTS):
        fail(where, fault)

# The Grafana dashboard, imported rather than applied (README, "Monitoring").
DASHBOARD = os.path.join(ROOT, "monitoring", "dashboard.json")
# What Grafana puts for its own variables before a query reaches Prometheus.
GRAFANA_VARIABLES = {"__rate_interval": "1m", "__range": "1h", "__interval": "30s"}
GRAFANA_COLUMNS = 24


def dashboard_queries(dashboard, where):
    """The PromQL of a dashboard (name -> expression), its variables put in as Grafana puts them:
    a variable with All its All value, one without the metahooks namespace. Faults of the
    dashboard's own structure fail on the way."""
    values = dict(GRAFANA_VARIABLES)
    queries = {}
    declared = dashboard.get("templating", {}).get("list", [])
    if not any(v.get("type") == "datasource" and v.get("query") == "prometheus" and v.get("name") == "datasource"
               for v in declared):
        fail(where, "no variable `datasource` of Prometheus data sources")
    for variable in declared:
        name = variable["name"]
        if variable.get("type") != "query":
            continue
        if (variable.get("datasource") or {}).get("uid") != "${datasource}":
            fail(where, f"variable {name} does not query the data source of $datasource")
        found = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", variable["query"]["query"], re.S)
        if found is None:
            fail(where, f"variable {name} is not a label_values(selector, label) query")
            continue
        selector, label = found.groups()
        metric = re.match(r"\w*", selector).group(0)
        if label not in exported.get(metric, set()) | TARGET_LABELS:
            fail(where, f"variable {name} takes the label {label}, which {metric} does not have")
        queries[f"variable_{name}"] = selector
        values[name] = variable.get("allValue") if variable.get("includeAll") else NAMESPACE
    ids = [panel.get("id") for panel in dashboard.get("panels", [])]
    if len(set(ids)) != len(ids):
        fail(where, f"panel ids are not unique: {ids}")
    boxes = []
    for panel in dashboard.get("panels", []):
        at = f"panel {panel.get('id')} ({panel.get('title')})"
        if panel.get("type") not in ("stat", "timeseries") or not panel.get("title") or not panel.get("description"):
            fail(where, f"{at}: not a stat or time series panel with a title and a description")
        if (panel.get("datasource") or {}).get("uid") != "${datasource}":
            fail(where, f"{at}: does not query the data source of $datasource")
        box = {k: (panel.get("gridPos") or {}).get(k, 0) for k in "xywh"}
        if not all(type(v) is int for v in box.values()):
            fail(where, f"{at}: a gridPos of other than whole numbers")
            continue
        if box["x"] + box["w"] > GRAFANA_COLUMNS or min(box.values()) < 0 or not box["w"] * box["h"]:
            fail(where, f"{at}: has no size, or lies outside the {GRAFANA_COLUMNS} columns of the grid")
        for other_at, other in boxes:
            if (box["x"] < other["x"] + other["w"] and other["x"] < box["x"] + box["w"]
                    and box["y"] < other["y"] + other["h"] and other["y"] < box["y"] + box["h"]):
                fail(where, f"{at}: overlaps {other_at}")
        boxes.append((at, box))
        ref_ids = [target.get("refId") for target in panel.get("targets") or []]
        if not ref_ids or len(set(ref_ids)) != len(ref_ids):
            fail(where, f"{at}: no queries, or two of one refId")
        for target in panel.get("targets") or []:
            queries[f"panel_{panel.get('id')}_{target.get('refId')}"] = target.get("expr", "")
    for name, expr in queries.items():
        for used in re.findall(r"\$\{?(\w+)\}?", expr):
            if used not in values:
                fail(where, f"{name} uses ${used}, which the dashboard does not declare")
        queries[name] = re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1), m.group(0)), expr)
    return queries


def metric_family(sample):
    """The metric a sample name belongs to: a histogram's without its _bucket, _sum or _count."""
    return re.sub(r"_(bucket|sum|count)$", "", sample)


def schema_drift(written, read, at=""):
    """Where a dashboard as written and as Grafana's schema reads it part: a field the schema does
    not have (Grafana ignores it), or a value it reads as another."""
    if isinstance(written, dict) and isinstance(read, dict):
        for key, value in written.items():
            if key not in read:
                yield f"{at}.{key}: a field Grafana's dashboard schema does not have"
            else:
                yield from schema_drift(value, read[key], f"{at}.{key}")
    elif isinstance(written, list) and isinstance(read, list) and len(written) == len(read):
        for i, (item, read_item) in enumerate(zip(written, read)):
            yield from schema_drift(item, read_item, f"{at}[{i}]")
    elif written != read:
        yield f"{at}: {written!r}, which Grafana's dashboard schema reads as {read!r}"


with open(DASHBOARD) as f:
    dashboard = json.load(f)
grafana_plugins.register_default_plugins()
for drift in schema_drift(dashboard, json.loads(json.dumps(GrafanaDashboard.from_json(dashboard), cls=GrafanaEncoder))):
    fail(DASHBOARD, drift)
dashboard_exprs = dashboard_queries(dashboard, DASHBOARD)
shown = set()
for name, expr in dashboard_exprs.items():
    for fault in promql_faults(expr):
        fail(DASHBOARD, f"{name} {fault}")
    shown |= {metric_family(metric) for metric in re.findall(r"\bmetahooks_\w+", expr)}
# Each query checked by promtool as the expression of a recording rule.
records = [{"record": f"check:{name}", "expr": expr} for name, expr in dashboard_exprs.items()]
for fault in promtool_faults([{"name": "check", "rules": records}]):
    fail(DASHBOARD, f"its queries: {fault}")
for metric in sorted({metric_family(m) for m in exported} - shown):
    fail(DASHBOARD, f"no panel shows {metric}, which metahooks exports")


class Prometheus:
    """Debian's Prometheus (as promtool) scraping one target every second, under `job` and the
    target labels a PodMonitor gives; `ask` runs an instant query."""

    def __init__(self, job, target, directory):
        self.job, port = job, free_port()
        self.api = f"http://127.0.0.1:{port}/api/v1/query"
        config = {"global": {"scrape_interval": "1s"}, "scrape_configs": [{
            "job_name": job, "static_configs": [{"targets": [target], "labels": {
                "namespace": NAMESPACE, "pod": "metahooks-0", "container": "metahooks"}}]}]}
        with open(os.path.join(directory, "prometheus.yml"), "w") as f:
            yaml.safe_dump(config, f)
        self.process = subprocess.Popen([PROMETHEUS, f"--config.file={directory}/prometheus.yml",
                                         f"--storage.tsdb.path={directory}/data", f"--web.listen-address=127.0.0.1:{port}"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ask(self, expr):
        """The query's series, or Prometheus' error as text."""
        try:
            with urllib.request.urlopen(f"{self.api}?{urllib.parse.urlencode({'query': expr})}", timeout=10) as answer:
                return json.load(answer)["data"]["result"]
        except urllib.error.HTTPError as refused:
            return json.load(refused).get("error", str(refused))
        except OSError as e:
            return str(e)

    def scrapes(self, more, up=True):
        """Waits (up to a minute) until `more` scrapes past those already taken have found the
        target up (or, with `up` False, one has found it down)."""
        def taken():
            answer = self.ask(f'count_over_time(up{{job="{self.job}"}}[1h])')
            return float(answer[0]["value"][1]) if isinstance(answer, list) and answer else 0

        goal = taken() + more
        for _ in range(120):
            answer = self.ask(f'up{{job="{self.job}"}}')
            if taken() >= goal and isinstance(answer, list) and answer and answer[0]["value"][1] == ("1" if up else "0"):
                return
            time.sleep(0.5)

    def stop(self):
        self.process.terminate()
        self.process.wait()


# How far back check 12 looks for the highest value a panel showed: longer than Prometheus runs.
SHOWN_OVER = "10m:1s"


def live_answers(queries, alerts, job, served):
    """On a Prometheus scraping `served`, once it has scraped four times, the server's `traffic`
    again and three more scrapes (two samples of every counter, so that `increase` and `rate` see
    it rise): each query's series, a panel's at the highest value each showed since the first
    scrape (a bound's share is up only while a request is held), and each alert's series while the
    server answers; and once it has stopped and a scrape has found it down, each alert's again."""
    if not os.access(PROMETHEUS, os.X_OK):
        fail(DASHBOARD, f"no Prometheus at {PROMETHEUS} to run its queries and the alerts on (make manifests-check "
                        "takes one out of Debian's package)")
        return {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        prometheus = Prometheus(job, urlparse(served.base).netloc, tmp)
        try:
            prometheus.scrapes(4)
            served.traffic()
            prometheus.scrapes(3)
            answers = {name: prometheus.ask(f"max_over_time(({expr})[{SHOWN_OVER}])" if name.startswith("panel_") else expr)
                       for name, expr in queries.items()}
            serving = {alert: prometheus.ask(expr) for _, alert, expr in alerts}
            served.stop()
            prometheus.scrapes(1, up=False)
            stopped = {alert: prometheus.ask(expr) for _, alert, expr in alerts}
        finally:
            prometheus.stop()
    return answers, serving, stopped


# The alerts that check 12's server sets off while it answers (by name and severity), what sets
# each off (`Served.traffic`, `CHECK_12_SERVE_FLAGS`) and the labels of each alert it must raise;
# every other alert must stay quiet. Once the server has stopped, the one that says so must fire.
# Alerts are run as their expressions, without their `for`.
FIRING_WHILE_SERVING = {
    ("MetahooksRequestsFailing", "warning"): (
        "a 400 on every route", [{"route": route, "status": "400"} for route in routes]),
    ("MetahooksOverloaded", "warning"): (
        "a 429 and a 503 on every route", [{"route": route, "status": status} for route in routes for status in ("429", "503")]),
    ("MetahooksConnectionsRefused", "warning"): ("connections past --max-connections", [{}]),
    ("MetahooksSlow", "warning"): ("a request on every route answered after 1.1 s (503)",
                                   [{"route": route} for route in routes]),
    ("MetahooksSyncConditionFalse", "warning"): (
        "frozen syncs of two controllers", [{"route": SYNC, "condition": "Valid", "reason": "InvalidSpec"},
                                            {"route": OTHER_SYNC, "condition": "Ready", "reason": "InvalidSpec"}]),
    ("MetahooksCertificateExpiry", "warning"): (f"a certificate that ends in {CHECK_12_CERTIFICATE_DAYS} days", [{}]),
}
FIRING_ONCE_STOPPED = {("MetahooksDown", "critical"): ("no replica answering a scrape", [{}])}

# What `Served.traffic` sends, as the failures of the dashboard's queries name it.
TRAFFIC = "syncs, frozen syncs, refusals, sheds, requests held past --request-timeout and an HTTPS request"
with check_12_server:
    answers, serving, stopped = live_answers(dashboard_exprs, alerts, sorted(jobs)[0] if jobs else "metahooks", served)
for name, answer in answers.items():
    if isinstance(answer, str):
        fail(DASHBOARD, f"{name}: Prometheus refuses the query ({answer}): {dashboard_exprs[name]}")
    elif not answer:
        fail(DASHBOARD, f"{name} shows nothing of a server that answered {TRAFFIC}, scraped by Prometheus: "
                        f"{dashboard_exprs[name]}")
    # Every series of a panel rises above 0 (a stat's fallback `or vector(0)` among them): each
    # shows what the traffic did, or a bound held.
    for series in answer if name.startswith("panel_") and isinstance(answer, list) else []:
        if not float(series["value"][1]) > 0:
            fail(DASHBOARD, f"{name} shows {json.dumps(series['metric'])} at {series['value'][1]} at most, "
                            f"on a server that answered {TRAFFIC}: {dashboard_exprs[name]}")


def unraised(fired, expected):
    """The label sets of `expected` that no series of `fired` carries."""
    return [labels for labels in expected if not any(labels.items() <= series["metric"].items() for series in fired)]


for where, alert, expr in alerts if serving else []:
    named = f"{alert[0]} ({alert[1]})"
    refused = [answer for answer in (serving[alert], stopped[alert]) if isinstance(answer, str)]
    if refused:
        fail(where, f"{named}: Prometheus refuses its expression ({refused[0]})")
        continue
    if alert in FIRING_WHILE_SERVING:
        cause, expected = FIRING_WHILE_SERVING[alert]
        for labels in unraised(serving[alert], expected):
            fail(where, f"{named} raises no alert {json.dumps(labels)} on a Prometheus scraping a metahooks serve "
                        f"after {cause}: {expr}")
    elif serving[alert]:
        fail(where, f"{named} fires on a Prometheus scraping a metahooks serve that answers, where nothing "
                    f"should set it off ({'; '.join(json.dumps(series['metric']) for series in serving[alert])}): {expr}")
    if alert in FIRING_ONCE_STOPPED:
        cause, expected = FIRING_ONCE_STOPPED[alert]
        for labels in unraised(stopped[alert], expected):
            fail(where, f"{named} raises no alert {json.dumps(labels)} once the server has stopped ({cause}): {expr}")
for alert in sorted({**FIRING_WHILE_SERVING, **FIRING_ONCE_STOPPED}.keys() - {alert for _, alert, _ in alerts}):
    fail(f"{ROOT}/monitoring", f"no alert {alert[0]} of severity {alert[1]}, which check 12 expects to fire")

# 13. The CRDs' validation rules on their cases and on the fixtures, and the hook's agreement.
with open(RULE_CASES) as f:
    rule_cases = yaml.safe_load(f)


def random_selector(rng):
    """An AppDiscovery selector within the CRD's size bounds, of the labels and values that tell
    the rules apart: managed-by and its values, another label, an unknown operator, missing
    values."""
    labels = {}
    if rng.random() < 0.6:
        labels[MANAGED_BY] = rng.choice(["keptn", "keptn", "keptn", "klt"])
    if rng.random() < 0.3:
        labels["team"] = rng.choice(["a", "b"])
    if rng.random() < 0.1:
        labels["managed-by"] = "keptn"
    selector = {"matchLabels": labels} if labels or rng.random() < 0.5 else {}
    expressions = []
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
        operator = rng.choice(["In", "In", "NotIn", "Exists", "DoesNotExist", "in"])
        expression = {"key": rng.choice([MANAGED_BY, MANAGED_BY, "team", "managed-by"]), "operator": operator}
        listed = operator in ("In", "NotIn", "in")
        if (rng.random() < 0.9) == listed:
            expression["values"] = rng.sample(["keptn", "keptn", "klt", "a"], rng.randint(1, 2))
        elif rng.random() < 0.5:
            expression["values"] = []
        expressions.append(expression)
    if expressions or rng.random() < 0.3:
        selector["matchExpressions"] = expressions
    return selector


def random_manager_spec(rng):
    """A CertificateManager spec within the CRD's size bounds, of the names, lengths, characters
    and durations that tell the schema and the rules apart."""
    def name(longest):
        return rng.choice(["web-tls", "api.tls", "a" * longest] * 3 + ["a" * (longest + 1), "Web", "-a", "a..b", "é", ""])

    def dns_name():
        return rng.choice(["web.mesh.svc"] * 4 + ["*.mesh.svc", "*.*.mesh", "a" * 63 + ".svc", "a" * 64 + ".svc",
                           ".".join(["a" * 63] * 4)[:253], ".".join(["a" * 63] * 4)[:254],
                           "*." + ".".join(["a" * 63] * 4)[:253], "Web.svc", "web_1.svc", ""])

    certificates = []
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        certificate = {"secretName": rng.choice(["web-tls", "api-tls", name(253)]),
                       "commonName": rng.choice(["web.mesh"] * 4 + ["é" * 32, "é" * 33, "a" * 64, "a" * 65, "", "web mesh"])}
        if rng.random() < 0.6:
            certificate["dnsNames"] = [dns_name() for _ in range(rng.choice([0, 1, 2]))]
        if rng.random() < 0.6:
            certificate["validity"] = rng.choice(["24h", "1h30m", "5m", "87600h", "87599h60m", "87600h1s",
                                                  "99999999999999h", "1d", "h", "24", ""])
        certificates.append(certificate)
    spec = {"trustBundle": {"configMapName": rng.choice(["osm-ca-bundle", name(253)])}}
    if certificates or rng.random() < 0.5:
        spec["certificates"] = certificates
    return spec


# (CRD, cases in RULE_CASES and the field each sets, the fixture whose request the hook is run
# on with the case in its parent, the hook, random cases): the hook answers InvalidSpec for
# exactly the objects the API server would not store.
AGREEMENT = [
    (("metahooks.dev", "AppDiscovery", "v1alpha1"), "appDiscoverySelectors", ("spec", "selector"),
     "app-discovery/sync-single-service-created-at-once.request.json", "app-discovery/sync", random_selector),
    (("metahooks.dev", "CertificateManager", "v1alpha1"), "certificateManagerSpecs", ("spec",),
     "cert-rotation/sync-step0-issues-leaves.request.json", "cert-rotation/sync", random_manager_spec),
]
for key, cases_key, (*path, field), fixture, route, random_case in AGREEMENT:
    with open(os.path.join(FIXTURES, fixture)) as f:
        request = json.load(f)
    rng = random.Random(13)
    cases = [(f"{cases_key}[{i}]", case[field], case["stored"]) for i, case in enumerate(rule_cases[cases_key])]
    cases += [(f"random {field} {i}", random_case(rng), None) for i in range(RANDOM_CASES)]
    refused_random = 0
    for name, value, expected in cases:
        where = f"{os.path.relpath(RULE_CASES)}: {name} {json.dumps(value)}"
        parent = copy.deepcopy(request["parent"])
        functools.reduce(dict.get, path, parent)[field] = value
        stored = not api_server_refusals(key, parent)
        if expected is not None and stored != expected:
            fail(where, f"the API server would {'not ' if expected else ''}store it")
        refused_random += expected is None and not stored
        with tempfile.NamedTemporaryFile("w", suffix=".json") as request_file:
            json.dump({**request, "parent": parent}, request_file)
            request_file.flush()
            answer = json.loads(subprocess.run([BINARY, "run", route, request_file.name, "--now", "2026-06-01T12:00:00Z"],
                                               check=True, capture_output=True, text=True).stdout)
        reason = answer["status"]["conditions"][0]["reason"]
        if (reason == "InvalidSpec") == stored:
            fail(where, f"{route} answers {reason} for a {key[1]} the API server would {'' if stored else 'not '}store")
    if not 0 < refused_random < RANDOM_CASES:
        fail(os.path.relpath(RULE_CASES), f"the API server refuses {refused_random} of {RANDOM_CASES} random "
             f"{key[1]} cases: they tell nothing apart")
# Every fixture pair, its request and its answer, by its path under fixtures/ (checks 13 and 16).
fixture_pairs = {}
for request_file in sorted(glob.glob(os.path.join(FIXTURES, "*", "*.request.json"))):
    with open(request_file) as f, open(request_file.replace(".request.json", ".response.json")) as g:
        fixture_pairs[os.path.relpath(request_file, FIXTURES)] = (json.load(f), json.load(g))
rule_fixtures, exempt_refused = 0, set()
for fixture, (request, _) in fixture_pairs.items():
    held = [request.get("parent"), request.get("object")]
    for section in ("children", "attachments", "related"):
        held += [obj for of_type in (request.get(section) or {}).values() for obj in of_type.values()]
    for obj in (o for o in held if isinstance(o, dict) and "apiVersion" in o):
        group, _, version = obj["apiVersion"].rpartition("/")
        rules = crds.get((group, obj.get("kind"), version), (None, None, []))[2]
        if not rules:
            continue
        rule_fixtures += 1
        object_name = f"{obj['kind']}/{obj['metadata']['name']}"
        refusals = rule_refusals(rules, obj)
        why = STORED_BEFORE_THE_RULES.get((fixture, object_name))
        if refusals and not why:
            fail(f"fixtures/{fixture}: {object_name}", f"its CRD's rule refuses {refusals[0]}")
        elif why and not refusals:
            fail(f"fixtures/{fixture}: {object_name}", f"stored, so no longer {why}")
        elif why:
            exempt_refused.add((fixture, object_name))
if rule_fixtures == 0:
    fail("fixtures", "no object of a CRD with validation rules")
for fixture, object_name in sorted(set(STORED_BEFORE_THE_RULES) - exempt_refused):
    fail(f"fixtures/{fixture}", f"holds no {object_name} that the CRD's rules refuse")

# 14. The API server's type check of the CRDs' rules and estimate of their costs, with the model
# checked first.
for wrong in cel_check.self_test(CEL.compile):
    fail("scripts/cel_check.py", f"checks unlike the API server: {wrong}")
costliest = (0, None)
for (group, kind, version), (schema, _, _) in sorted(crds.items()):
    where = f"CRD {kind}.{group} {version}"
    try:
        costs = cel_check.crd_rule_costs(schema, CEL.compile)
    except cel_check.IllTyped as e:
        fail(where, f"a validation rule the API server's type check refuses ({e})")
        continue
    except cel_check.Unmodelled as e:
        fail(where, f"a validation rule is not checked ({e}): extend scripts/cel_check.py")
        continue
    for at, rule, cost, times in costs:
        if cost * times > cel_check.PER_RULE_LIMIT:
            fail(where, f"the rule at {at} costs about {cost} a value, {cost * times} on {times} values, "
                        f"over the API server's {cel_check.PER_RULE_LIMIT}: {rule}")
        costliest = max(costliest, (cost * times, f"{kind} {at}"))
    total = sum(cost * times for _, _, cost, times in costs)
    if total > cel_check.PER_CRD_LIMIT:
        fail(where, f"its rules cost about {total} in all, over the API server's {cel_check.PER_CRD_LIMIT}")

# 15. The CRDs as the API server requires them when it creates one: named after their plural and
# group, one storage version, and schemas it takes.
for source, obj in objects:
    if obj.get("kind") == "CustomResourceDefinition":
        spec = obj["spec"]
        name = f"{spec['names']['plural']}.{spec['group']}"
        if obj["metadata"]["name"] != name:
            fail(source, f"CRD {obj['metadata']['name']} is not named {name}, its plural and group")
        if sum(1 for v in spec["versions"] if v.get("storage")) != 1:
            fail(source, f"CRD {name} has not exactly one storage version")
for (group, kind, version), (schema, _, _) in sorted(crds.items()):
    for fault in structural_faults(schema) + default_faults(schema):
        fail(f"CRD {kind}.{group} {version}", fault)

# 16. Each printer column of a CRD shows a value of its type on the objects as the hooks leave
# them: each fixture's parent or decorated object that its CRD's schema takes (a rule may refuse
# it, as one stored before the rules), with the status its answer writes.
answered = []
for request, response in fixture_pairs.values():
    obj = request.get("parent") or request.get("object")
    if not (isinstance(obj, dict) and isinstance(response, dict) and "status" in response):
        continue
    group, _, version = str(obj.get("apiVersion")).rpartition("/")
    key = (group, obj.get("kind"), version)
    if key in crds and all(r.startswith("its CRD's rule") for r in api_server_refusals(key, obj)):
        answered.append({**obj, "status": response["status"]})
for source, obj in objects:
    if obj.get("kind") != "CustomResourceDefinition":
        continue
    spec = obj["spec"]
    kind_objects = [o for o in answered if o.get("kind") == spec["names"]["kind"]
                    and o.get("apiVersion", "").startswith(spec["group"] + "/")]
    for v in spec["versions"]:
        faults = column_faults(v.get("additionalPrinterColumns") or [])
        for fault in faults:
            fail(f"CRD {spec['names']['kind']} {v['name']}", fault)
        for column in [] if faults else v.get("additionalPrinterColumns") or []:
            where = f"CRD {spec['names']['kind']} {v['name']}, column {column['name']}"
            try:
                shown = [column_values(column["jsonPath"], o) for o in kind_objects]
            except ValueError as e:
                fail(where, str(e))
                continue
            wrong = [value for values in shown for value in values
                     if not isinstance(value, COLUMN_TYPES[column["type"]])
                     or (column["type"] != "boolean" and isinstance(value, bool))]
            if wrong:
                fail(where, f"{column['jsonPath']} gives {wrong[0]!r}, not of its type {column['type']}")
            if kind_objects and not any(shown):
                fail(where, f"{column['jsonPath']} shows nothing on any of the {len(kind_objects)} "
                            f"fixtures' objects with the status their answers write")

# 17. The metahooks namespace enforces the restricted Pod Security Standard, and every Pod
# template of a namespace these manifests make meets the standard its namespace enforces.
enforced = {obj["metadata"]["name"]: (obj["metadata"].get("labels") or {}).get(POD_SECURITY)
            for _, obj in objects if obj.get("kind") == "Namespace"}
if enforced.get(NAMESPACE) != "restricted":
    fail("manifests", f"namespace {NAMESPACE} does not enforce {POD_SECURITY}: restricted")
for source, obj in objects:
    template = (obj.get("spec") or {}).get("template") if obj.get("kind") in POD_OWNERS else None
    namespace = obj.get("metadata", {}).get("namespace")
    if template and enforced.get(namespace) == "restricted":
        for fault in restricted_faults(template.get("spec") or {}):
            fail(f"{source}: {obj['kind']} {obj['metadata']['name']}",
                 f"its Pods are refused in namespace {namespace}, which enforces the restricted Pod Security "
                 f"Standard: {fault}")

# 18. The Deployment stays available through a rollout and a node drain: every webhook fails
# closed and every sync goes through it.


def scaled(value, replicas, round_up):
    """An int-or-percent of `replicas`, rounded as Kubernetes rounds it there."""
    if isinstance(value, str) and value.endswith("%"):
        share = replicas * int(value[:-1]) / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


def availability_faults(deployment, container, budgets, listen):
    """What lets every replica of a metahooks Deployment be gone at once, or a node drain hang:
    one replica, a rollout that may stop them all, no disruption budget that leaves one and
    lets one go, no spread over nodes, and probes that do not ask the server."""
    faults = []
    spec, template = deployment["spec"], deployment["spec"]["template"]
    labels, replicas = template["metadata"].get("labels") or {}, spec.get("replicas", 1)
    if replicas < 2:
        faults.append(f"{replicas} replica: while it restarts every webhook (failurePolicy Fail) refuses "
                      "writes and every sync fails")
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        faults.append("strategy Recreate stops every replica before the new ones start")
    else:
        unavailable = scaled((strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%"), replicas, False)
        if replicas - unavailable < 1:
            faults.append(f"a rollout may take all {replicas} replicas away at once (maxUnavailable {unavailable})")
    chosen = [budget for budget in budgets if selects(budget["spec"].get("selector") or {}, labels)]
    if not chosen:
        faults.append("no PodDisruptionBudget selects its Pods: a node drain may evict every replica at once")
    for budget in chosen:
        name, budget_spec = budget["metadata"]["name"], budget["spec"]
        if "minAvailable" in budget_spec:
            kept = scaled(budget_spec["minAvailable"], replicas, True)
            if not 1 <= kept <= replicas - 1:
                faults.append(f"PodDisruptionBudget {name} keeps {kept} of {replicas} replicas: "
                              + ("a drain may evict them all" if kept < 1 else "no drain can evict one, and drains hang"))
        else:
            gone = scaled(budget_spec.get("maxUnavailable", 0), replicas, True)
            if not 1 <= gone <= replicas - 1:
                faults.append(f"PodDisruptionBudget {name} lets {gone} of {replicas} replicas go: "
                              + ("no drain can evict one, and drains hang" if gone < 1 else "a drain may evict them all"))
    spread = [c for c in template["spec"].get("topologySpreadConstraints") or []
              if c.get("topologyKey") == "kubernetes.io/hostname"]
    if not spread or not all(selects(c.get("labelSelector") or {}, labels) for c in spread):
        faults.append("no spread over nodes (a topologySpreadConstraint on kubernetes.io/hostname that selects "
                      "its Pods): one node going away may take every replica")
    names = {port.get("name"): port["containerPort"] for port in container.get("ports") or []}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = (container.get(probe) or {}).get("httpGet") or {}
        if get.get("path") != path or names.get(get.get("port"), get.get("port")) != listen:
            faults.append(f"no {probe} asking {path} on the port of --listen ({listen})")
    return faults


budgets_by_namespace = {}
for _, obj in objects:
    if obj.get("kind") == "PodDisruptionBudget":
        budgets_by_namespace.setdefault(obj["metadata"].get("namespace"), []).append(obj)
for server in servers:
    for fault in availability_faults(server["deployment"], server["container"],
                                     budgets_by_namespace.get(server["namespace"], []), server["listen"]):
        fail(server["where"], fault)

for route in sorted(set(routes) - used_routes):
    fail("manifests", f"route {route} ({routes[route]}) is served but wired nowhere")

if errors:
    print("\n".join(errors))
    sys.exit(1)
print(f"manifests: {len(objects)} objects checked, {len(used_routes)} routes wired")
print(f"CRD rule costs: the costliest {costliest[0]} of {cel_check.PER_RULE_LIMIT} ({costliest[1]})")
