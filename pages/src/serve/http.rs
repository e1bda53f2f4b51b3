//! HTTP/1.1 as `mpistat serve` speaks it: a request head read with hard limits (parsed by
//! `httparse`, which hyper uses too), `GET`/`HEAD` only and no body, one request per connection,
//! and the answer's bytes.

/// The most a request head (request line and header fields) may be; nginx's default buffers
/// allow 1 kB and then 4 × 8 kB, Apache 8 kB per line.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The most a request target (path and query) may be.
pub const MAX_TARGET_BYTES: usize = 8 * 1024;
/// The most header fields a request may have.
pub const MAX_HEADERS: usize = 64;

/// A request that is answered (after its caller is identified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `HEAD`: the answer without its body.
    pub head_only: bool,
    /// The path and query, as sent (`/users/alice.html?period=2026-W47`).
    pub target: String,
    /// Header fields whose value is UTF-8 (name, value), in order.
    pub headers: Vec<(String, String)>,
}

/// Why a request is refused before it is looked at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the request head is over {MAX_HEAD_BYTES} bytes")]
    HeadTooLarge,
    #[error("the request has more than {MAX_HEADERS} header fields")]
    TooManyHeaders,
    #[error("the request target is over {MAX_TARGET_BYTES} bytes")]
    TargetTooLong,
    #[error("the request target must be a path (`/...`)")]
    NotAPath,
    #[error("malformed request: {0}")]
    Malformed(httparse::Error),
    #[error("only GET and HEAD")]
    Method,
    #[error("no request body is taken")]
    Body,
    #[error("the request was not sent in time")]
    Timeout,
    #[error("busy: try again in a moment")]
    Busy,
}

impl Refusal {
    /// The status it is answered with.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::HeadTooLarge | Refusal::TooManyHeaders => 431,
            Refusal::TargetTooLong => 414,
            Refusal::NotAPath | Refusal::Malformed(_) => 400,
            Refusal::Method => 405,
            Refusal::Body => 413,
            Refusal::Timeout => 408,
            Refusal::Busy => 503,
        }
    }
}

/// The request whose head is at the start of `received`: `None` while it is incomplete (the
/// caller reads more, up to [`MAX_HEAD_BYTES`]).
pub fn parse(received: &[u8]) -> Result<Option<Request>, Refusal> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut fields);
    let status = match request.parse(received) {
        Ok(status) => status,
        Err(httparse::Error::TooManyHeaders) => return Err(Refusal::TooManyHeaders),
        Err(e) => return Err(Refusal::Malformed(e)),
    };
    if status.is_partial() {
        return match received.len() >= MAX_HEAD_BYTES {
            true => Err(Refusal::HeadTooLarge),
            false => Ok(None),
        };
    }
    if status.unwrap() > MAX_HEAD_BYTES {
        return Err(Refusal::HeadTooLarge);
    }
    let head_only = match request.method {
        Some("GET") => false,
        Some("HEAD") => true,
        _ => return Err(Refusal::Method),
    };
    let target = request.path.unwrap_or_default();
    if target.len() > MAX_TARGET_BYTES {
        return Err(Refusal::TargetTooLong);
    }
    if !target.starts_with('/') {
        return Err(Refusal::NotAPath);
    }
    let mut headers = Vec::with_capacity(request.headers.len());
    for field in request.headers.iter() {
        let has_body = field.name.eq_ignore_ascii_case("transfer-encoding")
            || (field.name.eq_ignore_ascii_case("content-length")
                && field.value.trim_ascii() != b"0");
        if has_body {
            return Err(Refusal::Body);
        }
        if let Ok(value) = std::str::from_utf8(field.value) {
            headers.push((field.name.to_string(), value.to_string()));
        }
    }
    Ok(Some(Request {
        head_only,
        target: target.to_string(),
        headers,
    }))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// The bytes of an answer: status line, `headers` (name, value) with the body's length and
/// `Connection: close`, then `body` unless `head_only`.
pub fn answer(status: u16, headers: &[(&str, &str)], body: &[u8], head_only: bool) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        out += &format!("{name}: {value}\r\n");
    }
    out += &format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut out = out.into_bytes();
    if !head_only {
        out.extend_from_slice(body);
    }
    out
}

/// The plain-text answer to a refused request.
pub fn refusal(refusal: &Refusal) -> Vec<u8> {
    let mut headers = vec![("Content-Type", "text/plain; charset=utf-8")];
    if *refusal == Refusal::Busy {
        headers.push(("Retry-After", "1"));
    }
    answer(
        refusal.status(),
        &headers,
        format!("{refusal}\n").as_bytes(),
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_get_and_its_headers() {
        let head = b"GET /users/alice.html?period=2026-W47 HTTP/1.1\r\nHost: x\r\nREMOTE_USER: alice\r\n\r\n";
        let request = parse(head).unwrap().unwrap();
        assert!(!request.head_only);
        assert_eq!(request.target, "/users/alice.html?period=2026-W47");
        assert_eq!(request.headers[1], ("REMOTE_USER".into(), "alice".into()));
        assert!(
            parse(b"HEAD / HTTP/1.0\r\n\r\n")
                .unwrap()
                .unwrap()
                .head_only
        );
        assert_eq!(parse(&head[..30]), Ok(None), "incomplete");
    }

    #[test]
    fn what_is_refused() {
        let refused = |head: &[u8]| parse(head).unwrap_err();
        assert_eq!(refused(b"POST / HTTP/1.1\r\n\r\n"), Refusal::Method);
        assert_eq!(
            refused(b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n"),
            Refusal::Body
        );
        assert_eq!(
            refused(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Refusal::Body
        );
        assert!(parse(b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").is_ok());
        assert_eq!(
            refused(b"GET http://x/ HTTP/1.1\r\n\r\n"),
            Refusal::NotAPath
        );
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_TARGET_BYTES));
        assert_eq!(refused(long.as_bytes()), Refusal::TargetTooLong);
        let many: String = (0..=MAX_HEADERS).map(|n| format!("X-{n}: y\r\n")).collect();
        let many = format!("GET / HTTP/1.1\r\n{many}\r\n");
        assert_eq!(refused(many.as_bytes()), Refusal::TooManyHeaders);
        // No newline ever: refused once the limit is reached, whatever follows.
        assert_eq!(refused(&[b'G'; MAX_HEAD_BYTES]), Refusal::HeadTooLarge);
        let big = format!(
            "GET / HTTP/1.1\r\nX: {}\r\n\r\n",
            "v".repeat(MAX_HEAD_BYTES)
        );
        assert_eq!(refused(big.as_bytes()), Refusal::HeadTooLarge);
        assert!(matches!(
            refused(b"\x00\x01 junk\r\n\r\n"),
            Refusal::Malformed(_)
        ));
    }

    #[test]
    fn answers_say_their_length_and_close() {
        let bytes = answer(200, &[("Content-Type", "text/html")], b"<p>hi</p>", false);
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 9\r\n\
             Connection: close\r\n\r\n<p>hi</p>"
        );
        let head = answer(200, &[], b"<p>hi</p>", true);
        assert!(String::from_utf8(head)
            .unwrap()
            .ends_with("Content-Length: 9\r\nConnection: close\r\n\r\n"));
        let busy = String::from_utf8(refusal(&Refusal::Busy)).unwrap();
        assert!(
            busy.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{busy}"
        );
        assert!(busy.contains("Retry-After: 1\r\n"), "{busy}");
    }

    proptest! {
        /// Whatever arrives, parsing neither panics nor lets a request past the limits, and an
        /// incomplete head stays below the head limit.
        #[test]
        fn any_bytes_are_answered_within_the_limits(bytes in proptest::collection::vec(any::<u8>(), 0..20_000)) {
            match parse(&bytes) {
                Ok(Some(request)) => {
                    prop_assert!(request.target.len() <= MAX_TARGET_BYTES);
                    prop_assert!(request.headers.len() <= MAX_HEADERS);
                }
                Ok(None) => prop_assert!(bytes.len() < MAX_HEAD_BYTES),
                Err(refusal) => prop_assert!(refusal.status() >= 400),
            }
        }

        /// Requests made of valid pieces are read back as they were sent, split anywhere.
        #[test]
        fn well_formed_requests_are_read_back(
            path in "/[a-z0-9/._?=&%-]{0,200}",
            values in proptest::collection::vec("[ -~]{0,80}", 0..20),
            cut in 0usize..4000,
        ) {
            let mut head = format!("GET {path} HTTP/1.1\r\n");
            for (n, value) in values.iter().enumerate() {
                head += &format!("X-Field-{n}: {value}\r\n");
            }
            head += "\r\n";
            let cut = cut.min(head.len() - 1);
            prop_assert_eq!(parse(&head.as_bytes()[..cut]), Ok(None));
            let request = parse(head.as_bytes()).unwrap().unwrap();
            prop_assert_eq!(&request.target, &path);
            let read: Vec<&str> = request.headers.iter().map(|(_, v)| v.as_str()).collect();
            let sent: Vec<&str> = values.iter().map(|v| v.trim()).collect();
            prop_assert_eq!(read, sent);
        }
    }
}
