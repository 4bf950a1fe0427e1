//! Trimmed evidence (THREATS.md), issue 55 finding 2, for Agent Card signatures: a
//! card signer's certificate (x5c) is trusted and revoked by the same rules as a mail
//! signer's. Bob's card is signed with a certificate for his address that a corporate
//! sub-CA issued; x5c carries that certificate alone. The victim trusts the root and
//! imported the sub-CA: the signer is anchored through the store's own intermediate,
//! and once the victim holds the sub-CA's CRL revoking it, it vouches for nothing.
//! One store per party; the certificates and the CRL are made by the real `openssl ca`.

use std::path::{Path, PathBuf};

use crate::common;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use common::mls::{mailseal, ok};
use common::openssl;
use serde_json::{json, Value};

const BOB: &str = "bob@card.example";

/// An `openssl ca` database in `dir` issuing `name.crt` (PKCS#8 P-256 key `name.key`)
/// with the extension lines `ext`, signed by `issuer` (`None`: self-signed).
fn issue(dir: &Path, name: &str, issuer: Option<&str>, ext: &str) {
    if !dir.join("ca.cnf").exists() {
        std::fs::write(
            dir.join("ca.cnf"),
            "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\nnew_certs_dir = .\n\
             serial = serial\ndefault_md = sha256\npolicy = p\nunique_subject = no\n\
             copy_extensions = none\ndefault_crl_days = 30\n\
             crl_extensions = crl_ext\n[p]\ncommonName = supplied\n\
             [crl_ext]\nauthorityKeyIdentifier = keyid:always\n",
        )
        .unwrap();
        std::fs::write(dir.join("index.txt"), "").unwrap();
        std::fs::write(dir.join("serial"), "1000\n").unwrap();
    }
    let (key, csr, crt, extfile) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
        format!("{name}.ext"),
    );
    openssl(
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &key,
        ],
        dir,
    );
    let subj = format!("/CN={name}");
    openssl(
        &["req", "-new", "-key", &key, "-subj", &subj, "-out", &csr],
        dir,
    );
    std::fs::write(dir.join(&extfile), ext).unwrap();
    let mut args = vec![
        "ca", "-batch", "-config", "ca.cnf", "-notext", "-in", &csr, "-out", &crt, "-days", "3650",
        "-extfile", &extfile,
    ];
    let (ic, ik);
    match issuer {
        None => args.extend(["-selfsign", "-keyfile", &key]),
        Some(i) => {
            ic = format!("{i}.crt");
            ik = format!("{i}.key");
            args.extend(["-cert", &ic, "-keyfile", &ik]);
        }
    }
    openssl(&args, dir);
}

const CA_EXT: &str = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n";

/// Signs `card` with ES256 under `header` as an outside JWS implementation would.
fn sign(card: &mut Value, header: Value, key: &openssl::pkey::PKey<openssl::pkey::Private>) {
    let mut payload = card.clone();
    payload.as_object_mut().unwrap().remove("signatures");
    let protected = URL_SAFE_NO_PAD.encode(header.to_string());
    let input = format!(
        "{protected}.{}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap())
    );
    let mut s = openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), key).unwrap();
    let der = s.sign_oneshot_to_vec(input.as_bytes()).unwrap();
    let sig = openssl::ecdsa::EcdsaSig::from_der(&der).unwrap();
    let raw = [
        sig.r().to_vec_padded(32).unwrap(),
        sig.s().to_vec_padded(32).unwrap(),
    ]
    .concat();
    card["signatures"] =
        json!([{"protected": protected, "signature": URL_SAFE_NO_PAD.encode(raw)}]);
}

/// `key import --agent-card FILE --require-signature` on `store`: (exit code, stderr).
fn import_card(store: &Path, file: &Path) -> (i32, String) {
    let out = mailseal(
        store,
        &[
            "key",
            "import",
            "--agent-card",
            file.to_str().unwrap(),
            "--require-signature",
        ],
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A victim store trusting the root, with the sub-CA imported (and `crl`, if any).
fn victim(dir: &Path, name: &str, pki: &Path, crl: Option<&Path>) -> PathBuf {
    let store = dir.join(name);
    ok(
        &store,
        &[
            "key",
            "import",
            "--trusted",
            pki.join("root.crt").to_str().unwrap(),
        ],
    );
    ok(
        &store,
        &["key", "import", pki.join("corp-ca.crt").to_str().unwrap()],
    );
    if let Some(crl) = crl {
        ok(&store, &["key", "import", crl.to_str().unwrap()]);
    }
    store
}

#[test]
fn fail_trimmed_evidence_a_card_signer_its_sub_ca_revoked() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let pki = dir.join("pki");
    std::fs::create_dir_all(&pki).unwrap();
    issue(&pki, "root", None, CA_EXT);
    issue(&pki, "corp-ca", Some("root"), CA_EXT);
    issue(
        &pki,
        "bob-signer",
        Some("corp-ca"),
        &format!(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage=emailProtection\nsubjectAltName=email:{BOB}\n"
        ),
    );
    let signer_der = {
        let pem = std::fs::read(pki.join("bob-signer.crt")).unwrap();
        openssl::x509::X509::from_pem(&pem)
            .unwrap()
            .to_der()
            .unwrap()
    };
    let signer_key = openssl::pkey::PKey::private_key_from_pem(
        &std::fs::read(pki.join("bob-signer.key")).unwrap(),
    )
    .unwrap();

    // Bob's store and card, signed with the sub-CA's certificate alone in x5c.
    let bob = dir.join("bob");
    for kind in ["smime", "openpgp"] {
        ok(&bob, &["key", "generate", "--kind", kind, "--email", BOB]);
    }
    let out = dir.join("card.json");
    ok(
        &bob,
        &[
            "card",
            "--email",
            BOB,
            "--no-mls",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let mut card: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    sign(
        &mut card,
        json!({"alg": "ES256", "x5c": [STANDARD.encode(&signer_der)]}),
        &signer_key,
    );
    let signed = dir.join("signed.json");
    std::fs::write(&signed, serde_json::to_vec_pretty(&card).unwrap()).unwrap();

    // Anchored through the victim's own sub-CA.
    let (code, err) = import_card(&victim(dir, "victim1", &pki, None), &signed);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("made with a certificate under a trusted CA"),
        "{err}"
    );

    // The sub-CA revokes the signer: a victim holding its CRL trusts no signature.
    openssl(
        &[
            "ca",
            "-config",
            "ca.cnf",
            "-revoke",
            "bob-signer.crt",
            "-keyfile",
            "corp-ca.key",
            "-cert",
            "corp-ca.crt",
        ],
        &pki,
    );
    openssl(
        &[
            "ca",
            "-config",
            "ca.cnf",
            "-gencrl",
            "-keyfile",
            "corp-ca.key",
            "-cert",
            "corp-ca.crt",
            "-out",
            "corp-ca.crl.pem",
        ],
        &pki,
    );
    let victim2 = victim(dir, "victim2", &pki, Some(&pki.join("corp-ca.crl.pem")));
    let (code, err) = import_card(&victim2, &signed);
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("no signature by a key this store trusts"),
        "{err}"
    );
    let listed = mailseal(&victim2, &["key", "list", "--json"]);
    assert!(!String::from_utf8_lossy(&listed.stdout).contains(BOB));
}
