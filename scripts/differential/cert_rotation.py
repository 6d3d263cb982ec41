"""cert-rotation.md's CertificateManager sync (§3) written again from the spec alone, compared
with the server on random pairs of syncs: the second observes the children the server answered
to the first, with roles, names, CAs or Secrets changed now and then."""
import base64
import copy
import math
import random
import re
import time

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

import cas
from common import TALLY, close, dns_name, dns_subdomain, post, validity_seconds
from mesh_root_certificate import (MRC_KEY, NAMES, NS, ROLES, ca_secret, provider_of,
                                   random_mrc, role)

SIGNING, VALIDATING = "metahooks.dev/signing-issuer", "metahooks.dev/validating-issuer"


def spec_problem(spec):
    name = (spec.get("trustBundle") or {}).get("configMapName")
    if not dns_subdomain(name):
        return True
    seen = set()
    for c in spec.get("certificates") or []:
        secret = c.get("secretName")
        if not dns_subdomain(secret) or secret in seen:
            return True
        seen.add(secret)
        cn = c.get("commonName")
        if not isinstance(cn, str) or not cn or len(cn.encode()) > 64:
            return True
        names = c.get("dnsNames")
        if not isinstance(names if names is not None else [], list):
            return True
        for d in names or []:
            if not dns_name(d[2:] if isinstance(d, str) and d.startswith("*.") else d):
                return True
        if validity_seconds(c.get("validity")) is None:
            return True
        # Without dnsNames the commonName is the leaf's DNS name, an IA5String (DECISIONS).
        if not names and not cn.isascii():
            return True
    return False


def trust(signing, validating):
    ended = lambda t: t if t.endswith("\n") else t + "\n"
    return ended(signing) + (ended(validating) if validating != signing else "")


def trust_domain(mrc):
    domain = (mrc.get("spec") or {}).get("trustDomain")
    return domain if isinstance(domain, str) else "cluster.local"


def spiffe_path(mrc, cn):
    domain = trust_domain(mrc)
    return cn[: -len("." + domain)] if cn.endswith("." + domain) else cn


def spiffe_id(mrc, cn):
    return f"spiffe://{trust_domain(mrc)}/{spiffe_path(mrc, cn).replace('.', '/')}"


# What the SPIFFE standard lets a trust domain and a path segment hold (DECISIONS): a trust
# domain's parts between dots must not be empty either, or URI parsers refuse its host.
SPIFFE_DOMAIN = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
SPIFFE_PATH = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")


def keeps(observed, signer, validator, ca, signer_mrc, wanted, now):
    """§3.3: whether an observed leaf Secret is kept."""
    annotations = observed["metadata"].get("annotations") or {}
    if (annotations.get(SIGNING), annotations.get(VALIDATING)) != (signer, validator):
        return False
    crt, key = cas.secret_value(observed, "tls.crt"), cas.secret_value(observed, "tls.key")
    try:
        cert = x509.load_pem_x509_certificate(crt)
        private = serialization.load_pem_private_key(key, None)
    except (TypeError, ValueError):
        return False
    if not cas.same_public_key(private.public_key(), cert.public_key()) or \
            cert.issuer != ca.subject:
        return False
    try:
        if isinstance(ca.public_key(), rsa.RSAPublicKey):
            ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(),
                                   cert.signature_hash_algorithm)
        else:
            ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes,
                                   ec.ECDSA(cert.signature_hash_algorithm))
    except (InvalidSignature, TypeError, ValueError):
        return False
    names = cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
    if [n.value for n in names] != [wanted["commonName"]]:
        return False
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns, uris = set(san.get_values_for_type(x509.DNSName)), \
            san.get_values_for_type(x509.UniformResourceIdentifier)
    except x509.ExtensionNotFound:
        dns, uris = set(), []
    if dns != set(wanted.get("dnsNames") or [wanted["commonName"]]):
        return False
    spiffe = (signer_mrc.get("spec") or {}).get("spiffeEnabled")
    if uris != ([spiffe_id(signer_mrc, wanted["commonName"])] if spiffe else []):
        return False
    start, end = cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()
    return end - now >= (end - start) / 3


def sync(request, now):
    """What §3 answers: {ready, S, V, children[, bundle, leaves, resync, ca]}."""
    parent = request["parent"]
    spec, previous = parent.get("spec") or {}, parent.get("status") or {}
    related, children = request.get("related") or {}, request.get("children") or {}
    mrcs = {m["metadata"]["name"]: m for m in (related.get(MRC_KEY) or {}).values()
            if m["metadata"].get("namespace") == NS and not m["metadata"].get("deletionTimestamp")}
    secrets = {s["metadata"]["name"]: s for s in (related.get("Secret.v1") or {}).values()
               if s["metadata"].get("namespace") == NS}
    leaves = {s["metadata"]["name"]: s for s in (children.get("Secret.v1") or {}).values()}
    bundles = {c["metadata"]["name"] for c in (children.get("ConfigMap.v1") or {}).values()}

    def frozen(reason):
        return {"ready": ("False", reason), "S": previous.get("signingIssuer"),
                "V": previous.get("validatingIssuer"),
                "children": [("ConfigMap", n) for n in sorted(bundles)]
                + [("Secret", n) for n in sorted(leaves)]}

    if spec_problem(spec):
        return frozen("InvalidSpec")
    if any(c["secretName"] in secrets and c["secretName"] not in leaves
           for c in spec.get("certificates") or []):
        return frozen("SecretConflict")
    if any(role(m.get("spec")) not in ROLES for m in mrcs.values()):
        return frozen("InvalidMRC")
    in_use = {n: role(m.get("spec")) for n, m in mrcs.items()
              if role(m.get("spec")) in ("active", "passive")}
    actives = sorted((n for n, r in in_use.items() if r == "active"), key=str.encode)
    if not in_use:
        return frozen("NoMRCInUse")
    if len(in_use) > 2:
        return frozen("TooManyMRCsInUse")
    if not actives:
        return frozen("NoActiveMRC")
    if len(actives) == 2:
        current = previous.get("signingIssuer")
        signer = current if current in actives else actives[0]
        validator = actives[1] if signer == actives[0] else actives[0]
    else:
        signer = actives[0]
        validator = next((n for n in in_use if n != signer), signer)
    # One rotation step from the current pair (DECISIONS): the new signer is trusted now and the
    # current signer after. A first sync, or a current signer no MRC names, holds nothing back.
    signs_now = previous.get("signingIssuer")
    if signs_now in mrcs:
        trusted_now = {signs_now, previous.get("validatingIssuer") or signs_now}
        if signer not in trusted_now or signs_now not in (signer, validator):
            return frozen("RotationStepSkipped")
    found = {}
    for issuer in (signer, validator):
        given, secret = provider_of(mrcs[issuer].get("spec"))
        if len(given) != 1 or (given == ["tresor"] and not dns_subdomain(secret)):
            return frozen("InvalidMRC")
        if given[0] != "tresor":
            return frozen("UnsupportedProvider")
        found[issuer] = cas.usable(secrets.get(secret), now)
        if found[issuer] is None:
            return frozen("CAUnavailable")
    # The signer's leaves carry SPIFFE IDs the SPIFFE standard allows (DECISIONS).
    if (mrcs[signer].get("spec") or {}).get("spiffeEnabled"):
        domain = trust_domain(mrcs[signer])
        if len(domain) > 255 or not SPIFFE_DOMAIN.fullmatch(domain):
            return frozen("InvalidMRC")
        for c in spec.get("certificates") or []:
            if not SPIFFE_PATH.fullmatch(spiffe_path(mrcs[signer], c["commonName"])):
                return frozen("InvalidSpec")
    ca = found[signer][0]
    kept, renewals = [], []
    for wanted in spec.get("certificates") or []:
        observed = leaves.get(wanted["secretName"])
        keep = observed is not None and keeps(observed, signer, validator, ca, mrcs[signer],
                                              wanted, now)
        kept.append((wanted["secretName"], keep))
        if keep:
            cert = x509.load_pem_x509_certificate(cas.secret_value(observed, "tls.crt"))
            start, end = cert.not_valid_before_utc.timestamp(), \
                cert.not_valid_after_utc.timestamp()
        else:
            start, end = now, now + validity_seconds(wanted.get("validity"))
        renewals.append(end - (end - start) / 3 - now)
    return {"ready": ("True", "IssuersReady"), "S": signer, "V": validator,
            "children": [("ConfigMap", spec["trustBundle"]["configMapName"])]
            + [("Secret", n) for n, _ in kept],
            "bundle": trust(found[signer][1], found[validator][1]), "leaves": kept,
            "certificates": spec.get("certificates") or [],
            "resync": max(1, math.ceil(min(renewals))) if renewals else None, "ca": ca}


def random_certificate(rng, i):
    c = {"secretName": f"leaf-{i}",
         "commonName": f"svc-{i}.ns.{rng.choice(['cluster.local', 'mesh.example'])}"}
    if rng.random() < 0.5:
        c["dnsNames"] = rng.sample([f"svc-{i}.ns.svc", "*.ns.svc", f"s{i}.example"],
                                   rng.randint(1, 2))
    if rng.random() < 0.6:
        c["validity"] = rng.choice(["24h", "1h", "8760h", "1h30m"])
    if rng.random() < 0.04:
        # At and past each bound of §3.1 and §3.4.
        c["validity"] = rng.choice(["10m", "9m", "0s", "599s", "87600h", "87601h", "1h30m15s",
                                    "1h1h", "01h", "1d", "", "h", "1H", 5, None])
    if rng.random() < 0.03:
        c["commonName"] = rng.choice(["", "x" * 64, "x" * 65, "é" * 32, "é" * 33, 5, None,
                                      "svc 1.ns", "*.ns.svc", "svc..ns", "svc.ns.", "Svc_1-a.ns",
                                      ".cluster.local", "cluster.local", "a%41.ns"])
    if rng.random() < 0.03:
        c["dnsNames"] = rng.choice([["*.ns.svc"], ["a..b"], ["*"], ["UPPER.case"], ["-a.b"],
                                    ["a" * 64 + ".x"], [5], "a.b", [], None])
    if rng.random() < 0.02:
        c["secretName"] = rng.choice(["leaf-0", "Bad_Name", "x" * 254, "a.b"])
    return c


def random_world(rng, pool):
    mrcs = {f"{NS}/{n}": random_mrc(rng, n) for n in NAMES if rng.random() < 0.75}
    # Each MRC's CA: mostly usable and never the same one twice, sometimes missing or unusable.
    usable = rng.sample(cas.USABLE, len(NAMES))
    secrets = {}
    for n, kind in zip(NAMES, usable):
        r = rng.random()
        if r < 0.06:
            continue
        if r < 0.2:
            kind = rng.choice(cas.UNUSABLE)
        secrets[f"{NS}/{n}-ca"] = ca_secret(n + "-ca", pool[kind])
    spec = {"trustBundle": {"configMapName": "bundle"},
            "certificates": [random_certificate(rng, i) for i in range(rng.randint(0, 3))]}
    if rng.random() < 0.04:
        spec["trustBundle"]["configMapName"] = "Bad_Name"
    if rng.random() < 0.04 and spec["certificates"]:
        spec["certificates"][0]["validity"] = "soon"
    return mrcs, secrets, spec


def changed_world(rng, mrcs, secrets, spec, pool):
    mrcs, spec, secrets = copy.deepcopy(mrcs), copy.deepcopy(spec), dict(secrets)
    for m in mrcs.values():
        if rng.random() < 0.3:
            m["spec"]["role"] = rng.choice(["active", "passive", "inactive"])
        if rng.random() < 0.05:
            m["spec"]["spiffeEnabled"] = not m["spec"].get("spiffeEnabled")
    if rng.random() < 0.2 and spec["certificates"]:
        rng.choice(spec["certificates"])["dnsNames"] = ["changed.ns.svc"]
    if rng.random() < 0.15:
        spec["certificates"].append(random_certificate(rng, 7))
    if rng.random() < 0.1:
        n = rng.choice(NAMES)
        secrets[f"{NS}/{n}-ca"] = ca_secret(n + "-ca", pool[rng.choice(["p256-b", "expired"])])
    if rng.random() < 0.05 and spec["certificates"]:
        n = spec["certificates"][0]["secretName"]
        secrets[f"{NS}/{n}"] = ca_secret(n, pool["p256-a"])
    return mrcs, secrets, spec


def request(spec, status, mrcs, secrets, children):
    """A sync request; its related Secrets hold the children's, as the namespace's do."""
    related = dict(secrets)
    related.update({f"{NS}/{s['metadata']['name']}": s for s in children["Secret.v1"].values()})
    parent = {"apiVersion": "metahooks.dev/v1alpha1", "kind": "CertificateManager",
              "metadata": {"name": "mesh", "namespace": NS, "uid": "p", "generation": 3},
              "spec": spec}
    if status is not None:
        parent["status"] = status
    return {"controller": {}, "parent": parent, "children": children,
            "related": {MRC_KEY: mrcs, "Secret.v1": related}}


def as_observed(answer):
    """The children an answer asked for, as the next sync would observe them."""
    children = {"ConfigMap.v1": {}, "Secret.v1": {}}
    for child in answer["children"]:
        o = copy.deepcopy(child)
        o["metadata"].update(uid="c-" + o["metadata"]["name"], resourceVersion="9")
        children[o["kind"] + ".v1"][f"{NS}/{o['metadata']['name']}"] = o
    return children


def issued_problems(child, cert, want, name):
    """§3.4 on a leaf just issued: what it carries that the spec does not ask for."""
    wanted = next(c for c in want["certificates"] if c["secretName"] == name)
    key = serialization.load_pem_private_key(base64.b64decode(child["data"]["tls.key"]), None)
    ext = {e.oid: e.value for e in cert.extensions}
    usage = ext.get(x509.oid.ExtensionOID.KEY_USAGE)
    ca_key = want["ca"].public_key()
    digest = "sha384" if isinstance(ca_key, ec.EllipticCurvePublicKey) and \
        ca_key.curve.name == "secp384r1" else "sha256"
    checks = {
        "a P-256 key, PKCS#8": isinstance(key, ec.EllipticCurvePrivateKey)
        and key.curve.name == "secp256r1"
        and base64.b64decode(child["data"]["tls.key"]).startswith(b"-----BEGIN PRIVATE KEY-----"),
        "a positive serial of at most 20 octets": 0 < cert.serial_number < 2 ** 159,
        "NotBefore now, NotAfter now + validity": abs(
            (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds()
            - validity_seconds(wanted.get("validity"))) <= 1,
        "not a CA": not ext[x509.oid.ExtensionOID.BASIC_CONSTRAINTS].ca,
        "digitalSignature and keyEncipherment": usage is not None and usage.digital_signature
        and usage.key_encipherment and not usage.key_cert_sign,
        "serverAuth and clientAuth": set(ext.get(x509.oid.ExtensionOID.EXTENDED_KEY_USAGE, []))
        == {x509.oid.ExtendedKeyUsageOID.SERVER_AUTH, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH},
        "S's subject, byte for byte, as its issuer": cert.issuer.public_bytes()
        == want["ca"].subject.public_bytes(),
        "S's key identifier": ext[x509.oid.ExtensionOID.AUTHORITY_KEY_IDENTIFIER].key_identifier
        == want["ca"].extensions.get_extension_for_class(
            x509.SubjectKeyIdentifier).value.digest,
        f"signed with {digest}": cert.signature_hash_algorithm.name == digest,
        "PEM lines of 64": all(len(line) <= 64 for line in base64.b64decode(
            child["data"]["tls.crt"]).decode().splitlines()),
    }
    return [f"new leaf without {what}" for what, holds in checks.items() if not holds]


def differences_of(answer, want, observed):
    status = answer["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    got = {"ready": (ready["status"], ready["reason"]), "S": status.get("signingIssuer"),
           "V": status.get("validatingIssuer"),
           "children": [(c["kind"], c["metadata"]["name"]) for c in answer["children"]]}
    summary = {k: want[k] for k in got}
    if got != summary:
        return [f"spec {summary}, server {got}"]
    found = []
    if want["ready"][0] == "False":
        for child in answer["children"]:
            before = observed[child["kind"] + ".v1"][f"{NS}/{child['metadata']['name']}"]
            if child.get("data") != before.get("data"):
                found.append(f"frozen, {child['metadata']['name']} changed")
        if "resyncAfterSeconds" in answer:
            found.append("frozen, with a resync")
        return found
    if answer["children"][0]["data"]["ca.crt"] != want["bundle"]:
        found.append("the trust bundle is not S's then V's ca.crt")
    for child, (name, keep) in zip(answer["children"][1:], want["leaves"]):
        before = observed["Secret.v1"].get(f"{NS}/{name}")
        same = before is not None and child["data"]["tls.crt"] == before["data"]["tls.crt"]
        if same != keep:
            found.append(f"{name}: spec {'keeps' if keep else 'issues'}, server "
                         f"{'keeps' if same else 'issues'}")
        if base64.b64decode(child["data"]["ca.crt"]).decode() != want["bundle"]:
            found.append(f"{name}: ca.crt is not the trust bundle")
        annotations = child["metadata"].get("annotations") or {}
        if (annotations.get(SIGNING), annotations.get(VALIDATING)) != (want["S"], want["V"]):
            found.append(f"{name}: issuer annotations")
        cert = x509.load_pem_x509_certificate(base64.b64decode(child["data"]["tls.crt"]))
        if cert.issuer != want["ca"].subject:
            found.append(f"{name}: not issued by S")
        if not same:
            found += [f"{name}: {p}" for p in issued_problems(child, cert, want, name)]
    if not close(want["resync"], answer.get("resyncAfterSeconds")):
        found.append(f"resync: spec {want['resync']}, server {answer.get('resyncAfterSeconds')}")
    return found


def run(base, seed, count, pool):
    differences = []
    for case in range(seed, seed + count):
        rng = random.Random(case)
        mrcs, secrets, spec = random_world(rng, pool)
        status = None
        if rng.random() < 0.5:
            status = {"signingIssuer": rng.choice(NAMES), "validatingIssuer": rng.choice(NAMES)}
        first = request(spec, status, mrcs, secrets, {"ConfigMap.v1": {}, "Secret.v1": {}})
        now = time.time()
        want = sync(first, now)
        answer = post(base, "/cert-rotation/sync", first)
        found = differences_of(answer, want, first["children"])
        mrcs, secrets, spec = changed_world(rng, mrcs, secrets, spec, pool)
        observed = as_observed(answer)
        second = request(spec, answer["status"], mrcs, secrets, observed)
        now = time.time()
        want = sync(second, now)
        TALLY[f"cert-rotation sync: {want['ready'][1]}"] += 1
        for _, keep in want.get("leaves", []):
            TALLY[f"cert-rotation sync: a leaf {'kept' if keep else 'issued'}"] += 1
        found += differences_of(post(base, "/cert-rotation/sync", second), want, observed)
        differences += [f"cert-rotation/sync case {case}: {f}" for f in found]
    return differences
