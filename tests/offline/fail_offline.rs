//! What a compromised connected host (or anyone between the hosts) can change in a
//! request, and what a response can pretend: every case is refused, with nothing
//! signed, nothing written and nothing logged. The attacker here holds everything but
//! the offline host's store: they write any request they like, consistent with
//! itself (its fingerprint recomputed), for the victim's key.

use mailseal::offline::{SigningRequest, SigningResponse};

use super::kit::{self, read, Hosts};

/// `req` altered by `f`, written (with its fingerprint recomputed) to `name`; a
/// changed entity gets the boundary it derives, as a careful forger would give it.
fn altered(h: &Hosts, req: &str, name: &str, f: impl FnOnce(&mut SigningRequest)) -> String {
    let mut r = SigningRequest::parse(&read(req)).expect("parses");
    let (entity, boundary, at) = (r.entity.clone(), r.boundary.clone(), r.signing_time);
    f(&mut r);
    if (r.entity != entity || r.signing_time != at) && r.boundary == boundary {
        r.boundary = boundary_for(&r.entity, r.signing_time);
    }
    let out = h.p(name);
    std::fs::write(&out, r.to_text()).expect("write");
    out
}

fn replace(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    let text = String::from_utf8(bytes.to_vec()).expect("7-bit entity");
    assert!(text.contains(from), "{from} not in the entity");
    text.replacen(from, to, 1).into_bytes()
}

/// `sign` refuses `req` with `code`; no response, and the log is as it was.
fn refused(h: &Hosts, req: &str, code: i32, why: &str) {
    let log = h.path("offline").join("signing.log");
    let before = std::fs::read(&log).unwrap_or_default();
    let resp = h.p("refused.resp");
    let out = h.at(
        "offline",
        &["sign", req, "--out", &resp],
        &kit::confirmation(req),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(stderr.contains(why), "{why} not in: {stderr}");
    assert!(out.stdout.is_empty());
    assert!(!h.path("refused.resp").exists(), "a response was written");
    assert_eq!(
        std::fs::read(&log).unwrap_or_default(),
        before,
        "the log changed"
    );
}

fn smime_request() -> (Hosts, String) {
    let h = kit::smime();
    let plain = h.compose("plain.eml", "req-1", "Pay invoice 77.");
    let req = h.p("good.req");
    h.request("smime", &plain, &req, &[]);
    (h, req)
}

#[test]
fn fail_one_byte_of_the_envelope_changed() {
    let (h, req) = smime_request();
    let bad = altered(&h, &req, "bad.req", |r| {
        r.entity = replace(&r.entity, "invoice-77", "invoice-78")
    });
    refused(&h, &bad, 4, "signed attributes are not those of the entity");
}

#[test]
fn fail_the_to_the_request_shows_is_not_the_entitys() {
    let (h, req) = smime_request();
    let bad = altered(&h, &req, "bad.req", |r| {
        let mut c = r.covers.clone();
        c.to = vec!["mallory@smime.example".into()];
        r.covers = c;
    });
    refused(&h, &bad, 4, "not those of the signed entity");
}

#[test]
fn fail_the_to_changed_in_the_entity_and_the_request() {
    let (h, req) = smime_request();
    let bad = altered(&h, &req, "bad.req", |r| {
        r.entity = replace(
            &r.entity,
            "To: <bob@smime.example>",
            "To: <eve@smime.example>",
        );
        let mut c = r.covers.clone();
        c.to = vec!["eve@smime.example".into()];
        r.covers = c;
    });
    refused(&h, &bad, 4, "signed attributes are not those of the entity");
}

/// What `mailseal::seal` derives (a forger can compute it as well).
fn boundary_for(entity: &[u8], at: time::OffsetDateTime) -> String {
    use sha2::Digest;
    let mut d = sha2::Sha256::new();
    d.update(b"mailseal boundary\0");
    d.update(at.unix_timestamp().to_be_bytes());
    d.update(entity);
    let hex: String = d.finalize()[..24]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}_{}_{}", &hex[..16], &hex[16..32], &hex[32..])
}

#[test]
fn fail_an_x402_amount_changed() {
    let h = kit::smime();
    let env = serde_json::json!({"bindingVersion":"1.0","a2aVersion":"1.0","kind":"request",
        "operation":"message/send","messageId":"pay-1","correlationId":"c-9","sequence":0,
        "final":false,"idempotencyKey":"pay-1",
        "payload":{"message":{"messageId":"m-9","role":"ROLE_USER","parts":[{"text":"Paid retry."}]}},
        "payment":{"kind":"payload","x402Version":2,"object":{"x402Version":2,
            "accepted":{"scheme":"exact","network":"eip155:8453","amount":"1000000",
                "asset":"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
                "payTo":"0x209693Bc6afc0C5328bA36FaF03C514EF312287C"},
            "payload":{"signature":"0x2d6a7588d6acca505cbf0d9a4a227e0c52c6c34008c8e8986a1283259764173608a2ce6496642e377d6da8dbbf5836e9bd15092f9ecab05ded3d6293af148b571c"}}}});
    let json = h.path("pay.json");
    std::fs::write(&json, env.to_string()).expect("write");
    let plain = h.p("pay.eml");
    h.ok(
        "connected",
        &[
            "compose",
            "--from",
            h.from,
            "--to",
            h.to,
            "--in",
            &json.display().to_string(),
            "--out",
            &plain,
        ],
        b"",
    );
    let req = h.p("pay.req");
    h.request("smime", &plain, &req, &[]);
    // The operator is shown the amount and where it goes, from the entity itself.
    let shown = h.at("offline", &["sign", &req, "--out", &h.p("no.resp")], b"n\n");
    let stderr = String::from_utf8_lossy(&shown.stderr);
    assert!(
        stderr.contains("amount (payment.object.accepted.amount): \"1000000\""),
        "{stderr}"
    );
    assert!(
        // Too wide for one 80-column line with its label: on the next, whole.
        stderr.contains(
            "payee (payment.object.accepted.payTo):\n      \"0x209693Bc6afc0C5328bA36FaF03C514EF312287C\""
        ),
        "{stderr}"
    );
    assert_eq!(shown.status.code(), Some(6), "not confirmed: {stderr}");
    let bad = altered(&h, &req, "bad.req", |r| {
        r.entity = replace(&r.entity, "1000000", "9000000")
    });
    refused(&h, &bad, 4, "signed attributes are not those of the entity");
}

#[test]
fn fail_a_boundary_or_a_signer_the_request_does_not_hold_to() {
    let (h, req) = smime_request();
    let bad = altered(&h, &req, "bad1.req", |r| {
        r.boundary = "attacker_chosen".into()
    });
    refused(&h, &bad, 4, "boundary");
    // The victim's key named for a message from someone else.
    let bad = altered(&h, &req, "bad2.req", |r| {
        r.signer_address = "bob@smime.example".into()
    });
    refused(&h, &bad, 4, "signer's address is not the message's From");
    // A fingerprint line copied from another request.
    let other = String::from_utf8(read(&req)).expect("text");
    let line = other.lines().nth(1).expect("fingerprint line").to_string();
    let bad3 = altered(&h, &req, "bad3.req", |r| {
        r.signing_time += time::Duration::seconds(1)
    });
    let forged = String::from_utf8(read(&bad3)).expect("text");
    let forged_line = forged.lines().nth(1).expect("line").to_string();
    std::fs::write(&bad3, forged.replace(&forged_line, &line)).expect("write");
    refused(
        &h,
        &bad3,
        4,
        "Fingerprint line is not the fingerprint of its content",
    );
}

#[test]
fn fail_not_confirmed_signs_nothing() {
    let (h, req) = smime_request();
    // The digest's first characters sign; `y`, another request's digest, too few or
    // too many characters do not.
    let digest = kit::confirmation(&req);
    let mut wrong = digest.clone();
    wrong[0] = if wrong[0] == b'0' { b'1' } else { b'0' };
    let short = [&digest[..7], b"\n"].concat();
    let long = [&digest[..8], b"0\n"].concat();
    for answer in [
        &b"n\n"[..],
        b"\n",
        b"",
        b"yes please\n",
        b"y\n",
        b"yes\n",
        &wrong,
        &short,
        &long,
    ] {
        let out = h.at("offline", &["sign", &req, "--out", &h.p("x.resp")], answer);
        assert_eq!(
            out.status.code(),
            Some(6),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("not confirmed"));
        assert!(!h.path("x.resp").exists());
    }
    assert!(
        !h.path("offline").join("signing.log").exists(),
        "nothing logged"
    );
}

#[test]
fn fail_a_request_for_a_key_the_offline_host_does_not_hold() {
    let (h, req) = smime_request();
    let out = h.at("bob", &["sign", &req, "--yes"], b"");
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn fail_an_openpgp_template_with_a_subpacket_or_time_of_its_own() {
    let h = kit::openpgp();
    let plain = h.compose("plain.eml", "req-pgp", "Approve.");
    let req = h.p("good.req");
    h.request("openpgp", &plain, &req, &[]);
    let trailer = |area: &[u8], pk: u8| {
        let mut t = vec![4u8, 0, pk, 8];
        t.extend_from_slice(&(area.len() as u16).to_be_bytes());
        t.extend_from_slice(area);
        t.extend_from_slice(&[4, 0xff]);
        t.extend_from_slice(&((6 + area.len()) as u32).to_be_bytes());
        t
    };
    // A signature expiration time (subpacket 3) the operator never saw, and a
    // critical notation: each would change what the signature means.
    for (i, extra) in [
        vec![5u8, 3, 0, 0, 0, 1],
        vec![12u8, 0x80 | 20, 0x80, 0, 0, 0, 0, 1, 0, 1, b'x', b'y'],
    ]
    .into_iter()
    .enumerate()
    {
        let bad = altered(&h, &req, &format!("bad{i}.req"), |r| {
            let tbs = r.to_be_signed.clone();
            let len = u16::from_be_bytes([tbs[4], tbs[5]]) as usize;
            let mut area = tbs[6..6 + len].to_vec();
            area.extend_from_slice(&extra);
            r.to_be_signed = trailer(&area, tbs[2]);
        });
        refused(&h, &bad, 3, "offline signing");
    }
    // Another creation time inside the template than the request states.
    let bad = altered(&h, &req, "bad-time.req", |r| {
        r.signing_time += time::Duration::seconds(60)
    });
    refused(&h, &bad, 3, "creation time");
}

#[test]
fn fail_a_jws_header_the_key_does_not_sign_with() {
    use base64::Engine;
    let h = kit::jws("eddsa");
    let plain = h.compose("plain.eml", "req-jws", "Sign.");
    let req = h.p("good.req");
    h.request("jws", &plain, &req, &[]);
    let r = SigningRequest::parse(&read(&req)).expect("parses");
    let header: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&r.to_be_signed)
            .expect("base64url"),
    )
    .expect("json");
    for (i, patch) in [
        serde_json::json!({"alg": "HS256"}),
        serde_json::json!({"cty": "application/json"}),
        serde_json::json!({"crit": ["exp"], "exp": 1}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut forged = header.clone();
        for (k, v) in patch.as_object().expect("object") {
            forged[k] = v.clone();
        }
        let bad = altered(&h, &req, &format!("bad{i}.req"), |r| {
            r.to_be_signed = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(forged.to_string())
                .into_bytes()
        });
        let out = h.at("offline", &["sign", &bad, "--yes"], b"");
        assert_ne!(out.status.code(), Some(0), "{patch}");
        assert!(out.stdout.is_empty());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("protected header"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn fail_a_response_for_another_request_or_signer_or_with_another_signature() {
    let h = kit::smime();
    let p1 = h.compose("one.eml", "req-a", "First.");
    let p2 = h.compose("two.eml", "req-b", "Second.");
    let at = kit::now_text();
    let (req1, resp1, _) = h.round_trip("smime", &p1, &at, "one");
    let (_, resp2, _) = h.round_trip("smime", &p2, &at, "two");
    let assemble = |req: &str, resp: &str| h.at("connected", &["assemble", req, resp], b"");
    // The second response pasted onto the first request.
    let out = assemble(&req1, &resp2);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    // The right request, another signer named.
    let mut r = SigningResponse::parse(&read(&resp1)).expect("parses");
    r.signer = "0".repeat(64);
    std::fs::write(h.path("signer.resp"), r.to_text()).expect("write");
    let out = assemble(&req1, &h.p("signer.resp"));
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the request asks"));
    // The second message's signature under the first request's name.
    let mut r = SigningResponse::parse(&read(&resp1)).expect("parses");
    r.signature = SigningResponse::parse(&read(&resp2))
        .expect("parses")
        .signature;
    std::fs::write(h.path("sig.resp"), r.to_text()).expect("write");
    let out = assemble(&req1, &h.p("sig.resp"));
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    // One bit of the signature flipped.
    let mut r = SigningResponse::parse(&read(&resp1)).expect("parses");
    r.signature[10] ^= 1;
    std::fs::write(h.path("bit.resp"), r.to_text()).expect("write");
    let out = assemble(&req1, &h.p("bit.resp"));
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn fail_malformed_requests_and_responses_never_panic() {
    let (_h, req) = smime_request();
    let text = read(&req);
    let mut inputs: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"-----BEGIN MAILSEAL SIGNING REQUEST-----\n-----END MAILSEAL SIGNING REQUEST-----\n"
            .to_vec(),
        text[..text.len() / 2].to_vec(),
        String::from_utf8_lossy(&text)
            .replace("\"rsaPss\": false", "\"rsaPss\": false, \"extra\": 1")
            .into_bytes(),
        String::from_utf8_lossy(&text)
            .replace("\"profile\": \"smime\"", "\"profile\": \"mls\"")
            .into_bytes(),
        vec![0xff; 100],
    ];
    for i in 0..text.len().min(400) {
        let mut t = text.clone();
        t[i] ^= 0x20;
        inputs.push(t);
    }
    let original = SigningRequest::parse(&text).expect("parses").fingerprint();
    for (i, input) in inputs.into_iter().enumerate() {
        // Refused, or the same request written another way (a `t` for `T` in a time).
        if let Ok(r) = SigningRequest::parse(&input) {
            assert_eq!(
                r.fingerprint(),
                original,
                "input {i} parsed as another request"
            );
        }
        assert!(SigningResponse::parse(&input).is_err());
    }
}

#[test]
fn fail_a_v6_openpgp_key_is_refused_with_its_reason() {
    let h = Hosts::empty("alice@pgp.example", "bob@pgp.example");
    let cert = h.p("a6.asc");
    h.ok(
        "offline",
        &[
            "key",
            "generate",
            "--kind",
            "openpgp",
            "--profile",
            "rfc9580",
            "--email",
            h.from,
            "--cert-out",
            &cert,
        ],
        b"",
    );
    h.ok("connected", &["key", "import", &cert], b"");
    let plain = h.compose("plain.eml", "req-v6", "v6.");
    let out = h.at(
        "connected",
        &["sign-request", "--profile", "openpgp", &plain],
        b"",
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("takes v4 OpenPGP keys"));
    assert!(out.stdout.is_empty());
}
