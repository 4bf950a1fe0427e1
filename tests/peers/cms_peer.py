#!/usr/bin/env python3
"""An independent CMS AuthEnvelopedData peer for the algorithms OpenSSL 3.0 cannot write
or read: X25519 key agreement (RFC 8418), ChaCha20-Poly1305 (RFC 8103) and RFC 9709
HKDF-derived content keys. The DER is built and read here by hand; the primitives are
pyca/cryptography's. It shares no code with mailseal.

  cms_peer.py encrypt --cipher C [--hkdf [--strip-hkdf]] [--ukm] [--auth-attr] --recip CERT... IN OUT
  cms_peer.py decrypt --cert CERT --key KEY IN OUT

C is aes-256-gcm or chacha20-poly1305. RSA recipients get RSAES-OAEP-SHA256 key
transport, X25519 recipients dhSinglePass-stdDH-hkdf-sha256 with AES-256 key wrap.
"""

import argparse
import os
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa, x25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.keywrap import aes_key_unwrap, aes_key_wrap

AUTH_ENVELOPED = "1.2.840.113549.1.9.16.1.23"
DATA = "1.2.840.113549.1.7.1"
AES256_GCM = "2.16.840.1.101.3.4.1.46"
CHACHA = "1.2.840.113549.1.9.16.3.18"
CEK_HKDF = "1.2.840.113549.1.9.16.3.31"
RSAES_OAEP = "1.2.840.113549.1.1.7"
MGF1 = "1.2.840.113549.1.1.8"
SHA256 = "2.16.840.1.101.3.4.2.1"
X25519 = "1.3.101.110"
DH_HKDF_SHA256 = "1.2.840.113549.1.9.16.3.19"
DH_X963_SHA256 = "1.3.132.1.11.1"
AES256_WRAP = "2.16.840.1.101.3.4.1.45"
TEST_ATTR = "1.3.6.1.4.1.99999.1"


# --- DER writing -------------------------------------------------------------------

def tlv(tag, body):
    n = len(body)
    if n < 0x80:
        length = bytes([n])
    else:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(raw)]) + raw
    return bytes([tag]) + length + body


def seq(*items):
    return tlv(0x30, b"".join(items))


def set_of(*items):
    return tlv(0x31, b"".join(sorted(items)))


def octets(b):
    return tlv(0x04, b)


def integer(n):
    raw = n.to_bytes(n.bit_length() // 8 + 1, "big")
    return tlv(0x02, raw)


def oid(dotted):
    arcs = [int(a) for a in dotted.split(".")]
    out = bytes([40 * arcs[0] + arcs[1]])
    for arc in arcs[2:]:
        chunk = [arc & 0x7F]
        arc >>= 7
        while arc:
            chunk.append(0x80 | (arc & 0x7F))
            arc >>= 7
        out += bytes(reversed(chunk))
    return tlv(0x06, out)


def issuer_and_serial(cert):
    return seq(cert.issuer.public_bytes(), integer(cert.serial_number))


def shared_info(ukm):
    parts = [seq(oid(AES256_WRAP))]
    if ukm is not None:
        parts.append(tlv(0xA0, octets(ukm)))
    parts.append(tlv(0xA2, octets((256).to_bytes(4, "big"))))
    return seq(*parts)


def x963_sha256(z, info, length):
    out, counter = b"", 1
    while len(out) < length:
        h = hashes.Hash(hashes.SHA256())
        h.update(z + counter.to_bytes(4, "big") + info)
        out += h.finalize()
        counter += 1
    return out[:length]


def kari_kek(scheme, z, ukm):
    info = shared_info(ukm)
    if scheme == DH_HKDF_SHA256:
        return HKDF(hashes.SHA256(), 32, ukm or b"", info).derive(z)
    if scheme == DH_X963_SHA256:
        return x963_sha256(z, info, 32)
    raise SystemExit(f"unsupported key agreement {scheme}")


def recipient_info(cert, cek, ukm):
    key = cert.public_key()
    if isinstance(key, rsa.RSAPublicKey):
        wrapped = key.encrypt(
            cek,
            padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None),
        )
        alg = seq(
            oid(RSAES_OAEP),
            seq(tlv(0xA0, seq(oid(SHA256))), tlv(0xA1, seq(oid(MGF1), seq(oid(SHA256))))),
        )
        return seq(integer(0), issuer_and_serial(cert), alg, octets(wrapped))
    if isinstance(key, x25519.X25519PublicKey):
        eph = x25519.X25519PrivateKey.generate()
        z = eph.exchange(key)
        kek = kari_kek(DH_HKDF_SHA256, z, ukm)
        eph_pub = eph.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        originator = tlv(0xA0, tlv(0xA1, seq(oid(X25519)) + tlv(0x03, b"\x00" + eph_pub)))
        parts = [integer(3), originator]
        if ukm is not None:
            parts.append(tlv(0xA1, octets(ukm)))
        parts.append(seq(oid(DH_HKDF_SHA256), seq(oid(AES256_WRAP))))
        parts.append(seq(seq(issuer_and_serial(cert), octets(aes_key_wrap(kek, cek)))))
        return tlv(0xA1, b"".join(parts))
    raise SystemExit("recipient key must be RSA or X25519")


def encrypt(args):
    plaintext = open(args.input, "rb").read()
    certs = [x509.load_pem_x509_certificate(open(p, "rb").read()) for p in args.recip]
    cek = os.urandom(32)
    nonce = os.urandom(12)
    if args.cipher == "aes-256-gcm":
        inner = seq(oid(AES256_GCM), seq(octets(nonce), integer(16)))
        aead_class = AESGCM
    else:
        inner = seq(oid(CHACHA), octets(nonce))
        aead_class = ChaCha20Poly1305
    content_key, content_alg = cek, inner
    if args.hkdf:
        content_key = HKDF(hashes.SHA256(), 32, b"The Cryptographic Message Syntax", inner).derive(cek)
        # --strip-hkdf models the attack RFC 9709 defends against: the identifier is
        # rewritten to the bare algorithm, so a reader uses the CEK itself and fails.
        content_alg = inner if args.strip_hkdf else seq(oid(CEK_HKDF), inner)
    ukm = os.urandom(16) if args.ukm else None
    attrs = b""
    if args.auth_attr:
        attrs = seq(oid(TEST_ATTR), set_of(tlv(0x0C, b"hello")))
    aad = tlv(0x31, attrs) if attrs else b""
    sealed = aead_class(content_key).encrypt(nonce, plaintext, aad)
    ciphertext, mac = sealed[:-16], sealed[-16:]
    eci = seq(oid(DATA), content_alg, tlv(0x80, ciphertext))
    body = [integer(0), set_of(*[recipient_info(c, cek, ukm) for c in certs]), eci]
    if attrs:
        body.append(tlv(0xA1, attrs))
    body.append(octets(mac))
    info = seq(oid(AUTH_ENVELOPED), tlv(0xA0, seq(*body)))
    open(args.output, "wb").write(info)


# --- DER reading (definite lengths only, which is all mailseal writes) -------------

def read(b, i):
    tag = b[i]
    n = b[i + 1]
    j = i + 2
    if n & 0x80:
        count = n & 0x7F
        n = int.from_bytes(b[j : j + count], "big")
        j += count
    return tag, b[j : j + n], j + n


def children(body):
    out, i = [], 0
    while i < len(body):
        tag, content, i = read(body, i)
        out.append((tag, content))
    return out


def oid_text(content):
    arcs = [content[0] // 40, content[0] % 40]
    value = 0
    for byte in content[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    return ".".join(map(str, arcs))


def decrypt(args):
    cert = x509.load_pem_x509_certificate(open(args.cert, "rb").read())
    key = serialization.load_pem_private_key(open(args.key, "rb").read(), None)
    ours = issuer_and_serial(cert)
    der = open(args.input, "rb").read()
    _, info, _ = read(der, 0)
    (t1, ctype), (t2, explicit) = children(info)
    assert oid_text(ctype) == AUTH_ENVELOPED, "not AuthEnvelopedData"
    _, aed, _ = read(explicit, 0)
    fields = children(aed)
    recipients, eci = fields[1][1], fields[2][1]
    attrs = [c for t, c in fields[3:] if t == 0xA1]
    mac = fields[-1][1]
    cek = None
    for tag, ri in children(recipients):
        if tag != 0xA1:
            continue
        parts = children(ri)
        originator = children(children(parts[1][1])[0][1])
        eph = x25519.X25519PublicKey.from_public_bytes(originator[1][1][1:])
        assert oid_text(children(originator[0][1])[0][1]) == X25519, "originator is not X25519"
        rest = parts[2:]
        ukm = None
        if rest[0][0] == 0xA1:
            ukm = children(rest[0][1])[0][1]
            rest = rest[1:]
        scheme = oid_text(children(rest[0][1])[0][1])
        for _, rek in children(rest[1][1]):
            rid, wrapped = children(rek)
            if tlv(0x30, rid[1]) == ours:
                kek = kari_kek(scheme, key.exchange(eph), ukm)
                cek = aes_key_unwrap(kek, wrapped[1])
    if cek is None:
        raise SystemExit("not a recipient")
    eci_parts = children(eci)
    alg = children(eci_parts[1][1])
    alg_oid = oid_text(alg[0][1])
    ciphertext = eci_parts[2][1]
    if alg_oid == AES256_GCM:
        nonce = children(alg[1][1])[0][1]
        aead = AESGCM(cek)
    elif alg_oid == CHACHA:
        nonce = alg[1][1]
        aead = ChaCha20Poly1305(cek)
    else:
        raise SystemExit(f"unsupported content encryption {alg_oid}")
    aad = tlv(0x31, attrs[0]) if attrs else b""
    open(args.output, "wb").write(aead.decrypt(nonce, ciphertext + mac, aad))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("encrypt")
    e.add_argument("--cipher", choices=["aes-256-gcm", "chacha20-poly1305"], required=True)
    e.add_argument("--hkdf", action="store_true")
    e.add_argument("--strip-hkdf", action="store_true")
    e.add_argument("--ukm", action="store_true")
    e.add_argument("--auth-attr", action="store_true")
    e.add_argument("--recip", action="append", required=True)
    e.add_argument("input")
    e.add_argument("output")
    d = sub.add_parser("decrypt")
    d.add_argument("--cert", required=True)
    d.add_argument("--key", required=True)
    d.add_argument("input")
    d.add_argument("output")
    args = p.parse_args()
    encrypt(args) if args.cmd == "encrypt" else decrypt(args)


if __name__ == "__main__":
    sys.exit(main())
