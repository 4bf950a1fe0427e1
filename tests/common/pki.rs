//! A scratch certificate authority for the tests that build certification paths:
//! the real `openssl ca`, which writes whatever extensions and dates it is given.

use std::path::{Path, PathBuf};

use super::openssl;

/// Validity that holds now (the tests must not age).
pub const NOW_START: &str = "20250101000000Z";
pub const NOW_END: &str = "20450101000000Z";

/// The extensions of a CA certificate.
pub const CA_EXT: &str =
    "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n";

/// A scratch CA database for `openssl ca`, which (unlike `openssl x509`) takes any
/// start and end date.
pub struct Pki {
    pub dir: PathBuf,
}

impl Pki {
    pub fn new(dir: &Path) -> Pki {
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
    pub fn issue(
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
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
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
    pub fn revoke(&self, name: &str, issuer: &str) {
        self.revoke_file(&self.dir.join(format!("{name}.crt")), issuer);
    }

    /// `issuer` revokes the certificate in `cert` (one it issued, wherever it is).
    pub fn revoke_file(&self, cert: &Path, issuer: &str) {
        let (crt, key) = (format!("{issuer}.crt"), format!("{issuer}.key"));
        let cert = cert.display().to_string();
        openssl(
            &[
                "ca", "-config", "ca.cnf", "-revoke", &cert, "-keyfile", &key, "-cert", &crt,
            ],
            &self.dir,
        );
    }

    /// `issuer`'s CRL (PEM) as of now, listing what it revoked; the file's path.
    pub fn crl(&self, issuer: &str) -> PathBuf {
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

    pub fn root(&self, ext_extra: &str, start: &str, end: &str) -> PathBuf {
        self.issue(
            "root",
            None,
            &format!("basicConstraints=critical,CA:TRUE{ext_extra}\nkeyUsage=critical,keyCertSign,cRLSign\n"),
            start,
            end,
        )
    }

    pub fn ca(&self, name: &str, issuer: &str, ext: &str) -> PathBuf {
        self.issue(name, Some(issuer), ext, NOW_START, NOW_END)
    }

    /// An email-protection leaf for `email`.
    pub fn leaf(&self, name: &str, issuer: &str, email: &str, extra: &str) -> PathBuf {
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
