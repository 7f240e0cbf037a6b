"""The test bed's keys and certificates (openssl), and the kubeconfigs that use them."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from testbed.errors import TestbedError


def openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise TestbedError(f"openssl {' '.join(args[:2])} failed: {done.stderr.strip()}")


def make_pki(pki: Path) -> None:
    """A CA; kube-apiserver's serving certificate for 127.0.0.1 and localhost; client
    certificates (CN is the user, O the groups) for the admin and the two components; the
    service-account signing key pair. EC P-256 keys: made in milliseconds."""
    if shutil.which("openssl") is None:
        raise TestbedError("openssl is not installed (apt-get install openssl)")
    pki.mkdir(parents=True, exist_ok=True)
    _self_signed(pki, "rulesched-testbed-ca", "ca")
    leaves = {
        "apiserver": (
            "/CN=kube-apiserver",
            "serverAuth",
            "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
            "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.96.0.1",
        ),
        "admin": ("/O=system:masters/CN=kubernetes-admin", "clientAuth", None),
        "kube-controller-manager": ("/CN=system:kube-controller-manager", "clientAuth", None),
        "kube-scheduler": ("/CN=system:kube-scheduler", "clientAuth", None),
    }
    for name, (subject, usage, san) in leaves.items():
        request = ["req", *_NEW_KEY, "-subj", subject, "-keyout", f"{name}.key", "-out", f"{name}.csr"]
        extensions = [f"extendedKeyUsage={usage}", "keyUsage=critical,digitalSignature,keyEncipherment"]
        if san:
            extensions.append(f"subjectAltName={san}")
        (pki / f"{name}.ext").write_text("\n".join(extensions) + "\n")
        openssl(*request, cwd=pki)
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "3650",
            "-extfile",
            f"{name}.ext",
            "-out",
            f"{name}.crt",
            cwd=pki,
        )
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", "sa.key", cwd=pki)
    openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    # The aggregation layer's front proxy (kube-apiserver's --requestheader-* and --proxy-client-*,
    # as kubeadm sets them): APIService backends such as metrics-server can then be added.
    _self_signed(pki, "front-proxy-ca", "front-proxy-ca")
    (pki / "front-proxy-client.ext").write_text("extendedKeyUsage=clientAuth\n")
    openssl(
        "req",
        *_NEW_KEY,
        "-subj",
        "/CN=front-proxy-client",
        "-keyout",
        "front-proxy-client.key",
        "-out",
        "front-proxy-client.csr",
        cwd=pki,
    )
    openssl(
        "x509",
        "-req",
        "-in",
        "front-proxy-client.csr",
        "-CA",
        "front-proxy-ca.crt",
        "-CAkey",
        "front-proxy-ca.key",
        "-CAcreateserial",
        "-days",
        "3650",
        "-extfile",
        "front-proxy-client.ext",
        "-out",
        "front-proxy-client.crt",
        cwd=pki,
    )
    for f in pki.glob("*.key"):
        f.chmod(0o600)


def write_kubeconfig(path: Path, server: str, pki: Path, user: str) -> None:
    """A kubeconfig for one client certificate (JSON is YAML: no YAML library needed)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "testbed", "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")}}],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(pki / f"{user}.crt"), "client-key": str(pki / f"{user}.key")},
            }
        ],
        "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": user}}],
        "current-context": "testbed",
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)


_NEW_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")  # EC P-256, unencrypted


def _self_signed(pki: Path, common_name: str, name: str) -> None:
    """A CA of its own: ``name``.key and ``name``.crt in ``pki``, valid ten years."""
    openssl(
        "req",
        "-x509",
        *_NEW_KEY,
        "-days",
        "3650",
        "-subj",
        f"/CN={common_name}",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.crt",
        cwd=pki,
    )
