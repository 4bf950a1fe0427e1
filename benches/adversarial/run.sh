#!/bin/bash
# Time and peak memory of `mailseal open` refusing each adversarial input of
# make_inputs.py, next to opening a benign signed-and-encrypted message of the same
# size (issue #17). Whole processes (`/usr/bin/time`), release build, one run each.
# Then MLS Welcomes (issue #58) of the attacker's own members, made by
# benches/adversarial_welcome.rs: the largest Bob takes (4 MiB) and one at the member
# limit (2,000), refused by Bob's default policy (no inviter) and by a Bob who takes
# invitations from anyone who authenticates.
#
#   benches/adversarial/run.sh [SIZE_MIB...]     (default: 1 4)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q
BIN=$PWD/target/release/mailseal
WELCOME=$(cargo build --release -q --bench adversarial_welcome --message-format=json |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "adversarial_welcome":
        print(m["executable"])')
FIX=$PWD/keys-fixtures/rfc9216
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
ms() { "$BIN" "$@"; }

# Alice signs and encrypts to Bob; Bob's store also has an OpenPGP key (the PKESK
# input tries it).
ms key import --store "$W/alice" "$FIX/alice.sign.crt" "$FIX/alice.sign.key" "$FIX/alice.encrypt.crt" \
  "$FIX/bob.encrypt.crt" >/dev/null 2>&1
ms key import --store "$W/bob" "$FIX/bob.encrypt.crt" "$FIX/bob.encrypt.key" "$FIX/bob.sign.crt" \
  "$FIX/bob.sign.key" "$FIX/alice.sign.crt" >/dev/null 2>&1
ms key import --store "$W/bob" --trusted "$FIX/ca.rsa.crt" >/dev/null 2>&1
ms key generate --store "$W/bob" --kind openpgp --email bob@smime.example >/dev/null 2>&1

# One table row: `open --stateless` of FILE by STORE.
row() {
  local name=$1 f=$2 store=$3 bytes code secs kb
  bytes=$(stat -c %s "$f")
  set +e
  /usr/bin/time -f '%e %M' -o "$W/t" "$BIN" open --stateless --store "$store" --in "$f" >/dev/null 2>"$W/err"
  code=$?
  set -e
  read -r secs kb < <(tail -1 "$W/t")
  python3 - "$name" "$bytes" "$code" "$secs" "$kb" <<'PY'
import sys
name, b, code, secs, kb = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
mib = b / 1048576
print(f"| {name} | {mib:.1f} MiB | {code} | {secs:.2f} | {secs / mib:.3f} | {kb / 1024:.0f} MiB | {kb / 1024 / mib:.1f} |")
PY
}

printf '| input | size | exit | seconds | s/MiB | peak RSS | RSS/MiB |\n| --- | --- | --- | --- | --- | --- | --- |\n'
for size in "${@:-1 4}"; do
  for s in $size; do
    D="$W/in-$s"
    python3 benches/adversarial/make_inputs.py "$D" "$s" "$FIX/alice.sign.crt"
    python3 - "$s" > "$W/env.json" <<'PY'
import json, sys
size = int(sys.argv[1]) * 1024 * 1024
print(json.dumps({"bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
  "operation": "message/send", "messageId": "benign-1", "correlationId": "benign-c",
  "sequence": 0, "final": False, "idempotencyKey": "benign-e",
  "createdAt": "2026-12-01T12:00:00Z", "expiresAt": "2036-12-01T12:00:00Z",
  "payload": {"message": {"messageId": "m", "role": "ROLE_USER",
    "parts": [{"text": "x" * (size * 3 // 4)}]}}}))
PY
    ms compose --from alice@smime.example --to bob@smime.example --in "$W/env.json" --out "$W/plain.eml"
    ms seal --store "$W/alice" --profile smime --in "$W/plain.eml" --out "$D/benign.eml"
    for f in "$D"/benign.eml "$D"/[!b]*.eml "$D"/ber-*.eml; do
      row "$(basename "$f" .eml)" "$f" "$W/bob"
    done
  done
done

# MLS: Bob's MLS identity (certified by his S/MIME key) and the KeyPackage he publishes.
ms key generate --store "$W/bob" --kind mls --email bob@smime.example >/dev/null 2>&1
ms mls --store "$W/bob" keypackage --email bob@smime.example --out "$W/kp.eml"
cp -r "$W/bob" "$W/bob-any"
ms mls --store "$W/bob-any" inviters --allow '*' >/dev/null
"$WELCOME" "$W/kp.eml" "$W/welcome-4mib.eml" bytes:4194304 >&2
"$WELCOME" "$W/kp.eml" "$W/welcome-2000.eml" members:2000 >&2
for w in welcome-4mib welcome-2000; do
  row "$w (no inviter)" "$W/$w.eml" "$W/bob"
  row "$w (inviters *)" "$W/$w.eml" "$W/bob-any"
done
