#!/usr/bin/env bash
# Whole-process cost of a large message (issue #16): `mailseal seal` and `mailseal open`
# of a 12 MiB text payload under S/MIME sign + encrypt with P-256 identities, measured
# with /usr/bin/time (CPU = user + sys, peak RSS), against the message's size.
#
#   benches/large_process.sh [path/to/mailseal] [runs]
#
# The stores are made fresh and left to settle for 3 s (the key store trusts its
# caches only for files older than 2 s). Nothing here is a test: it prints figures.
set -euo pipefail
BIN=${1:-target/release/mailseal}
RUNS=${2:-3}
BIN=$(realpath "$BIN")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# KEEP=1 leaves the stores and messages for a profiler.
if [ -n "${KEEP:-}" ]; then trap - EXIT; echo "work: $WORK" >&2; fi
cd "$WORK"

"$BIN" --store alice key generate --kind smime --email alice@p256.example --algorithm p256 --cert-out alice.pem 2>/dev/null
"$BIN" --store bob key generate --kind smime --email bob@p256.example --algorithm p256 --cert-out bob.pem 2>/dev/null
"$BIN" --store alice key import bob.pem >/dev/null
"$BIN" --store bob key import alice.pem >/dev/null

# A 12 MiB text part: printable ASCII, JSON-safe, in one A2A text part.
python3 - <<'PY'
import json, random, string
random.seed(16)
alphabet = string.ascii_letters + string.digits + " .,;:-"
text = "".join(random.choice(alphabet) for _ in range(12 << 20))
env = {"bindingVersion": "1.0", "a2aVersion": "1.0", "kind": "request",
       "operation": "message/send", "messageId": "large-1", "correlationId": "large-c1",
       "idempotencyKey": "large-e1", "sequence": 0, "final": False,
       "payload": {"message": {"messageId": "m-large-1", "role": "ROLE_USER",
                               "parts": [{"text": text}]}}}
open("envelope.json", "w").write(json.dumps(env))
PY
"$BIN" compose --from alice@p256.example --to bob@p256.example --in envelope.json --out plain.eml
sleep 3

measure() { # label, command...
    local label=$1; shift
    /usr/bin/time -f "%U %S %M" -o time.txt "$@" >/dev/null
    read -r user sys rss < time.txt
    printf '%s\n' "$label $user $sys $rss"
}

for i in $(seq 1 "$RUNS"); do
    measure seal "$BIN" --store alice seal --profile smime --in plain.eml --out "sealed.eml"
    size=$(stat -c %s sealed.eml)
    rm -rf bob/state.db* 2>/dev/null || true
    measure open "$BIN" --store bob open --stateless --in sealed.eml --out opened.json
    measure open-state "$BIN" --store bob open --in sealed.eml --out opened.json
    rm -f bob/*.db-wal 2>/dev/null || true
    echo "message $size"
done | awk '
    /^message/ { msg = $2; next }
    { n++; key[n] = $1; cpu[n] = $2 + $3; rss[n] = $4 / 1024 }
    END {
        for (i = 1; i <= n; i++)
            printf "%-10s cpu %.3f s  peak RSS %.1f MiB  (%.2fx the message)\n",
                key[i], cpu[i], rss[i], rss[i] * 1048576 / msg
        printf "sealed message: %.1f MB (%.2f MiB)\n", msg / 1e6, msg / 1048576 }'
