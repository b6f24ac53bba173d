"""Certificates for a federation on this machine: a throwaway CA and a server certificate for localhost.

``fedprior flower local --tls`` makes them for each run (with the ``cryptography``
package, which Flower depends on): the SuperLink serves its Fleet, Control and
Runtime APIs with ``server.pem`` / ``server.key``; SuperNodes and the ``flwr`` CLI
trust ``ca.pem``. The server certificate names ``localhost``, ``127.0.0.1`` and
``::1`` (plus any ``hosts`` given), so it is good for loopback only; for machines
on a network, make certificates naming the SuperLink's host (docs/flower.md).

``fedprior flower local --tls --auth`` also makes each SuperNode an authentication key pair
(:func:`generate_node_key`): the SuperLink admits the nodes whose public keys are registered, no other.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certificates:
    ca: Path
    cert: Path
    key: Path


def _name(common_name: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fedprior"), x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def generate_certificates(directory: Path, hosts: tuple[str, ...] = (), days: int = 30) -> Certificates:
    """Write ``ca.pem``, ``server.pem`` and ``server.key`` (private, mode 600) into ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    valid = dict(not_valid_before=now - datetime.timedelta(minutes=5), not_valid_after=now + datetime.timedelta(days=days))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("fedprior local CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid["not_valid_before"])
        .not_valid_after(valid["not_valid_after"])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    for host in ("127.0.0.1", "::1", *hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid["not_valid_before"])
        .not_valid_after(valid["not_valid_after"])
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    out = Certificates(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    out.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    os.chmod(out.key, 0o600)
    return out


@dataclass(frozen=True)
class NodeKey:
    """A SuperNode's authentication key pair (Flower's SuperNode authentication): private key, public key."""

    private: Path
    public: Path


def generate_node_key(directory: Path, name: str) -> NodeKey:
    """Write ``<name>`` (an EC P-384 private key, OpenSSH format, mode 600) and ``<name>.pub`` into ``directory``.

    Flower 1.41's SuperNode reads the private key (``--auth-supernode-private-key``); its public key is
    registered with the SuperLink (``flwr supernode register KEY.pub``), which then admits that node only.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP384R1())
    out = NodeKey(directory / name, directory / f"{name}.pub")
    out.private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()))
    os.chmod(out.private, 0o600)
    out.public.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH))
    return out
