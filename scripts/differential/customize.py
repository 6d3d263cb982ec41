"""The three customize hooks (app-discovery.md §3, cert-rotation.md §2) written again from the
specs, compared with the server on random parents: the rules depend only on the parent's
namespace and, for an MRC, on its Tresor CA Secret's name."""
import random

from app_discovery import K as KEPTN
from common import TALLY, call
from mesh_root_certificate import provider_of, random_spec

MRC = "config.openservicemesh.io/v1alpha2"
MANAGER = "metahooks.dev/v1alpha1"


def in_namespace(api_version, resource, ns):
    return {"apiVersion": api_version, "resource": resource, "namespace": ns}


def app_discovery(parent, ns):
    return [in_namespace(KEPTN, "keptnworkloads", ns), in_namespace(KEPTN, "keptnapps", ns)]


def cert_rotation(parent, ns):
    return [in_namespace(MRC, "meshrootcertificates", ns), in_namespace("v1", "secrets", ns)]


def mesh_root_certificate(parent, ns):
    rules = [in_namespace(MRC, "meshrootcertificates", ns),
             in_namespace(MANAGER, "certificatemanagers", ns)]
    _, secret = provider_of(parent.get("spec"))
    if isinstance(secret, str) and secret:
        rules.append({**in_namespace("v1", "secrets", ns), "names": [secret]})
    return rules


HOOKS = {"/app-discovery/customize": (app_discovery, "AppDiscovery"),
         "/cert-rotation/customize": (cert_rotation, "CertificateManager"),
         "/mesh-root-certificate/customize": (mesh_root_certificate, "MeshRootCertificate")}


def random_request(rng, kind):
    metadata = {"name": rng.choice(["p", "parent-2"]), "uid": "u", "generation": rng.randint(1, 9)}
    r = rng.random()
    if r < 0.85:
        metadata["namespace"] = rng.choice(["osm", "keptn-apps", "a" * 63])
    elif r < 0.95:
        metadata["namespace"] = ""
    parent = {"apiVersion": "x/v1", "kind": kind, "metadata": metadata}
    if kind == "MeshRootCertificate" and rng.random() < 0.95:
        parent["spec"] = random_spec(rng)
    elif rng.random() < 0.5:
        parent["spec"] = {"timeoutSeconds": 30}
    request = {"parent": parent}
    if rng.random() < 0.9:
        request["controller"] = {"apiVersion": "metacontroller.k8s.io/v1alpha1",
                                 "kind": rng.choice(["CompositeController", "DecoratorController"]),
                                 "metadata": {"name": "c"}}
    return request


def run(base, seed, count):
    differences = []
    for case in range(seed, seed + count):
        rng = random.Random(case)
        route = rng.choice(sorted(HOOKS))
        rules, kind = HOOKS[route]
        request = random_request(rng, kind)
        ns = request["parent"]["metadata"].get("namespace")
        # A parent without a namespace is a bad request (DECISIONS): every parent kind is
        # namespaced, and a rule without one would select every namespace.
        want = (200, {"relatedResources": rules(request["parent"], ns)}) if ns else (400, None)
        status, answer = call(base, route, request)
        if status == 400 and answer.get("path") == "parent.metadata.namespace":
            answer = None
        outcome = f"{len(want[1]['relatedResources'])} rules" if want[1] else "no namespace, 400"
        TALLY[f"{route[1:]}: {outcome}"] += 1
        if (status, answer) != want:
            differences.append(f"{route} case {case}: spec {want}, server {(status, answer)}")
    return differences
