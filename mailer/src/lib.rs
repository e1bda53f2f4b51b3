//! Sends mpistat's weekly mails with the transport the site chose (`[mail]` in `etc/site.toml`):
//! SMTP (host, port, STARTTLS verified against the system's trust store and the site's CA file,
//! login with a password read from its own file: [`smtp`]), the local `sendmail` program with a
//! bounded wait ([`sendmail`]), or a directory of `.eml` files private to the service (the
//! default, for tests and the demo: [`directory`]).
//!
//! A [`Mail`] is what the digest wrote: a plain-text and an HTML version of the same content, and
//! PNG images the HTML refers to as `cid:<name>`. It becomes one MIME message:
//! `multipart/alternative` of `text/plain` and (`multipart/related` of `text/html` and the
//! images). Sending never retries by itself; the caller records failures and tries again later.

pub mod directory;
pub mod sendmail;
pub mod smtp;

use lettre::message::header::ContentType;
use lettre::message::{Attachment, Mailbox, MultiPart, SinglePart};
use lettre::Message;
use mpistat_site::{MailConfig, MailTransport};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One user's mail as the digest wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct Mail {
    /// Login name: the recipient is derived from it.
    pub user: String,
    /// Used to name the `.eml` file (`<tag>-<user>.eml`), e.g. the ISO week.
    pub tag: String,
    pub subject: String,
    pub text: String,
    pub html: String,
    pub images: Vec<Image>,
}

/// A PNG the HTML shows as `<img src="cid:{cid}">`.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    pub cid: String,
    pub png: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum MailerError {
    #[error("mail settings: {0}")]
    Config(String),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("bad address {address:?}: {reason}")]
    Address { address: String, reason: String },
    #[error("cannot build the message: {0}")]
    Build(String),
    #[error("send failed: {0}")]
    Send(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

enum Channel {
    Smtp(smtp::Relay),
    Sendmail(sendmail::Sendmail),
    Directory(PathBuf),
}

/// Who gets a user's mail: a mapping file's entry, else the pattern with `{user}` replaced.
struct Recipients {
    pattern: String,
    mapped: HashMap<String, String>,
}

/// Sends [`Mail`]s as the site configured.
pub struct Mailer {
    channel: Channel,
    from: Mailbox,
    recipients: Recipients,
}

impl Mailer {
    /// The transport, sender and recipients of `config`; reads the password and mapping files.
    pub fn from_site(config: &MailConfig) -> Result<Mailer, MailerError> {
        let channel = match config.transport {
            MailTransport::Smtp => Channel::Smtp(smtp::Relay::from_site(config)?),
            MailTransport::Sendmail => Channel::Sendmail(sendmail::Sendmail {
                command: config.sendmail_command.clone(),
                timeout: Duration::from_secs(config.sendmail_timeout_seconds),
            }),
            MailTransport::Directory => Channel::Directory(config.directory.clone()),
        };
        let from = parse_mailbox(&config.from)?;
        let mapped = match &config.recipient_map {
            Some(path) => read_recipient_map(path)?,
            None => HashMap::new(),
        };
        Ok(Mailer {
            channel,
            from,
            recipients: Recipients {
                pattern: config.recipient.clone(),
                mapped,
            },
        })
    }

    /// The address `user`'s mail goes to.
    pub fn recipient(&self, user: &str) -> String {
        match self.recipients.mapped.get(user) {
            Some(address) => address.clone(),
            None => self.recipients.pattern.replace("{user}", user),
        }
    }

    /// The MIME message of `mail`.
    pub fn message(&self, mail: &Mail) -> Result<Message, MailerError> {
        let to = parse_mailbox(&self.recipient(&mail.user))?;
        let plain = SinglePart::builder()
            .header(ContentType::TEXT_PLAIN)
            .body(mail.text.clone());
        let html = SinglePart::builder()
            .header(ContentType::TEXT_HTML)
            .body(mail.html.clone());
        let alternative = MultiPart::alternative().singlepart(plain);
        let body = if mail.images.is_empty() {
            alternative.singlepart(html)
        } else {
            let png = ContentType::parse("image/png").expect("a valid content type");
            let related =
                mail.images
                    .iter()
                    .fold(MultiPart::related().singlepart(html), |related, image| {
                        related.singlepart(
                            Attachment::new_inline(image.cid.clone())
                                .body(image.png.clone(), png.clone()),
                        )
                    });
            alternative.multipart(related)
        };
        Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(&mail.subject)
            .multipart(body)
            .map_err(|e| MailerError::Build(e.to_string()))
    }

    /// Send `mail`; returns the recipient.
    pub fn send(&self, mail: &Mail) -> Result<String, MailerError> {
        let message = self.message(mail)?;
        let recipient = self.recipient(&mail.user);
        match &self.channel {
            Channel::Smtp(relay) => relay.send(&message),
            Channel::Sendmail(sendmail) => {
                sendmail.send(self.from.email.as_ref(), &recipient, &message.formatted())
            }
            Channel::Directory(dir) => directory::write_eml(
                dir,
                &format!("{}-{}.eml", mail.tag, mail.user),
                &message.formatted(),
            ),
        }?;
        Ok(recipient)
    }
}

fn parse_mailbox(address: &str) -> Result<Mailbox, MailerError> {
    address
        .parse()
        .map_err(|e: lettre::address::AddressError| MailerError::Address {
            address: address.to_string(),
            reason: e.to_string(),
        })
}

/// `login address` per line; blank lines and `#` comments are skipped.
fn read_recipient_map(path: &Path) -> Result<HashMap<String, String>, MailerError> {
    let text = std::fs::read_to_string(path).map_err(|source| MailerError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut mapped = HashMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((login, address)) = line.split_once(char::is_whitespace) else {
            return Err(MailerError::Config(format!(
                "{}:{}: expected `login address`",
                path.display(),
                number + 1
            )));
        };
        mapped.insert(login.to_string(), address.trim().to_string());
    }
    Ok(mapped)
}

/// An error with its causes, on one line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let said = inner.to_string();
        // Many errors repeat their cause in their own text.
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipients_from_the_map_file_then_the_pattern() {
        let map = std::env::temp_dir().join(format!("mpistat-map-{}", std::process::id()));
        std::fs::write(&map, "# login address\nalice  alice.smith@example.org\n\n").unwrap();
        let config = MailConfig {
            recipient: "{user}@example.org".into(),
            recipient_map: Some(map.clone()),
            ..MailConfig::default()
        };
        let mailer = Mailer::from_site(&config).unwrap();
        assert_eq!(mailer.recipient("alice"), "alice.smith@example.org");
        assert_eq!(mailer.recipient("bob"), "bob@example.org");
        std::fs::write(&map, "alice\n").unwrap();
        let bad = Mailer::from_site(&config).err().unwrap().to_string();
        assert!(bad.ends_with(":1: expected `login address`"), "{bad}");
        std::fs::remove_file(&map).unwrap();
    }

    #[test]
    fn settings_that_cannot_work_are_errors() {
        let no_password = MailConfig {
            transport: MailTransport::Smtp,
            smtp_user: "mpistat".into(),
            ..MailConfig::default()
        };
        let error = Mailer::from_site(&no_password).err().unwrap().to_string();
        assert!(error.contains("smtp_password_file"), "{error}");
    }
}
