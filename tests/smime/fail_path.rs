//! Certification paths an attacker builds (issue #17): the victim's store trusts one
//! root, "Corp Root"; the attacker controls everything else (a certificate the root
//! issued to them, a partner CA the root constrained, their own keys and mail) and
//! signs as `ceo@corp.example`. Every path that breaks RFC 5280 section 6 is refused
//! with exit 4 and nothing on stdout; the lawful path beside them opens.
//!
//! The certificates are made by the real `openssl ca`, which writes whatever
//! extensions and dates it is given (a CA that would never issue them is the attack).

use crate::common;

use std::path::{Path, PathBuf};

use common::{openssl, run};
use mailseal::envelope::{Envelope, Kind, Operation};
use mailseal::message::MailA2aMessage;
use mailseal::seal::{SealOptions, Sealer};
use mailseal::Profile;

pub(crate) const CEO: &str = "ceo@corp.example";
const VICTIM: &str = "victim@corp.example";
/// Validity that holds now (the tests must not age).
pub(crate) const NOW_START: &str = "20250101000000Z";
pub(crate) const NOW_END: &str = "20450101000000Z";

/// A scratch CA database for `openssl ca`, which (unlike `openssl x509`) takes any
/// start and end date.
pub(crate) struct Pki {
    pub(crate) dir: PathBuf,
}

impl Pki {
    pub(crate) fn new(dir: &Path) -> Pki {
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
        Pki {
            dir: dir.to_path_buf(),
        }
    }

    /// Issues `name.crt` (P-256 key `name.key`) for subject CN `name`, signed by
    /// `issuer` (`None`: self-signed), with the extension lines `ext`.
    pub(crate) fn issue(
        &self,
        name: &str,
        issuer: Option<&str>,
        ext: &str,
        start: &str,
        end: &str,
    ) -> PathBuf {
        let d = &self.dir;
        let key = format!("{name}.key");
        openssl(
            &[
                "ecparam",
                "-name",
                "prime256v1",
                "-genkey",
                "-noout",
                "-out",
                &key,
            ],
            d,
        );
        let csr = format!("{name}.csr");
        let subj = format!("/CN={name}");
        openssl(
            &["req", "-new", "-key", &key, "-subj", &subj, "-out", &csr],
            d,
        );
        let extfile = format!("{name}.ext");
        std::fs::write(d.join(&extfile), ext).unwrap();
        let crt = format!("{name}.crt");
        let mut args = vec![
            "ca",
            "-batch",
            "-config",
            "ca.cnf",
            "-notext",
            "-in",
            &csr,
            "-out",
            &crt,
            "-startdate",
            start,
            "-enddate",
            end,
            "-extfile",
            &extfile,
        ];
        let (issuer_crt, issuer_key);
        match issuer {
            None => args.extend(["-selfsign", "-keyfile", &key]),
            Some(i) => {
                issuer_crt = format!("{i}.crt");
                issuer_key = format!("{i}.key");
                args.extend(["-cert", &issuer_crt, "-keyfile", &issuer_key]);
            }
        }
        openssl(&args, d);
        d.join(crt)
    }

    /// `issuer` revokes `name` (its database entry).
    pub(crate) fn revoke(&self, name: &str, issuer: &str) {
        let (crt, key, cert) = (
            format!("{issuer}.crt"),
            format!("{issuer}.key"),
            format!("{name}.crt"),
        );
        openssl(
            &[
                "ca", "-config", "ca.cnf", "-revoke", &cert, "-keyfile", &key, "-cert", &crt,
            ],
            &self.dir,
        );
    }

    /// `issuer`'s CRL (PEM) as of now, listing what it revoked; the file's path.
    pub(crate) fn crl(&self, issuer: &str) -> PathBuf {
        let (crt, key, out) = (
            format!("{issuer}.crt"),
            format!("{issuer}.key"),
            format!("{issuer}.crl.pem"),
        );
        openssl(
            &[
                "ca", "-config", "ca.cnf", "-gencrl", "-keyfile", &key, "-cert", &crt, "-out", &out,
            ],
            &self.dir,
        );
        self.dir.join(out)
    }

    pub(crate) fn root(&self, ext_extra: &str, start: &str, end: &str) -> PathBuf {
        self.issue(
            "root",
            None,
            &format!("basicConstraints=critical,CA:TRUE{ext_extra}\nkeyUsage=critical,keyCertSign,cRLSign\n"),
            start,
            end,
        )
    }

    pub(crate) fn ca(&self, name: &str, issuer: &str, ext: &str) -> PathBuf {
        self.issue(name, Some(issuer), ext, NOW_START, NOW_END)
    }

    /// An email-protection leaf for `email`.
    pub(crate) fn leaf(&self, name: &str, issuer: &str, email: &str, extra: &str) -> PathBuf {
        self.issue(
            name,
            Some(issuer),
            &format!(
                "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
                 extendedKeyUsage=emailProtection\nsubjectAltName=email:{email}\n{extra}"
            ),
            NOW_START,
            NOW_END,
        )
    }
}

pub(crate) const CA_EXT: &str =
    "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n";

/// The victim's store: the root as its only trust anchor.
pub(crate) fn victim(dir: &Path, root: &Path) -> PathBuf {
    let store = dir.join("victim");
    import(&store, &[root], true);
    store
}

/// `mailseal key import` of `files` into `store` (as trust anchors when `trusted`),
/// which must succeed; what it printed.
pub(crate) fn import(store: &Path, files: &[&Path], trusted: bool) -> String {
    let mut args = vec![
        "key".to_string(),
        "import".into(),
        "--store".into(),
        store.display().to_string(),
    ];
    if trusted {
        args.push("--trusted".into());
    }
    args.extend(files.iter().map(|p| p.display().to_string()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&a, b"");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn request() -> MailA2aMessage {
    let mut env = Envelope::new(Kind::Request, Operation::MessageSend, "path-req-1");
    env.set("correlationId", "path-1");
    env.set("idempotencyKey", "path-effect-1");
    env.set(
        "payload",
        &serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "wire the money"}]}}),
    );
    MailA2aMessage::new(CEO, &[VICTIM], env)
}

/// The attacker signs the request as the CEO with `leaf`, carrying `chain`.
pub(crate) fn forged(pki: &Pki, leaf: &str, chain: &[&str]) -> Vec<u8> {
    let d = &pki.dir;
    std::fs::write(
        d.join("inner.eml"),
        request().to_inner_entity(false).unwrap(),
    )
    .unwrap();
    let mut pem = Vec::new();
    for c in chain {
        pem.extend(std::fs::read(d.join(format!("{c}.crt"))).unwrap());
    }
    std::fs::write(d.join("chain.pem"), pem).unwrap();
    let (crt, key) = (format!("{leaf}.crt"), format!("{leaf}.key"));
    let mut args = vec![
        "cms",
        "-sign",
        "-in",
        "inner.eml",
        "-signer",
        &crt,
        "-inkey",
        &key,
        "-from",
        CEO,
        "-to",
        VICTIM,
        "-out",
        "signed.eml",
    ];
    if !chain.is_empty() {
        args.extend(["-certfile", "chain.pem"]);
    }
    openssl(&args, d);
    std::fs::read(d.join("signed.eml")).unwrap()
}

pub(crate) fn open(store: &Path, raw: &[u8], extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "open",
        "--store",
        store.to_str().unwrap(),
        "--also-addressed-to",
        VICTIM,
    ];
    args.extend_from_slice(extra);
    run(&args, raw)
}

/// Refused as unauthentic (exit 4), nothing on stdout, and the reason named.
pub(crate) fn assert_refused(out: &std::process::Output, reason: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing delivered");
    assert!(stderr.contains(reason), "{reason:?} in {stderr}");
}

#[test]
fn a_lawful_path_through_a_constrained_intermediate_opens() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    pki.ca(
        "corp-ca",
        "root",
        &format!("{CA_EXT}basicConstraints=critical,CA:TRUE,pathlen:0\nnameConstraints=critical,permitted;email:corp.example\n"),
    );
    pki.leaf("ceo", "corp-ca", CEO, "");
    let store = victim(dir.path(), &root);
    let out = open(&store, &forged(&pki, "ceo", &["corp-ca"]), &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("wire the money"));
}

#[test]
fn fail_an_end_entity_certificate_used_as_an_issuer() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    // The root gave Mallory an ordinary S/MIME certificate; she issues one for the CEO.
    pki.leaf("mallory", "root", "mallory@corp.example", "");
    pki.leaf("ceo", "mallory", CEO, "");
    let store = victim(dir.path(), &root);
    let out = open(&store, &forged(&pki, "ceo", &["mallory"]), &[]);
    // No path exists at all: Mallory's certificate is no CA, so the search never
    // takes it as an issuer of a valid path.
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn fail_a_ca_certificate_whose_key_usage_excludes_certificate_signing() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    pki.ca(
        "signing-only",
        "root",
        "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,digitalSignature\n",
    );
    pki.leaf("ceo", "signing-only", CEO, "");
    let store = victim(dir.path(), &root);
    let out = open(&store, &forged(&pki, "ceo", &["signing-only"]), &[]);
    assert_refused(&out, "keyCertSign");
}

#[test]
fn fail_a_path_longer_than_an_issuers_path_length_constraint() {
    // The root allows no intermediate; the intermediate's holder issues anyway.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root(",pathlen:0", NOW_START, NOW_END);
    pki.ca("rogue-ca", "root", CA_EXT);
    pki.leaf("ceo", "rogue-ca", CEO, "");
    let store = victim(dir.path(), &root);
    let out = open(&store, &forged(&pki, "ceo", &["rogue-ca"]), &[]);
    assert_refused(&out, "path length constraint");

    // One level deeper under an intermediate that itself says pathlen:0.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    pki.ca(
        "partner-ca",
        "root",
        &format!("{CA_EXT}basicConstraints=critical,CA:TRUE,pathlen:0\n"),
    );
    pki.ca("rogue-ca", "partner-ca", CA_EXT);
    pki.leaf("ceo", "rogue-ca", CEO, "");
    let store = victim(dir.path(), &root);
    let out = open(
        &store,
        &forged(&pki, "ceo", &["rogue-ca", "partner-ca"]),
        &[],
    );
    assert_refused(&out, "path length constraint");
}

#[test]
fn fail_a_name_constrained_ca_issuing_outside_its_names() {
    for constraint in [
        // A partner CA allowed only its own domain.
        "permitted;email:partner.example",
        // Subdomains only: corp.example itself is not among them.
        "permitted;email:.corp.example",
        // Everything but the company's own domain.
        "excluded;email:corp.example",
        // One mailbox only.
        "permitted;email:bot@corp.example",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::new(dir.path());
        let root = pki.root("", NOW_START, NOW_END);
        pki.ca(
            "partner-ca",
            "root",
            &format!("{CA_EXT}nameConstraints=critical,{constraint}\n"),
        );
        pki.leaf("ceo", "partner-ca", CEO, "");
        let store = victim(dir.path(), &root);
        let out = open(&store, &forged(&pki, "ceo", &["partner-ca"]), &[]);
        assert_refused(&out, "name constraints");
    }
    // A constraint on the anchor itself binds too.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root(
        "\nnameConstraints=critical,permitted;email:partner.example",
        NOW_START,
        NOW_END,
    );
    pki.leaf("ceo", "root", CEO, "");
    let store = victim(dir.path(), &root);
    let out = open(&store, &forged(&pki, "ceo", &[]), &[]);
    assert_refused(&out, "name constraints");
}

#[test]
fn fail_an_unknown_critical_extension() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    pki.leaf(
        "ceo",
        "root",
        CEO,
        "1.3.6.1.4.1.55555.1=critical,ASN1:NULL\n",
    );
    let store = victim(dir.path(), &root);
    let out = open(&store, &forged(&pki, "ceo", &[]), &[]);
    assert_refused(&out, "critical extension");
    // Also on an intermediate.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    pki.ca(
        "odd-ca",
        "root",
        &format!("{CA_EXT}1.3.6.1.4.1.55555.1=critical,ASN1:NULL\n"),
    );
    pki.leaf("ceo", "odd-ca", CEO, "");
    let store = victim(dir.path(), &root);
    let out = open(&store, &forged(&pki, "ceo", &["odd-ca"]), &[]);
    assert_refused(&out, "critical extension");
}

#[test]
fn fail_a_trust_anchor_that_has_expired() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", "20150101000000Z", "20200101000000Z");
    pki.leaf("ceo", "root", CEO, "");
    let store = victim(dir.path(), &root);
    let out = open(&store, &forged(&pki, "ceo", &[]), &[]);
    assert_refused(&out, "trust anchor");
}

#[test]
fn fail_a_backdated_signature_from_an_expired_certificate() {
    // The CEO's certificate expired in 2021; whoever holds its old key signs today
    // with a signingTime of 2020. Validation is at the time of receipt.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", "20190101000000Z", NOW_END);
    pki.issue(
        "ceo",
        Some("root"),
        &format!("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=emailProtection\nsubjectAltName=email:{CEO}\n"),
        "20200101000000Z",
        "20210101000000Z",
    );
    let attacker = mailseal::keystore::DirectoryStore::open(dir.path().join("attacker")).unwrap();
    use mailseal::keystore::KeyStore;
    openssl(&["pkey", "-in", "ceo.key", "-out", "ceo.p8"], dir.path());
    for f in ["ceo.crt", "ceo.p8"] {
        attacker
            .import(&std::fs::read(dir.path().join(f)).unwrap(), f, false)
            .unwrap();
    }
    let mut opts = SealOptions::new(Profile::Smime);
    opts.sign_only = true;
    opts.signing_time = Some(time::macros::datetime!(2020-06-01 12:00 UTC));
    let mut msg = request();
    msg.headers.date = Some(time::macros::datetime!(2020-06-01 12:00 UTC));
    let sealed = mailseal::smime::Smime::new(&attacker)
        .seal(&msg, &opts)
        .expect("the attacker seals with the old key");
    let store = victim(dir.path(), &root);
    let out = open(&store, &sealed, &[]);
    assert_refused(&out, "not valid at the validation time");

    // Archival validation as of a stated time is an explicit choice, and then the
    // signature is judged as of then.
    let out = open(
        &store,
        &sealed,
        &["--stateless", "--now", "2020-06-02T00:00:00Z"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn fail_a_signer_or_intermediate_its_issuer_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    pki.ca("corp-ca", "root", CA_EXT);
    pki.leaf("ceo", "corp-ca", CEO, "");
    let store = victim(dir.path(), &root);
    let forged_msg = forged(&pki, "ceo", &["corp-ca"]);
    assert_eq!(
        open(&store, &forged_msg, &["--stateless"]).status.code(),
        Some(0)
    );

    // The CEO's key leaked; the corporate CA revokes its certificate. The victim
    // imports the CA's CRL (a file: nothing is fetched), and the key no longer speaks
    // for the CEO.
    pki.revoke("ceo", "corp-ca");
    let listed = import(&store, &[&pki.crl("corp-ca")], false);
    assert!(listed.contains("crl"), "{listed}");
    let out = open(&store, &forged_msg, &["--stateless"]);
    assert_refused(&out, "is revoked");

    // The intermediate itself revoked by the root, in a fresh victim store.
    let store2 = dir.path().join("victim2");
    import(&store2, &[&root], true);
    pki.revoke("corp-ca", "root");
    import(&store2, &[&pki.crl("root")], false);
    let out = open(&store2, &forged_msg, &["--stateless"]);
    assert_refused(&out, "certificate CN=corp-ca is revoked");
}

#[test]
fn fail_a_pinned_certificate_its_issuer_revoked() {
    // Pinned (imported for its address) does not skip revocation: a CRL of its
    // issuer, verified by the anchor, still revokes it.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    let ceo = pki.leaf("ceo", "root", CEO, "");
    let store = victim(dir.path(), &root);
    import(&store, &[&ceo], false);
    let msg = forged(&pki, "ceo", &[]);
    assert_eq!(open(&store, &msg, &["--stateless"]).status.code(), Some(0));
    pki.revoke("ceo", "root");
    import(&store, &[&pki.crl("root")], false);
    assert_refused(&open(&store, &msg, &["--stateless"]), "is revoked");
}

#[test]
fn fail_a_pinned_certificate_outside_its_validity() {
    // Pinned skips the path, not the signer's own validity (the `cert_path` fuzz
    // target's invariant, which first read the path verdict alone): a certificate
    // imported for the CEO's address that expired, or is not valid yet, does not
    // sign for it, whatever signingTime the signature claims.
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    // The root issues the certificates; the victims pin them, and trust no anchor.
    pki.root("", "20190101000000Z", NOW_END);
    let ext = format!("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=emailProtection\nsubjectAltName=email:{CEO}\n");
    for (name, start, end) in [
        ("ceo-expired", "20200101000000Z", "20210101000000Z"),
        ("ceo-future", "20440101000000Z", NOW_END),
    ] {
        let cert = pki.issue(name, Some("root"), &ext, start, end);
        let store = dir.path().join(format!("victim-{name}"));
        import(&store, &[&cert], false);
        let out = open(&store, &forged(&pki, name, &[]), &["--stateless"]);
        assert_refused(&out, "the signer certificate is not valid at ");
        let window = if name == "ceo-expired" {
            "(valid from 2020-01-01T00:00:00Z to 2021-01-01T00:00:00Z)"
        } else {
            "(valid from 2044-01-01T00:00:00Z to 2045-01-01T00:00:00Z)"
        };
        assert_refused(&out, window);
    }
    // The same pin, in its validity, signs.
    let cert = pki.issue("ceo", Some("root"), &ext, NOW_START, NOW_END);
    let store = dir.path().join("victim-ceo");
    import(&store, &[&cert], false);
    let out = open(&store, &forged(&pki, "ceo", &[]), &["--stateless"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn crls_required_by_policy_and_a_forged_crl_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let root = pki.root("", NOW_START, NOW_END);
    pki.leaf("ceo", "root", CEO, "");
    let store = victim(dir.path(), &root);
    let msg = forged(&pki, "ceo", &[]);
    // --require-crl without a CRL: refused.
    assert_refused(
        &open(&store, &msg, &["--stateless", "--require-crl"]),
        "no current CRL",
    );
    // A CRL under the root's name but signed by Mallory's own key, listing the CEO
    // (denial of service) is not the root's: ignored.
    let mallory_dir = dir.path().join("mallory-pki");
    std::fs::create_dir_all(&mallory_dir).unwrap();
    let mallory = Pki::new(&mallory_dir);
    mallory.root("", NOW_START, NOW_END);
    std::fs::copy(dir.path().join("ceo.crt"), mallory_dir.join("ceo.crt")).unwrap();
    // Mallory's database does not know the certificate: she lists its serial by
    // revoking her copy (openssl ca -revoke adds any certificate it is given).
    mallory.revoke("ceo", "root");
    import(&store, &[&mallory.crl("root")], false);
    let out = open(&store, &msg, &["--stateless"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // ... and it does not count as the root's current CRL either.
    assert_refused(
        &open(&store, &msg, &["--stateless", "--require-crl"]),
        "no current CRL",
    );
    // The root's own CRL, listing nothing: accepted under --require-crl.
    import(&store, &[&pki.crl("root")], false);
    let out = open(&store, &msg, &["--stateless", "--require-crl"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
