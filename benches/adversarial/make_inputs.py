#!/usr/bin/env python3
"""Adversarial inputs for `mailseal open`, each about SIZE MiB (issue #17: bounded work
before authentication). Every one is refused; BENCHMARKS.md compares the time and peak
memory of refusing it with opening a benign signed message of the same size.

  make_inputs.py OUT_DIR SIZE_MIB ALICE_SIGN_CRT

The DER is written by hand (a few helpers below): the point is input no encoder would
produce. ALICE_SIGN_CRT names the signer the forged SignedData claims (its issuer and
serial), so the victim looks the signer up as it would for real mail.
"""

import base64
import os
import sys

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

OUT, SIZE, ALICE = sys.argv[1], int(sys.argv[2]), sys.argv[3]
TARGET = SIZE * 1024 * 1024
os.makedirs(OUT, exist_ok=True)

HEAD = (
    "From: <alice@smime.example>\r\nTo: <bob@smime.example>\r\n"
    "Date: Tue, 01 Dec 2026 12:00:00 +0000\r\nMessage-ID: <adv@smime.example>\r\n"
    "MIME-Version: 1.0\r\nMail-A2A-Binding: 1.0\r\n"
)


def length(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def tlv(tag, content):
    return bytes([tag]) + length(len(content)) + content


def seq(*items):
    return tlv(0x30, b"".join(items))


def set_of(*items):
    return tlv(0x31, b"".join(items))


def oid(dotted):
    parts = [int(p) for p in dotted.split(".")]
    body = bytes([40 * parts[0] + parts[1]])
    for p in parts[2:]:
        chunk = [p & 0x7F]
        p >>= 7
        while p:
            chunk.append(0x80 | (p & 0x7F))
            p >>= 7
        body += bytes(reversed(chunk))
    return tlv(0x06, body)


def integer(n):
    b = n.to_bytes((n.bit_length() + 8) // 8 or 1, "big")
    return tlv(0x02, b)


def octets(b):
    return tlv(0x04, b)


def explicit(n, content):
    return tlv(0xA0 + n, content)


def b64_lines(raw):
    text = base64.b64encode(raw).decode()
    return "\r\n".join(text[i : i + 76] for i in range(0, len(text), 76)) + "\r\n"


def write(name, text):
    data = text.encode() if isinstance(text, str) else text
    with open(os.path.join(OUT, name + ".eml"), "wb") as f:
        f.write(data)


def pkcs7_mime(smime_type, der):
    return (
        HEAD
        + f'Content-Type: application/pkcs7-mime; smime-type={smime_type}; name="smime.p7m"\r\n'
        + "Content-Transfer-Encoding: base64\r\n\r\n"
        + b64_lines(der)
    )


AUTH_ENVELOPED = "1.2.840.113549.1.9.16.1.23"
DATA = "1.2.840.113549.1.7.1"
SIGNED = "1.2.840.113549.1.7.2"
AES256_GCM = "2.16.840.1.101.3.4.1.46"
RSA = "1.2.840.113549.1.1.1"
SHA256 = "2.16.840.1.101.3.4.2.1"
raw_size = TARGET * 3 // 4  # base64 grows it back to about TARGET

# 1. One header field after another.
lines = []
n = 0
while n < TARGET:
    line = f"X-Filler-{len(lines):07d}: {'v' * 40}\r\n"
    lines.append(line)
    n += len(line)
write("headers", HEAD + "".join(lines) + "Content-Type: text/plain\r\n\r\nx\r\n")

# 2. One Content-Type with a hundred thousand parameters (folded).
params = []
n = 0
while n < TARGET:
    p = f";\r\n p{len(params)}=v{len(params)}"
    params.append(p)
    n += len(p)
write("parameters", HEAD + "Content-Type: multipart/mixed; boundary=b" + "".join(params) + "\r\n\r\n--b--\r\n")

# 3. Multipart nested as deep as the size allows.
open_parts = []
n = 0
depth = 0
while n + 12 * depth < TARGET:
    part = f"--b{depth}\r\nContent-Type: multipart/mixed; boundary=b{depth + 1}\r\n\r\n"
    open_parts.append(part)
    n += len(part)
    depth += 1
closing = "".join(f"--b{d}--\r\n" for d in reversed(range(depth + 1)))
write("nesting", HEAD + "Content-Type: multipart/mixed; boundary=b0\r\n\r\n" + "".join(open_parts) + closing)

# 4. BER: an indefinite-length constructed OCTET STRING nested as deep as the size
#    allows, as the encrypted content.
depth = raw_size // 4
nested = b"\x24\x80" * depth + b"\x04\x01x" + b"\x00\x00" * depth
def auth_enveloped(recipients, content_octets_ber):
    alg = seq(oid(AES256_GCM), seq(octets(b"\x00" * 12)))
    # authEncryptedContentInfo with a BER [0] constructed, indefinite content.
    eci = b"\x30\x80" + oid(DATA) + alg + b"\xa0\x80" + content_octets_ber + b"\x00\x00" + b"\x00\x00"
    body = integer(0) + set_of(*recipients) + eci + octets(b"\x00" * 16)
    return b"\x30\x80" + oid(AUTH_ENVELOPED) + b"\xa0\x80" + b"\x30\x80" + body + b"\x00\x00" * 3
ktri = seq(integer(0), seq(seq(set_of(seq(oid("2.5.4.3"), tlv(0x0C, b"x")))), integer(7)), seq(oid(RSA), tlv(0x05, b"")), octets(os.urandom(256)))
write("ber-nesting", pkcs7_mime("authEnveloped-data", auth_enveloped([ktri], nested)))

# 5. BER: the encrypted content in a million one-byte chunks.
chunks = b"\x04\x01x" * (raw_size // 3)
write("ber-chunks", pkcs7_mime("authEnveloped-data", auth_enveloped([ktri], b"\x24\x80" + chunks + b"\x00\x00")))

# 6. Tens of thousands of RecipientInfos, none for us.
def random_ktri(i):
    return seq(
        integer(0),
        seq(seq(set_of(seq(oid("2.5.4.3"), tlv(0x0C, f"issuer {i}".encode())))), integer(i + 1)),
        seq(oid(RSA), tlv(0x05, b"")),
        octets(os.urandom(256)),
    )
one = len(random_ktri(0))
many = [random_ktri(i) for i in range(raw_size // one)]
write("recipients", pkcs7_mime("authEnveloped-data", auth_enveloped(many, b"\x04\x10" + b"\x00" * 16)))

# 7. A SignedData carrying thousands of certificates, its signer claiming Alice.
alice = x509.load_pem_x509_certificate(open(ALICE, "rb").read())
alice_der = alice.public_bytes(Encoding.DER)
issuer = alice.issuer.public_bytes()
certs = [alice_der] * (raw_size // len(alice_der))
signer = seq(
    integer(1),
    seq(issuer, integer(alice.serial_number)),
    seq(oid(SHA256)),
    seq(oid(RSA), tlv(0x05, b"")),
    octets(os.urandom(256)),
)
signed_data = seq(
    integer(1),
    set_of(seq(oid(SHA256))),
    seq(oid(DATA)),
    tlv(0xA0, b"".join(certs)),
    set_of(signer),
)
sig_der = seq(oid(SIGNED), explicit(0, signed_data))
entity = "Content-Type: application/a2a+json\r\n\r\n{}\r\n"
write(
    "certificates",
    HEAD
    + 'Content-Type: multipart/signed; protocol="application/pkcs7-signature"; micalg=sha-256; boundary="s"\r\n\r\n'
    + "--s\r\n" + entity + "\r\n--s\r\n"
    + "Content-Type: application/pkcs7-signature\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    + b64_lines(sig_der)
    + "--s--\r\n",
)

# 8. OpenPGP: tens of thousands of anonymous (wildcard key ID) ECDH PKESKs, then an
#    encrypted packet that is never reached.
def packet(tag, body):
    n = len(body)
    if n < 192:
        head = bytes([0xC0 | tag, n])
    else:
        head = bytes([0xC0 | tag, 0xFF]) + n.to_bytes(4, "big")
    return head + body
point = b"\x40" + os.urandom(32)
pkesk = packet(1, b"\x03" + b"\x00" * 8 + b"\x12" + (263).to_bytes(2, "big") + point + bytes([40]) + os.urandom(40))
pgp = pkesk * (raw_size // len(pkesk)) + packet(18, b"\x01" + os.urandom(64))
armored = "-----BEGIN PGP MESSAGE-----\r\n\r\n" + b64_lines(pgp) + "-----END PGP MESSAGE-----\r\n"
write(
    "pkesks",
    HEAD
    + 'Content-Type: multipart/encrypted; protocol="application/pgp-encrypted"; boundary="e"\r\n\r\n'
    + "--e\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n\r\n"
    + "--e\r\nContent-Type: application/octet-stream\r\n\r\n" + armored + "\r\n--e--\r\n",
)

# 9. The machine part as one base64 line of the whole size.
line = base64.b64encode(b"{" + b" " * (raw_size - 2) + b"}").decode()
write(
    "long-line",
    HEAD
    + "Content-Type: application/a2a+json\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    + line + "\r\n",
)

# 10-13. Plain JSON (issue #58): an unsigned machine part whose payload metadata is
# the densest JSON of one shape, read whole before the message is refused as unsigned
# (the same reader reads what S/MIME, OpenPGP, JWS and MLS unwrap).
def json_message(inner):
    env = (
        '{"bindingVersion":"1.0","a2aVersion":"1.0","kind":"request","operation":"message/send",'
        '"messageId":"m1","correlationId":"c1","sequence":0,"final":false,"idempotencyKey":"i1",'
        '"payload":{"message":{"messageId":"a1","role":"ROLE_USER","parts":[{"text":"hi"}],'
        '"metadata":' + inner + "}}}"
    )
    return HEAD + "Content-Type: application/a2a+json\r\n\r\n" + env + "\r\n"


for name, item in [("json-zeros", "0"), ("json-nested", "[[0]]"), ("json-objects", '{"a":0}')]:
    write(name, json_message('{"x":[' + ",".join([item] * (TARGET // (len(item) + 1))) + "]}"))
write(
    "json-keys",
    json_message("{" + ",".join(f'"k{i:07}":0' for i in range(TARGET // 12)) + "}"),
)

# 14. OpenPGP (issue #58): a compressed data packet of zeros (a literal data packet
#     inflating to about a thousand times the message), unencrypted: it is inflated
#     before anything says it is not encrypted, and refused at its budget
#     (`Limits::inflation_budget`: four times the message, at least 8 MiB).
import zlib

deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
# Literal data, old format, length to the end of the container; binary, no name.
parts = [deflate.compress(b"\xafb\x00\x00\x00\x00\x00")]
done = len(parts[0])
zeros = b"\x00" * (16 << 20)
while done < raw_size - 4096:
    out = deflate.compress(zeros)
    parts.append(out)
    done += len(out)
parts.append(deflate.flush())
deflated = b"".join(parts)
bomb = bytes([0xC8, 0xFF]) + (len(deflated) + 1).to_bytes(4, "big") + b"\x01" + deflated
armored = "-----BEGIN PGP MESSAGE-----\r\n\r\n" + b64_lines(bomb) + "-----END PGP MESSAGE-----\r\n"
write(
    "pgp-bomb",
    HEAD
    + 'Content-Type: multipart/encrypted; protocol="application/pgp-encrypted"; boundary="e"\r\n\r\n'
    + "--e\r\nContent-Type: application/pgp-encrypted\r\n\r\nVersion: 1\r\n\r\n"
    + "--e\r\nContent-Type: application/octet-stream\r\n\r\n" + armored + "\r\n--e--\r\n",
)
