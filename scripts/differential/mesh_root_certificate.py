"""cert-rotation.md's MRC webhooks (§6) and MRC decorator (§4) written again from the spec alone,
compared with the server on random reviews and decorator requests."""
import base64
import copy
import datetime as dt
import json
import math
import random
import time

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtensionOID, NameOID

import cas
from common import TALLY, close, dns_subdomain, post, rfc3339, validity_seconds

ROLES = ("active", "passive", "inactive")
NAMESPACE_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
BUSY_STATES = ("active", "issuingRollout", "validatingRollout", "issuingRollback")
NS = "osm"
NAMES = ["mrc-a", "mrc-b", "mrc-c"]
MRC_KEY = "MeshRootCertificate.config.openservicemesh.io/v1alpha2"
MANAGER_KEY = "CertificateManager.metahooks.dev/v1alpha1"
PROVIDERS = ("tresor", "vault", "certManager")


def provider_of(spec):
    """The providers an MRC's spec names, and its Tresor CA Secret's name (or None)."""
    provider = (spec or {}).get("provider") or {}
    ref = (((provider.get("tresor") or {}).get("ca") or {}).get("secretRef") or {})
    return [k for k in PROVIDERS if k in provider], ref.get("name")


def role(spec):
    r = (spec or {}).get("role")
    return "inactive" if r is None else r


def filled(v):
    return isinstance(v, str) and v != ""


def provider_fields_ok(provider):
    if "tresor" in provider:
        ref = ((provider["tresor"] or {}).get("ca") or {}).get("secretRef") or {}
        return filled(ref.get("name")) and filled(ref.get("namespace"))
    if "vault" in provider:
        v = provider["vault"] or {}
        ref = (v.get("token") or {}).get("secretKeyRef") or {}
        port = v.get("port")
        return (filled(v.get("host")) and filled(v.get("role"))
                and v.get("protocol") in ("http", "https")
                and isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535
                and all(filled(ref.get(k)) for k in ("name", "key", "namespace")))
    c = provider["certManager"] or {}
    return (filled(c.get("issuerName")) and c.get("issuerKind") in ("Issuer", "ClusterIssuer")
            and filled(c.get("issuerGroup")))


def validate(request):
    """§6 validate: the key of the first rule that fails, or None."""
    if (request.get("kind") or {}).get("kind") != "MeshRootCertificate":
        return None
    operation = request.get("operation")
    if operation == "CREATE":
        spec = (request.get("object") or {}).get("spec") or {}
        provider = spec.get("provider") or {}
        given = sum(1 for k in PROVIDERS if k in provider)
        if not spec.get("trustDomain"):
            return "trust-domain-empty"
        if given == 0:
            return "provider-missing"
        if given > 1:
            return "provider-multiple"
        if not provider_fields_ok(provider):
            return "provider-fields"
        return None if role(spec) in ROLES else "role-invalid"
    if operation == "UPDATE":
        if request.get("oldObject") is None or request.get("object") is None:
            return None
        new, old = request["object"].get("spec") or {}, request["oldObject"].get("spec") or {}
        if new == old:
            return None
        domain = lambda s: "cluster.local" if s.get("trustDomain") is None else s["trustDomain"]
        spiffe = lambda s: bool(s.get("spiffeEnabled"))
        # A stored role the rules do not know counts as inactive (DECISIONS).
        was = role(old) if role(old) in ROLES else "inactive"
        if new.get("provider") != old.get("provider"):
            return "provider-immutable"
        if domain(new) != domain(old):
            return "trust-domain-immutable"
        if spiffe(new) != spiffe(old):
            return "spiffe-immutable"
        if (was, role(new)) == ("active", "inactive"):
            return "role-active-to-inactive"
        if (was, role(new)) == ("inactive", "active"):
            return "role-inactive-to-active"
        return None if role(new) in ROLES else "role-invalid"
    if operation == "DELETE":
        old = request.get("oldObject")
        if old is None or (request.get("userInfo") or {}).get("username") == NAMESPACE_CONTROLLER:
            return None
        annotations = (old.get("metadata") or {}).get("annotations") or {}
        if annotations.get("metahooks.dev/allow-delete") == "true":
            return None
        status = old.get("status") or {}
        in_use = any(c.get("type") == "InUse" and c.get("status") == "True"
                     for c in status.get("conditions") or [])
        if role(old.get("spec")) == "active" or in_use or status.get("state") in BUSY_STATES:
            return "delete-in-use"
    return None


def mutate(request):
    """§6 mutate: the JSONPatch, or None."""
    if request.get("operation") != "CREATE" or \
            (request.get("kind") or {}).get("kind") != "MeshRootCertificate":
        return None
    defaults = (("role", "inactive"), ("trustDomain", "cluster.local"), ("spiffeEnabled", False))
    spec = (request.get("object") or {}).get("spec")
    if spec is None:
        return [{"op": "add", "path": "/spec", "value": dict(defaults)}]
    return [{"op": "add", "path": "/spec/" + k, "value": v}
            for k, v in defaults if spec.get(k) is None] or None


def decorate(request, now):
    """What §4 answers: {state, accepted, inUse, attachments, generated, resync}."""
    obj = request["object"]
    name, spec, previous = obj["metadata"]["name"], obj.get("spec") or {}, obj.get("status") or {}
    related = request.get("related") or {}
    managers = [m for m in (related.get(MANAGER_KEY) or {}).values()
                if m["metadata"].get("namespace") == NS]
    issuers = [((m.get("status") or {}).get("signingIssuer"),
                (m.get("status") or {}).get("validatingIssuer")) for m in managers]
    signs = any(s == name for s, _ in issuers)
    validates = any(v == name for _, v in issuers)
    alongside = any(s == name and v != name for s, v in issuers)
    if signs or validates:
        in_use = ("True", "SigningAndValidating" if signs and validates
                  else "Signing" if signs else "Validating")
    else:
        in_use = ("False", "NotInUse")
    given, secret_name = provider_of(spec)
    attached = {s["metadata"]["name"]: s
                for s in ((request.get("attachments") or {}).get("Secret.v1") or {}).values()}
    secrets = {s["metadata"]["name"]: s for s in (related.get("Secret.v1") or {}).values()
               if s["metadata"].get("namespace") == NS}
    error, generated = None, False
    # A Tresor Secret name no Secret can have is as good as none (DECISIONS).
    if role(spec) not in ROLES or len(given) != 1 or (given == ["tresor"]
                                                       and not dns_subdomain(secret_name)):
        error = "InvalidSpec"
    elif given[0] != "tresor":
        error = "UnsupportedProvider"
    else:
        secret = attached.get(secret_name) or secrets.get(secret_name)
        if secret is None:
            # Not generated while in use, nor for a name too long for the label (DECISIONS).
            if signs or validates or len(name) > 63:
                error = "CASecretMissing"
            else:
                generated = True
                TALLY["mesh-root-certificate sync: a CA generated"] += 1
        elif cas.usable(secret, now) is None:
            error = "CAUnusable"
    if error is None and role(spec) in ("active", "passive"):
        mrcs = {m["metadata"]["name"]: m for m in (related.get(MRC_KEY) or {}).values()
                if m["metadata"].get("namespace") == NS
                and not m["metadata"].get("deletionTimestamp")}
        mrcs[name] = obj
        used = [role(m.get("spec")) for m in mrcs.values()
                if role(m.get("spec")) in ("active", "passive")]
        if len(used) > 2 or "active" not in used:
            error = "InvalidRoleCombination"
    answer = {"inUse": in_use, "generated": generated, "attachments": sorted(attached),
              "resync": None}
    if error is not None:
        return dict(answer, state="error", accepted=("False", error))
    before = previous.get("state")
    grace = max((v for m in managers for c in (m.get("spec") or {}).get("certificates") or []
                 if (v := validity_seconds(c.get("validity"))) is not None), default=0)
    was_in_use = [c for c in previous.get("conditions") or [] if c.get("type") == "InUse"]
    since = now
    if was_in_use and was_in_use[0].get("status") == "False":
        since = dt.datetime.strptime(was_in_use[0]["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ") \
            .replace(tzinfo=dt.timezone.utc).timestamp()
    left = since + grace - now
    if signs:
        state = "active" if not alongside or before == "active" else "issuingRollout"
    elif validates:
        state = "issuingRollback" if before in ("active", "issuingRollout", "issuingRollback") \
            else "validatingRollout"
    elif before in ("active", "issuingRollout", "issuingRollback"):
        state = "validatingRollback"
    elif before == "validatingRollback" and left > 0:
        state = "validatingRollback"
    else:
        state = "inactive"
    if state == "validatingRollback":
        answer["resync"] = max(1, math.ceil(left))
    return dict(answer, state=state, accepted=("True", "CAReady"))


def generated_problems(secret, request):
    """§4.1 on a CA Secret the decorator made: what it lacks of what the spec asks for."""
    obj = request["object"]
    spec = obj["spec"]
    key = cas.secret_value(secret, "private.key")
    cert = x509.load_pem_x509_certificate(cas.secret_value(secret, "ca.crt"))
    private = serialization.load_pem_private_key(key, None)
    ext = {e.oid: e for e in cert.extensions}
    constraints = ext[ExtensionOID.BASIC_CONSTRAINTS]
    usage = ext[ExtensionOID.KEY_USAGE]
    name = lambda oid: [a.value for a in cert.subject.get_attributes_for_oid(oid)]
    checks = {
        "its name": secret["metadata"]["name"] ==
        spec["provider"]["tresor"]["ca"]["secretRef"]["name"],
        "type Opaque": secret.get("type") == "Opaque",
        "our labels": secret["metadata"].get("labels") == {
            "app.kubernetes.io/managed-by": "metahooks",
            "metahooks.dev/mesh-root-certificate": obj["metadata"]["name"]},
        "a P-256 key, PKCS#8": isinstance(private, ec.EllipticCurvePrivateKey)
        and private.curve.name == "secp256r1"
        and key.startswith(b"-----BEGIN PRIVATE KEY-----"),
        "its own key": cas.same_public_key(private.public_key(), cert.public_key()),
        "CN the MRC's name, O its trust domain": (name(NameOID.COMMON_NAME),
                                                  name(NameOID.ORGANIZATION_NAME))
        == ([obj["metadata"]["name"]], [spec["trustDomain"]]),
        "87600h": (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds()
        == 87600 * 3600,
        "CA=true, critical, no path length": constraints.critical and constraints.value.ca
        and constraints.value.path_length is None,
        "keyCertSign and cRLSign, critical": usage.critical and usage.value.key_cert_sign
        and usage.value.crl_sign,
        "a subject key identifier": ExtensionOID.SUBJECT_KEY_IDENTIFIER in ext,
        "a positive serial": cert.serial_number > 0,
    }
    return [f"without {what}" for what, holds in checks.items() if not holds]


def random_provider(rng):
    provider = {}
    for k in rng.sample(PROVIDERS, rng.choice([0, 1, 1, 1, 1, 2])):
        if k == "tresor":
            ref = {"name": rng.choice(["ca", "", "ca2"]), "namespace": rng.choice([NS, NS, ""])}
            if rng.random() < 0.05:
                del ref["namespace"]
            provider[k] = {"ca": {"secretRef": ref}}
        elif k == "vault":
            provider[k] = {"host": rng.choice(["v", ""]), "role": "r",
                           "protocol": rng.choice(["https", "http", "ftp"]),
                           "port": rng.choice([8200, 0, 70000, "8200"]),
                           "token": {"secretKeyRef": {"name": "t", "key": rng.choice(["k", ""]),
                                                      "namespace": NS}}}
        else:
            provider[k] = {"issuerName": rng.choice(["i", ""]),
                           "issuerKind": rng.choice(["Issuer", "ClusterIssuer", "Other"]),
                           "issuerGroup": "cert-manager.io"}
    return provider


def random_spec(rng):
    spec = {}
    if rng.random() < 0.8:
        spec["role"] = rng.choice(["active", "passive", "inactive", "inactive", None, "bogus"])
    if rng.random() < 0.85:
        spec["trustDomain"] = rng.choice(["cluster.local", "cluster.local", "other.local", "",
                                          None])
    if rng.random() < 0.7:
        spec["spiffeEnabled"] = rng.choice([False, True, None])
    if rng.random() < 0.95:
        spec["provider"] = random_provider(rng)
    return spec


def random_review(rng, uid):
    operation = rng.choice(["CREATE", "UPDATE", "DELETE", "CONNECT"])
    kind = {"group": "config.openservicemesh.io", "version": "v1alpha2",
            "kind": "MeshRootCertificate"}
    if rng.random() < 0.05:
        kind = {"group": "", "version": "v1", "kind": "Secret"}
    obj = {"apiVersion": "config.openservicemesh.io/v1alpha2", "kind": "MeshRootCertificate",
           "metadata": {"name": "m", "namespace": NS, "uid": "u"}}
    if rng.random() < 0.95:
        obj["spec"] = random_spec(rng)
    if rng.random() < 0.2:
        obj["metadata"]["annotations"] = {"metahooks.dev/allow-delete": rng.choice(["true", "yes"])}
    if rng.random() < 0.6:
        obj["status"] = {"state": rng.choice(BUSY_STATES + ("validatingRollback", "inactive")),
                         "conditions": [{"type": "InUse", "status": rng.choice(["True", "False"])}]}
    request = {"uid": uid, "kind": kind, "operation": operation, "name": "m", "namespace": NS,
               "userInfo": {"username": rng.choice(["admin", "admin", NAMESPACE_CONTROLLER])}}
    if operation in ("CREATE", "UPDATE"):
        request["object"] = obj
    if operation in ("UPDATE", "DELETE") and rng.random() < 0.95:
        old = copy.deepcopy(obj)
        if operation == "UPDATE":
            changed = copy.deepcopy(obj.get("spec") or {})
            for _ in range(rng.randint(0, 2)):
                k = rng.choice(["role", "trustDomain", "spiffeEnabled", "provider"])
                changed[k] = random_provider(rng) if k == "provider" else random_spec(rng).get(k)
                if changed[k] is None and rng.random() < 0.5:
                    del changed[k]
            old["spec"] = copy.deepcopy(obj.get("spec") or {})
            obj["spec"] = changed
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def random_mrc(rng, name):
    """An MRC named `name` whose Tresor CA Secret is `<name>-ca`, now and then in a shape one of
    the hooks must refuse (both sync models' requests)."""
    spec = {"trustDomain": rng.choice(["cluster.local", "mesh.example"] * 4
                                      + ["grüne.local", "Mesh.Example", "mesh example",
                                         "mesh..example", "my_mesh-1.local",
                                         "d" * 249 + ".local", "d" * 250 + ".local"]),
            "spiffeEnabled": rng.random() < 0.3,
            "provider": {"tresor": {"ca": {"secretRef": {"name": name + "-ca", "namespace": NS}}}}}
    r = rng.random()
    if r < 0.85:
        spec["role"] = rng.choice(["active", "active", "passive", "inactive"])
    elif r < 0.9:
        spec["role"] = "bogus"
    r = rng.random()
    if r < 0.04:
        spec["provider"] = {"vault": {"host": "v"}}
    elif r < 0.06:
        spec["provider"] = {}
    elif r < 0.08:
        spec["provider"]["certManager"] = {"issuerName": "x"}
    elif r < 0.1:
        del spec["provider"]["tresor"]["ca"]["secretRef"]["name"]
    elif r < 0.12:
        spec["provider"]["tresor"]["ca"]["secretRef"]["name"] = rng.choice(
            ["OSM_CA", "ca.", "c" * 254, "c" * 64 + ".ca"])
    mrc = {"apiVersion": "config.openservicemesh.io/v1alpha2", "kind": "MeshRootCertificate",
           "metadata": {"name": name, "namespace": NS, "uid": "u-" + name, "generation": 2},
           "spec": spec}
    if rng.random() < 0.1:
        mrc["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return mrc


def ca_secret(name, data, ours=False):
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": dict(data),
              "metadata": {"name": name, "namespace": NS, "uid": "s-" + name}}
    if ours:
        secret["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "metahooks"}
    return secret


def random_decorator_request(rng, now, pool):
    name = rng.choice(NAMES) if rng.random() < 0.97 else "m" * 64
    obj = random_mrc(rng, name)
    if rng.random() < 0.7:
        obj["metadata"].pop("deletionTimestamp", None)
    before = rng.choice([None, "validatingRollout", "validatingRollback", "inactive", "error",
                         *BUSY_STATES])
    if before is not None:
        conditions = []
        if rng.random() < 0.8:
            conditions.append({"type": "InUse", "status": rng.choice(["True", "False"]),
                               "reason": "x", "message": "",
                               "lastTransitionTime": rfc3339(
                                   now - rng.choice([60, 3600, 90000, 10 ** 6]))})
        obj["status"] = {"state": before, "conditions": conditions}
    mrcs = {f"{NS}/{name}": obj}
    mrcs.update({f"{NS}/{n}": random_mrc(rng, n) for n in NAMES
                 if n != name and rng.random() < 0.7})
    managers = {}
    for i in range(rng.choice([0, 1, 1, 1, 2])):
        status = {}
        if rng.random() < 0.9:
            signer = rng.choice(NAMES + [name])
            status = {"signingIssuer": signer, "validatingIssuer":
                      signer if rng.random() < 0.5 else rng.choice(NAMES + [name])}
        certificates = [{"secretName": f"leaf-{j}", "commonName": "x"}
                        for j in range(rng.randint(0, 2))]
        for c in certificates:
            if rng.random() < 0.7:
                c["validity"] = rng.choice(["24h", "1h", "5m", "1h30m", "bad", "90000h", "0s"])
        managers[f"{NS}/manager-{i}"] = {
            "apiVersion": "metahooks.dev/v1alpha1", "kind": "CertificateManager",
            "metadata": {"name": f"manager-{i}",
                         "namespace": NS if rng.random() < 0.9 else "other"},
            "spec": {"trustBundle": {"configMapName": "bundle"}, "certificates": certificates},
            "status": status}
    _, secret_name = provider_of(obj["spec"])
    attachments, secrets = {}, {}
    if dns_subdomain(secret_name):
        data = pool[rng.choice(list(pool))]
        r = rng.random()
        if r < 0.45:
            attachments[f"{NS}/{secret_name}"] = ca_secret(secret_name, data, True)
            if rng.random() < 0.5:
                secrets[f"{NS}/{secret_name}"] = ca_secret(secret_name, data, True)
        elif r < 0.7:
            secrets[f"{NS}/{secret_name}"] = ca_secret(secret_name, data, False)
    return {"controller": {}, "object": obj, "attachments": {"Secret.v1": attachments},
            "related": {MRC_KEY: mrcs, MANAGER_KEY: managers, "Secret.v1": secrets},
            "finalizing": False}


def run(base, seed, count, pool):
    differences = []
    for case in range(seed, seed + count):
        rng = random.Random(case)
        review = random_review(rng, f"u{case}")
        request = review["request"]
        key, patch = validate(request), mutate(request)
        TALLY[f"mesh-root-certificate validate: {key or 'allowed'}"] += 1
        answer = post(base, "/mesh-root-certificate/validate", review)["response"]
        got = None if answer["allowed"] else answer["status"]["message"].split(":")[0]
        if got != key:
            differences.append(f"mesh-root-certificate/validate case {case}: spec {key}, server "
                               f"{got}: {json.dumps(request, sort_keys=True)}")
        answer = post(base, "/mesh-root-certificate/mutate", review)["response"]
        got = json.loads(base64.b64decode(answer["patch"])) if "patch" in answer else None
        if got != patch or not answer["allowed"]:
            differences.append(f"mesh-root-certificate/mutate case {case}: spec {patch}, "
                               f"server {got}")
        now = time.time()
        request = random_decorator_request(rng, now, pool)
        want = decorate(request, now)
        TALLY[f"mesh-root-certificate sync: {want['state']}, {want['accepted'][1]}"] += 1
        answer = post(base, "/mesh-root-certificate/sync", request)
        conditions = {c["type"]: (c["status"], c["reason"]) for c in answer["status"]["conditions"]}
        names = [a["metadata"]["name"] for a in answer.get("attachments") or []]
        got = {"state": answer["status"]["state"], "accepted": conditions["Accepted"],
               "inUse": conditions["InUse"], "attachments": sorted(set(names)),
               "generated": len(names) > len(want["attachments"]),
               "resync": answer.get("resyncAfterSeconds")}
        if want["generated"]:
            got["attachments"] = sorted(set(names) & set(want["attachments"]))
            generated = [a for a in answer.get("attachments") or []
                         if a["metadata"]["name"] not in want["attachments"]]
            differences += [f"mesh-root-certificate/sync case {case}: generated CA {p}"
                            for g in generated[:1] for p in generated_problems(g, request)]
        if close(want["resync"], got["resync"]):
            got["resync"] = want["resync"]
        if got != want:
            differences.append(f"mesh-root-certificate/sync case {case}: spec {want}, server {got}")
    return differences
