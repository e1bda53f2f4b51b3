//! Certificates made by `openssl` for a test: a CA of its own and server certificates it signs,
//! as a site makes them for its relays. Nothing is added to the host's trust store.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA in a directory: `<name>.pem` (certificate) and `<name>.key`.
pub struct TestCa {
    dir: PathBuf,
    name: String,
}

/// A certificate and its key, PEM files.
pub struct Issued {
    pub certificate: PathBuf,
    pub key: PathBuf,
}

const EC_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
];

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (scripts/prereqs.sh installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestCa {
    /// A self-signed CA `subject` (common name), written to `dir/<name>.pem|.key`.
    pub fn new(dir: &Path, name: &str, subject: &str) -> TestCa {
        let (pem, key) = (format!("{name}.pem"), format!("{name}.key"));
        let subject = format!("/CN={subject}");
        let mut args = vec!["req", "-x509", "-days", "2", "-subj", &subject];
        args.extend(EC_KEY);
        args.extend(["-keyout", &key, "-out", &pem]);
        openssl(&args, dir);
        TestCa {
            dir: dir.to_path_buf(),
            name: name.to_string(),
        }
    }

    /// The CA's certificate (PEM).
    pub fn certificate(&self) -> PathBuf {
        self.dir.join(format!("{}.pem", self.name))
    }

    /// A certificate `name` signed by this CA for `names` (DNS names or IP addresses, all in
    /// subjectAltName; the first is the common name), for TLS servers and clients.
    pub fn issue(&self, name: &str, names: &[&str]) -> Issued {
        let (csr, pem, key, ext) = (
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.key"),
            format!("{name}.ext"),
        );
        let subject = format!("/CN={}", names[0]);
        let mut args = vec!["req", "-subj", &subject];
        args.extend(EC_KEY);
        args.extend(["-keyout", &key, "-out", &csr]);
        openssl(&args, &self.dir);
        let alt: Vec<String> = names
            .iter()
            .map(|n| match n.parse::<std::net::IpAddr>() {
                Ok(_) => format!("IP:{n}"),
                Err(_) => format!("DNS:{n}"),
            })
            .collect();
        std::fs::write(
            self.dir.join(&ext),
            format!(
                "subjectAltName={}\nextendedKeyUsage=serverAuth,clientAuth\n",
                alt.join(",")
            ),
        )
        .unwrap();
        let (ca_pem, ca_key) = (format!("{}.pem", self.name), format!("{}.key", self.name));
        openssl(
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &ca_pem,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &ext,
                "-out",
                &pem,
            ],
            &self.dir,
        );
        Issued {
            certificate: self.dir.join(pem),
            key: self.dir.join(key),
        }
    }

    /// A bundle for `SSL_CERT_FILE`: the host's own CAs and this one, at `path`.
    pub fn bundle_with_system_cas(&self, path: &Path) -> PathBuf {
        let mut bundle = std::fs::read("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
        bundle.extend(std::fs::read(self.certificate()).unwrap());
        std::fs::write(path, bundle).unwrap();
        path.to_path_buf()
    }
}
