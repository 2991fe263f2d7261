"""Throw-away TLS certificates for the lab's TLS cluster, made with the ``openssl`` command (no Python package).

A CA, a server certificate it signs (for 127.0.0.1, the address the lab's brokers register), a client
certificate it signs (mutual TLS), and a second, unrelated CA that a test can offer as the wrong one. Keys are
EC P-256 in PKCS#8 (``BEGIN PRIVATE KEY``), the form Netty's JDK provider reads; they live a day.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LabCertificates", "make_certificates"]


@dataclass(frozen=True)
class LabCertificates:
    """The files :func:`make_certificates` wrote (PEM)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the openssl command is needed to make the lab's TLS certificates")
    done = subprocess.run([openssl, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {done.stderr.strip().splitlines()[-1:]}")


def _key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.pem"
    _key(key)
    _openssl(
        "req", "-x509", "-new", "-key", str(key), "-days", "1", "-subj", f"/CN=rocket-rebalance lab {name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-out", str(cert),
    )  # fmt: skip
    return cert, key


def _signed(directory: Path, name: str, ca: tuple[Path, Path], extensions: str) -> tuple[Path, Path]:
    key, cert, request = directory / f"{name}.key", directory / f"{name}.pem", directory / f"{name}.csr"
    extfile = directory / f"{name}.ext"
    extfile.write_text(extensions + "\n", encoding="ascii")
    _key(key)
    _openssl("req", "-new", "-key", str(key), "-subj", f"/CN={name}", "-out", str(request))
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
        "-set_serial", "0x" + name.encode().hex(), "-days", "1", "-extfile", str(extfile), "-out", str(cert),
    )  # fmt: skip
    return cert, key


def make_certificates(directory: Path) -> LabCertificates:
    """Write a CA, a server and a client certificate signed by it, and another CA, into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "ca")
    other_ca, _ = _ca(directory, "other-ca")
    server = _signed(directory, "server", ca, "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth")
    client = _signed(directory, "client", ca, "extendedKeyUsage=clientAuth")
    return LabCertificates(ca[0], server[0], server[1], client[0], client[1], other_ca)
