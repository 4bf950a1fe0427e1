#!/usr/bin/env python3
"""An independent JOSE implementation (jwcrypto) for the detached-jws interop tests.

  jose_peer.py verify JWK ENTITY JWS   exit 0 when the detached JWS over ENTITY's bytes
                                       verifies with the public JWK (file paths)
  jose_peer.py sign ALG ENTITY OUTJWK  make a key for ALG, print a detached compact JWS
                                       over ENTITY with {"alg","cty","kid"}; write the
                                       public JWK to OUTJWK
  jose_peer.py sign-kid ALG ENTITY OUTJWK KID
                                       the same with the key's own `kid` KID (in the
                                       JWK and the header), as JOSE signers usually do

RFC 7515 appendix F: a detached payload is put back between the dots to verify, and
taken out after signing.
"""
import json
import sys

from jwcrypto import jwk, jws
from jwcrypto.common import base64url_encode

KEYS = {
    "EdDSA": dict(kty="OKP", crv="Ed25519"),
    "ES256": dict(kty="EC", crv="P-256"),
    "ES384": dict(kty="EC", crv="P-384"),
    "RS256": dict(kty="RSA", size=2048),
    "PS256": dict(kty="RSA", size=2048),
}


def main():
    cmd = sys.argv[1]
    if cmd == "verify":
        key = jwk.JWK.from_json(open(sys.argv[2]).read())
        entity = open(sys.argv[3], "rb").read()
        h, p, s = open(sys.argv[4]).read().strip().split(".")
        assert p == "", "not detached"
        token = jws.JWS()
        token.deserialize(".".join([h, base64url_encode(entity), s]))
        token.verify(key)  # raises on failure
        print("verified", json.loads(token.objects["protected"])["alg"])
    elif cmd in ("sign", "sign-kid"):
        alg, entity, out = sys.argv[2], open(sys.argv[3], "rb").read(), sys.argv[4]
        own = sys.argv[5] if cmd == "sign-kid" else None
        params = dict(KEYS[alg])
        if own:
            params["kid"] = own
        key = jwk.JWK.generate(**params)
        token = jws.JWS(entity)
        token.add_signature(
            key,
            None,
            json.dumps({"alg": alg, "cty": "message/rfc822", "kid": own or key.thumbprint()}),
        )
        h, _, s = token.serialize(compact=True).split(".")
        print(h + ".." + s)
        open(out, "w").write(key.export_public())
    else:
        sys.exit("usage")


if __name__ == "__main__":
    main()
