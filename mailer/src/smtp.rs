//! The SMTP transport: what it does about TLS and logins, decided once from the site's settings.
//!
//! The levels follow Postfix's `smtp_tls_security_level`, with verification kept on whenever TLS
//! is used: `off` is Postfix's `none`; `required` is `verify` (STARTTLS or no mail, the
//! certificate checked against the trust store and the host name); `opportunistic` is `may`
//! except that a certificate that does not verify fails the mail instead of being accepted or
//! falling back to clear text (Postfix's `may` checks nothing). Two exceptions, both to make the
//! shipped defaults work without ever weakening a remote relay:
//! - On a loopback host (`localhost`, `127.0.0.0/8`, `::1`), `opportunistic` does not start TLS:
//!   the mail never leaves the machine, and a stock local MTA's certificate is self-signed (the
//!   `ssl-cert-snakeoil` of Debian's Postfix), which nothing can verify.
//! - A login is never sent in clear unless `smtp_allow_plaintext_login` says so: with
//!   `smtp_user` set, `opportunistic` becomes `required` (on loopback too) and `off` is refused.
//!
//! The trust store is the system's (`/etc/ssl/certs`, where `update-ca-certificates` puts a
//! site's CA; `SSL_CERT_FILE` / `SSL_CERT_DIR` replace it when set, as for OpenSSL), plus the
//! certificates of `smtp_ca_file`.

use crate::{error_chain, MailerError};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{Message, SmtpTransport, Transport};
use mpistat_site::{MailConfig, StartTls};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::net::IpAddr;
use std::time::Duration;

/// How long an SMTP conversation may stall before the send fails.
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// What a connection to the relay does about TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsPolicy {
    /// Clear text.
    None,
    /// STARTTLS when offered; a certificate that does not verify fails the mail.
    Opportunistic,
    /// STARTTLS or no mail, the certificate verified; `because_of_login` when the site chose
    /// `opportunistic` but a login needs it.
    Required { because_of_login: bool },
}

impl TlsPolicy {
    /// The policy of `config`'s relay, or why its settings cannot be used.
    pub fn of(config: &MailConfig) -> Result<TlsPolicy, MailerError> {
        let login = !config.smtp_user.is_empty();
        let clear_login_refused = login && !config.smtp_allow_plaintext_login;
        Ok(match config.smtp_starttls {
            StartTls::Off if clear_login_refused => {
                return Err(MailerError::Config(
                    "smtp_user is set but smtp_starttls = \"off\": the password would cross the \
                     network in clear. Use smtp_starttls = \"required\" (or \"opportunistic\"), \
                     or set smtp_allow_plaintext_login = true to accept it"
                        .into(),
                ))
            }
            StartTls::Off => TlsPolicy::None,
            StartTls::Required => TlsPolicy::Required {
                because_of_login: false,
            },
            StartTls::Opportunistic if clear_login_refused => TlsPolicy::Required {
                because_of_login: true,
            },
            StartTls::Opportunistic if is_loopback(&config.smtp_host) => TlsPolicy::None,
            StartTls::Opportunistic => TlsPolicy::Opportunistic,
        })
    }

    fn describe(self) -> &'static str {
        match self {
            TlsPolicy::None => "without TLS",
            TlsPolicy::Opportunistic => "STARTTLS if offered, certificate verified",
            TlsPolicy::Required {
                because_of_login: false,
            } => "STARTTLS required, certificate verified",
            TlsPolicy::Required {
                because_of_login: true,
            } => {
                "STARTTLS required because of the login: the password is not sent in clear \
                 unless smtp_allow_plaintext_login = true"
            }
        }
    }
}

/// Whether `host` names this machine's loopback interface without a name lookup: `localhost`
/// (and names under it, RFC 6761) or a loopback address.
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host.ends_with(".localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The site's relay and how mails reach it.
pub struct Relay {
    transport: SmtpTransport,
    /// `host:port (policy)`, for errors.
    route: String,
    /// What certificates are checked against, for errors about them.
    trust: String,
}

impl Relay {
    /// The relay of `config`: its TLS policy, trust store and login (the password file is read).
    pub fn from_site(config: &MailConfig) -> Result<Relay, MailerError> {
        let host = config.smtp_host.as_str();
        let credentials = credentials(config)?;
        let policy = TlsPolicy::of(config)?;
        let tls = match policy {
            TlsPolicy::None => Tls::None,
            TlsPolicy::Opportunistic => Tls::Opportunistic(tls_parameters(config)?),
            TlsPolicy::Required { .. } => Tls::Required(tls_parameters(config)?),
        };
        let mut builder = SmtpTransport::builder_dangerous(host)
            .port(config.smtp_port)
            .tls(tls)
            .timeout(Some(SMTP_TIMEOUT));
        if let Some(credentials) = credentials {
            builder = builder.credentials(credentials);
        }
        Ok(Relay {
            transport: builder.build(),
            route: format!("{host}:{} ({})", config.smtp_port, policy.describe()),
            trust: trust_description(config),
        })
    }

    pub fn send(&self, message: &Message) -> Result<(), MailerError> {
        self.transport.send(message).map(drop).map_err(|e| {
            let mut text = format!("SMTP to {}: {}", self.route, error_chain(&e));
            if certificate_rejected(&e) {
                text += &format!(
                    " (the server's certificate must be signed by a CA of {} and name the host)",
                    self.trust
                );
            }
            MailerError::Send(text)
        })
    }
}

fn credentials(config: &MailConfig) -> Result<Option<Credentials>, MailerError> {
    if config.smtp_user.is_empty() {
        return Ok(None);
    }
    let Some(path) = &config.smtp_password_file else {
        return Err(MailerError::Config(
            "smtp_user is set but smtp_password_file is not".into(),
        ));
    };
    let text = std::fs::read_to_string(path).map_err(|source| MailerError::Read {
        path: path.clone(),
        source,
    })?;
    let password = text.lines().next().unwrap_or_default().to_string();
    Ok(Some(Credentials::new(config.smtp_user.clone(), password)))
}

/// TLS towards `config`'s host: the system's trust store plus the site's CA file.
fn tls_parameters(config: &MailConfig) -> Result<TlsParameters, MailerError> {
    let mut builder = TlsParameters::builder(config.smtp_host.clone());
    if let Some(path) = &config.smtp_ca_file {
        let pem = std::fs::read(path).map_err(|source| MailerError::Read {
            path: path.clone(),
            source,
        })?;
        let unusable = |reason: String| {
            MailerError::Config(format!("smtp_ca_file {}: {reason}", path.display()))
        };
        let certificates = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| unusable(e.to_string()))?;
        if certificates.is_empty() {
            return Err(unusable("no PEM certificate in it".into()));
        }
        for der in certificates {
            let certificate =
                Certificate::from_der(der.to_vec()).map_err(|e| unusable(error_chain(&e)))?;
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder
        .build()
        .map_err(|e| MailerError::Config(format!("TLS settings: {}", error_chain(&e))))
}

fn trust_description(config: &MailConfig) -> String {
    let mut stores: Vec<String> = ["SSL_CERT_FILE", "SSL_CERT_DIR"]
        .into_iter()
        .filter_map(|name| {
            std::env::var_os(name).map(|v| format!("{name}={}", v.to_string_lossy()))
        })
        .collect();
    if stores.is_empty() {
        stores.push("the system's trust store (/etc/ssl/certs)".into());
    }
    if let Some(path) = &config.smtp_ca_file {
        stores.push(format!("smtp_ca_file {}", path.display()));
    }
    stores.join(" or ")
}

/// Whether rustls refused the server's certificate somewhere among `error`'s causes (inside an
/// I/O error, where the TLS stream reports it).
fn certificate_rejected(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        let tls = e.downcast_ref::<rustls::Error>().or_else(|| {
            e.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if matches!(tls, Some(rustls::Error::InvalidCertificate(_))) {
            return true;
        }
        cause = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(starttls: StartTls, host: &str, user: &str, allow_clear: bool) -> MailConfig {
        MailConfig {
            smtp_starttls: starttls,
            smtp_host: host.into(),
            smtp_user: user.into(),
            smtp_allow_plaintext_login: allow_clear,
            ..MailConfig::default()
        }
    }

    #[test]
    fn loopback_is_named_not_looked_up() {
        for local in [
            "localhost",
            "LOCALHOST.",
            "mail.localhost",
            "127.0.0.1",
            "127.1.2.3",
        ] {
            assert!(is_loopback(local), "{local}");
        }
        for local in ["::1", "[::1]"] {
            assert!(is_loopback(local), "{local}");
        }
        for remote in [
            "relay.example.org",
            "localhost.example.org",
            "10.0.0.1",
            "::2",
        ] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }

    /// Verification is never off where TLS is used, and a remote relay never loses it; only the
    /// loopback host skips an opportunistic STARTTLS, and a login always needs TLS or consent.
    #[test]
    fn policy_of_each_setting() {
        use StartTls::*;
        let required = TlsPolicy::Required {
            because_of_login: false,
        };
        let for_login = TlsPolicy::Required {
            because_of_login: true,
        };
        let remote = "relay.example.org";
        let cases = [
            (Opportunistic, "localhost", "", false, TlsPolicy::None),
            (Opportunistic, remote, "", false, TlsPolicy::Opportunistic),
            (Opportunistic, remote, "u", false, for_login),
            (Opportunistic, "localhost", "u", false, for_login),
            (Opportunistic, remote, "u", true, TlsPolicy::Opportunistic),
            (Opportunistic, "localhost", "u", true, TlsPolicy::None),
            (Required, "localhost", "", false, required),
            (Required, remote, "u", false, required),
            (Off, remote, "", false, TlsPolicy::None),
            (Off, remote, "u", true, TlsPolicy::None),
        ];
        for (starttls, host, user, allow, expected) in cases {
            let got = TlsPolicy::of(&config(starttls, host, user, allow)).unwrap();
            assert_eq!(got, expected, "{starttls:?} {host} {user:?} {allow}");
        }
        let refused = TlsPolicy::of(&config(Off, remote, "u", false)).unwrap_err();
        assert!(
            refused.to_string().contains("smtp_allow_plaintext_login"),
            "{refused}"
        );
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_an_error() {
        let path = std::env::temp_dir().join(format!("mpistat-ca-{}", std::process::id()));
        std::fs::write(&path, "not a certificate\n").unwrap();
        let config = MailConfig {
            smtp_starttls: StartTls::Required,
            smtp_ca_file: Some(path.clone()),
            ..MailConfig::default()
        };
        let error = Relay::from_site(&config).err().unwrap().to_string();
        assert!(error.contains("no PEM certificate"), "{error}");
        std::fs::remove_file(&path).unwrap();
        let error = Relay::from_site(&config).err().unwrap().to_string();
        assert!(error.starts_with("cannot read"), "{error}");
    }
}
