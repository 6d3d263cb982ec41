"""CA Secrets for the cert-rotation comparisons, made with Python's `cryptography`: usable ones
of each accepted key type, and each way of being unusable (cert-rotation.md §2)."""
import base64
import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

USABLE = ("p256-a", "p256-b", "p256-c", "rsa", "p384", "p256-dn")
UNUSABLE = ("expired", "not-a-ca", "other-key", "no-key", "key-in-crt")


# A subject as enterprise CAs have: attribute types repeated, an RDN of two attributes.
ENTERPRISE = [
    x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "com")]),
    x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "example")]),
    x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example"),
                                    x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Mesh")]),
    x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Eu")]),
]


def _secret_data(cn, key=None, ca=True, expired=False, other_key=False, rdns=()):
    now = dt.datetime.now(dt.timezone.utc)
    key = key or ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([*rdns, x509.RelativeDistinguishedName(
        [x509.NameAttribute(NameOID.COMMON_NAME, cn)])])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(days=30))
               .not_valid_after(now + (dt.timedelta(days=-1) if expired else
                                       dt.timedelta(days=3650)))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                              critical=False))
    cert = builder.sign(key, hashes.SHA256())
    written = ec.generate_private_key(ec.SECP256R1()) if other_key else key
    pem_key = written.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    return {"ca.crt": base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode(),
            "private.key": base64.b64encode(pem_key).decode()}


def make_pool():
    """kind -> a CA Secret's `data`, one of each kind in USABLE and UNUSABLE."""
    pool = {kind: _secret_data(f"ca-{kind}") for kind in ("p256-a", "p256-b", "p256-c")}
    pool["rsa"] = _secret_data("ca-rsa", key=rsa.generate_private_key(65537, 2048))
    pool["p384"] = _secret_data("ca-p384", key=ec.generate_private_key(ec.SECP384R1()))
    pool["p256-dn"] = _secret_data("ca-dn", rdns=ENTERPRISE)
    pool["expired"] = _secret_data("ca-expired", expired=True)
    pool["not-a-ca"] = _secret_data("not-a-ca", ca=False)
    pool["other-key"] = _secret_data("ca-other-key", other_key=True)
    pool["no-key"] = {"ca.crt": pool["p256-a"]["ca.crt"]}
    both = b"".join(base64.b64decode(pool["p256-c"][k]) for k in ("ca.crt", "private.key"))
    pool["key-in-crt"] = {"ca.crt": base64.b64encode(both).decode(),
                          "private.key": pool["p256-c"]["private.key"]}
    return pool


def secret_value(secret, key):
    """A Secret's `data[key]` decoded, or None."""
    value = (secret.get("data") or {}).get(key)
    return None if value is None else base64.b64decode(value)


def same_public_key(a, b):
    der = serialization.Encoding.DER
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    return a.public_bytes(der, spki) == b.public_bytes(der, spki)


def usable(secret, now):
    """§2's usable CA: (certificate, `ca.crt` text) of a Secret, or None."""
    if secret is None:
        return None
    crt, key = secret_value(secret, "ca.crt"), secret_value(secret, "private.key")
    if crt is None or key is None:
        return None
    # §8: the trust bundle, which carries `ca.crt` as it is, holds certificates only.
    if b"PRIVATE KEY-----" in crt:
        return None
    try:
        cert = x509.load_pem_x509_certificate(crt)
        private = serialization.load_pem_private_key(key, None)
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except (ValueError, x509.ExtensionNotFound):
        return None
    if not constraints.ca or cert.not_valid_after_utc.timestamp() <= now:
        return None
    if not same_public_key(private.public_key(), cert.public_key()):
        return None
    return cert, crt.decode()
