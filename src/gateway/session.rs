//! The server side of one SMTP session as a state machine without I/O: bytes in,
//! replies and events out. The connection loop ([`super::server`]) reads and writes;
//! this decides. Commands and the DATA terminator are parsed by `smtp-proto`
//! (Stalwart's parser), not by hand; what is here is the state, the limits, and the
//! framing of command lines (one line at a time to the parser: given several, its
//! recovery from a bad line ran on into the next, so that the same bytes meant
//! different commands depending on how TCP cut them; the fuzz target found it).
//!
//! The limits are the gateway's defence against bad input, each answered with a clear
//! reply and never a crash: command lines over 4,096 bytes (`smtp-proto`'s bound), a
//! message over SIZE (the rest of the DATA is read and dropped, then 552), more
//! recipients than allowed (452 for each one over), NUL in the message (550), and
//! repeated errors (the session is closed after [`SessionLimits::max_errors`]).
//! Timeouts and connection caps are the loop's.
//!
//! The end of DATA is read here, not by `smtp-proto`: its reader also ends a message at
//! `<CRLF>.<CR><CR><LF>` (a dot line with extra CRs), which Postfix and RFC 5321 do not,
//! so what one hop took for the rest of a message another would read as a second,
//! smuggled one. Only `<CRLF>.<CRLF>` ends it (`DataReader`; the `smtp_session` fuzz
//! target holds it to the same messages however the bytes are cut).
//!
//! Only CRLF ends a line, in commands and in DATA: a bare LF or a bare CR (one not
//! part of CRLF) anywhere is answered `521 5.5.2 HOSTNAME Error: bare <LF> received`
//! (or `<CR>`) and the connection is closed at once, as Postfix does with
//! `smtpd_forbid_bare_newline = reject` and `smtpd_forbid_bare_newline_reject_code =
//! 521`. A bare line end is how SMTP smuggling hides a second message from one hop
//! and not the next; closing rather than reading on leaves nothing after it to be
//! read as commands or as another message. No listener option relaxes this: the
//! gateway's clients are MTAs (Postfix sends CRLF, and its own
//! `smtpd_forbid_bare_newline = normalize` is the place to take a broken client's bare
//! LFs, before the gateway) and agents' SMTP libraries, and the messages it seals or
//! opens are signed in CRLF form. BDAT is not offered (no CHUNKING), so no message
//! content arrives any other way than DATA.
//!
//! XFORWARD ([`super::xforward`]) is advertised and taken only when the listener trusts
//! its clients with it ([`Session::allow_xforward`]), before MAIL, as Postfix sends it;
//! others are told 550 5.7.0. What it forwards lasts for one transaction.
//!
//! After STARTTLS, whatever the client pipelined behind the command in clear is
//! dropped (the STARTTLS command injection of CVE-2011-0411), and the session starts
//! over: a new EHLO, no transaction.

use std::net::IpAddr;

use base64::Engine as _;
use smtp_proto::{EhloResponse, Error as ParseError, Request};
use zeroize::Zeroizing;

use super::trace::Client;
use super::xforward::Forwarded;

/// The longest command line (`smtp-proto`'s own bound for its line receiver).
const MAX_LINE: usize = smtp_proto::request::receiver::MAX_LINE_LENGTH;

/// What a session accepts.
#[derive(Clone, Debug)]
pub struct SessionLimits {
    /// The largest message, bytes (advertised as SIZE).
    pub max_message_bytes: usize,
    /// Recipients per transaction.
    pub max_recipients: usize,
    /// Errors (bad commands, refused recipients) before the session is closed.
    pub max_errors: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_message_bytes: 25 * 1024 * 1024,
            max_recipients: 100,
            max_errors: 20,
        }
    }
}

/// One message as the client handed it over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transaction {
    /// The reverse path (empty for a bounce).
    pub mail_from: String,
    /// The forward paths.
    pub recipients: Vec<String>,
    /// The message, line ends CRLF, dot-stuffing removed.
    pub data: Vec<u8>,
    /// Whether the session was under TLS when the message came.
    pub tls: bool,
    /// The SMTP AUTH login the client proved, if any.
    pub login: Option<String>,
    /// Who handed it over (for the trace field and the log line).
    pub client: Client,
}

/// What a client gave to authenticate: checked by the connection loop
/// ([`super::submission::Submitters::verify`], Argon2, off the async threads), whose
/// answer goes to [`Session::authenticated`].
#[derive(Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The login (RFC 4616 authcid).
    pub login: String,
    /// The password, wiped when dropped.
    pub password: Zeroizing<String>,
}

/// A command or message the session refused itself, before anything reached the
/// pipeline: a MAIL without TLS or a login, a RCPT outside the local domains, a message
/// over the size limit or with bad bytes, a failed AUTH exchange, a bad command. The
/// connection loop logs each ([`Session::take_refusals`]) and counts it, so the operator
/// sees what was turned away and why, as for the messages the pipeline refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The reply code.
    pub code: u16,
    /// The enhanced status code: one of [`STATUSES`], else `"other"` (a bounded label
    /// for the metrics).
    pub status: &'static str,
    /// The reply's text (it may quote what the client sent: escape it to show it).
    pub text: String,
    /// The transaction's reverse path, when MAIL had been taken (empty: the null
    /// sender).
    pub mail_from: Option<String>,
    /// The recipient a RCPT named, or the transaction's recipients for a refusal
    /// later in it.
    pub recipients: Vec<String>,
    /// The session closes with this reply.
    pub closed: bool,
}

/// Every enhanced status code the session refuses with (a test reads this file and
/// checks that none is missing).
pub const STATUSES: &[&str] = &[
    "4.5.3", "4.7.0", "5.0.0", "5.1.3", "5.1.7", "5.3.4", "5.5.1", "5.5.2", "5.5.4", "5.6.0",
    "5.7.0", "5.7.1", "5.7.8", "5.7.11",
];

/// What the connection loop does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Write these bytes (one or more replies).
    Send(Vec<u8>),
    /// Write the 220 reply, then run the TLS handshake and call
    /// [`Session::tls_started`].
    StartTls(Vec<u8>),
    /// A message to process: answer with [`Session::finish`].
    Message(Transaction),
    /// Credentials to check: answer with [`Session::authenticated`].
    Authenticate(Credentials),
    /// Write these bytes, then close the connection.
    Close(Vec<u8>),
}

enum State {
    /// Before EHLO/HELO.
    Greeted,
    /// EHLO done, no transaction.
    Ready,
    /// MAIL given.
    Mail,
    /// In DATA.
    Data(DataReader),
    /// In DATA, over the limit: read to the end and drop.
    Discard(DataReader),
    /// A message handed out, its reply not yet given.
    Waiting,
    /// AUTH PLAIN without an initial response: the next line is the response.
    AuthPlain,
    /// AUTH LOGIN: the next line is the login.
    AuthLogin,
    /// AUTH LOGIN: the next line is the password of this login.
    AuthPassword(String),
    /// Credentials handed out, the verdict not yet given.
    Authenticating,
    /// Closed.
    Closed,
}

/// One SMTP session.
pub struct Session {
    hostname: String,
    limits: SessionLimits,
    tls_offered: bool,
    tls_active: bool,
    require_tls: bool,
    state: State,
    /// Dropping the rest of an overlong command line.
    skipping_line: bool,
    /// Bytes read and not yet consumed: `input[pos..]`.
    input: Vec<u8>,
    pos: usize,
    mail_from: String,
    recipients: Vec<String>,
    data: Vec<u8>,
    errors: usize,
    /// SMTP AUTH is offered (under TLS) and required before MAIL.
    auth_required: bool,
    /// AUTH is taken before TLS too (a loopback client: only the host's root sees it).
    auth_in_clear: bool,
    /// The login proved in this session.
    login: Option<String>,
    /// The domains RCPT may name (`None`: any).
    local_domains: Option<Vec<String>>,
    /// The TCP peer's address.
    peer: Option<IpAddr>,
    /// What the client said in EHLO/HELO.
    helo: String,
    /// EHLO rather than HELO.
    esmtp: bool,
    /// XFORWARD is advertised and taken.
    xforward: bool,
    /// What XFORWARD said, for the transaction under way.
    forwarded: Option<Forwarded>,
    /// The address of the RCPT being judged (for its refusal).
    rcpt: Option<String>,
    /// Refusals not yet taken by the connection loop.
    refusals: Vec<Refusal>,
}

fn reply(code: u16, status: &str, text: &str) -> Vec<u8> {
    format!("{code} {status} {text}\r\n").into_bytes()
}

impl Session {
    /// A session for `hostname`. `tls_offered`: STARTTLS is available; `tls_active`:
    /// the connection is already TLS (implicit TLS); `require_tls`: no mail without it.
    pub fn new(
        hostname: &str,
        limits: SessionLimits,
        tls_offered: bool,
        tls_active: bool,
        require_tls: bool,
    ) -> Self {
        Session {
            hostname: hostname.to_string(),
            limits,
            tls_offered,
            tls_active,
            require_tls,
            state: State::Greeted,
            skipping_line: false,
            input: Vec::new(),
            pos: 0,
            mail_from: String::new(),
            recipients: Vec::new(),
            data: Vec::new(),
            errors: 0,
            auth_required: false,
            auth_in_clear: false,
            login: None,
            local_domains: None,
            peer: None,
            helo: String::new(),
            esmtp: false,
            xforward: false,
            forwarded: None,
            rcpt: None,
            refusals: Vec::new(),
        }
    }

    /// The refusals made since the last call, oldest first (at most `max_errors` and a
    /// closing one between two calls: each counts as an error).
    pub fn take_refusals(&mut self) -> Vec<Refusal> {
        std::mem::take(&mut self.refusals)
    }

    /// The TCP peer's address (for the trace field).
    pub fn set_peer(&mut self, peer: IpAddr) {
        self.peer = Some(peer);
    }

    /// Advertises and takes XFORWARD: for a listener whose clients are the MTAs in
    /// front (`xforward = true`, which the configuration allows only with `clients`
    /// naming loopback or single addresses).
    pub fn allow_xforward(&mut self) {
        self.xforward = true;
    }

    /// Takes RCPT only for addresses in these domains (`example.org`, `*.example.org`
    /// for its subdomains, `*` for any), 550 5.7.1 for others: an inbound listener
    /// takes mail for its organisation, never to relay elsewhere.
    pub fn accept_domains(&mut self, domains: Vec<String>) {
        self.local_domains = Some(domains);
    }

    /// Offers SMTP AUTH (PLAIN and LOGIN, under TLS only: a password is never sent in
    /// clear) and refuses MAIL until a login is proved (an outbound listener with
    /// `submission = "auth"`).
    pub fn require_auth(&mut self) {
        self.auth_required = true;
    }

    /// Takes AUTH before TLS as well: for a loopback client (an MTA on the same host
    /// logging in), whose traffic only the host's root can observe.
    pub fn allow_auth_in_clear(&mut self) {
        self.auth_in_clear = true;
    }

    /// No verdict on the [`Action::Authenticate`] handed out: every check is busy (454,
    /// counted as an error, so a flood ends its sessions).
    pub fn auth_unavailable(&mut self) -> Action {
        self.state = State::Ready;
        self.error(reply(
            454,
            "4.7.0",
            "temporary authentication failure, try later",
        ))
    }

    /// The verdict on the [`Action::Authenticate`] handed out: the login when the
    /// password was right (235), `None` when not (535, counted as an error).
    pub fn authenticated(&mut self, login: Option<String>) -> Action {
        self.state = State::Ready;
        match login {
            Some(login) => {
                self.login = Some(login);
                Action::Send(reply(235, "2.7.0", "authentication succeeded"))
            }
            None => self.error(reply(535, "5.7.8", "authentication credentials invalid")),
        }
    }

    /// The 220 greeting.
    pub fn greeting(&self) -> Vec<u8> {
        format!("220 {} ESMTP mailseal\r\n", self.hostname).into_bytes()
    }

    /// Whether the session has ended.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// Whether the client is in the middle of a message (the loop gives DATA a longer
    /// timeout).
    pub fn in_data(&self) -> bool {
        matches!(self.state, State::Data(_) | State::Discard(_))
    }

    /// Bytes read from the client.
    pub fn push(&mut self, bytes: &[u8]) {
        self.input.drain(..self.pos);
        self.pos = 0;
        self.input.extend_from_slice(bytes);
    }

    /// The TLS handshake after STARTTLS succeeded: the session starts over.
    pub fn tls_started(&mut self) {
        self.tls_active = true;
        self.login = None;
        self.input.clear();
        self.pos = 0;
        self.skipping_line = false;
        self.reset();
        self.state = State::Greeted;
    }

    /// The reply to the message last handed out by [`Action::Message`].
    pub fn finish(&mut self, reply: Vec<u8>) -> Action {
        self.reset();
        self.state = State::Ready;
        Action::Send(reply)
    }

    fn reset(&mut self) {
        self.mail_from.clear();
        self.recipients.clear();
        self.data = Vec::new();
        // XFORWARD attributes last for one transaction (XFORWARD_README).
        self.forwarded = None;
    }

    /// A bare LF or CR (`what`): 521, and the connection closed, as Postfix's
    /// `smtpd_forbid_bare_newline = reject` with reject code 521.
    fn bare(&mut self, what: &str) -> Action {
        let bytes = format!(
            "521 5.5.2 {} Error: bare <{what}> received\r\n",
            self.hostname
        )
        .into_bytes();
        self.record(&bytes, true);
        self.reset();
        self.state = State::Closed;
        Action::Close(bytes)
    }

    /// Notes the refusal `bytes` (one reply line) with the transaction it ends or
    /// belongs to.
    fn record(&mut self, bytes: &[u8], closed: bool) {
        let line = String::from_utf8_lossy(bytes);
        let line = line.trim_end_matches(['\r', '\n']);
        let mut words = line.splitn(3, ' ');
        let code = words.next().and_then(|c| c.parse().ok()).unwrap_or(0);
        let status = words
            .next()
            .and_then(|s| STATUSES.iter().find(|k| **k == s).copied())
            .unwrap_or("other");
        let in_transaction = matches!(
            self.state,
            State::Mail | State::Data(_) | State::Discard(_) | State::Waiting
        );
        let recipients = match self.rcpt.take() {
            Some(r) => vec![r],
            None => self.recipients.clone(),
        };
        self.refusals.push(Refusal {
            code,
            status,
            text: words.next().unwrap_or("").to_string(),
            mail_from: in_transaction.then(|| self.mail_from.clone()),
            recipients,
            closed,
        });
    }

    /// A message refused at the end of DATA: noted with its transaction, which ends.
    fn refuse_message(&mut self, bytes: Vec<u8>) -> Action {
        let action = self.error(bytes);
        self.reset();
        if !matches!(self.state, State::Closed) {
            self.state = State::Ready;
        }
        action
    }

    fn error(&mut self, bytes: Vec<u8>) -> Action {
        self.errors += 1;
        self.record(&bytes, self.errors >= self.limits.max_errors);
        if self.errors >= self.limits.max_errors {
            self.state = State::Closed;
            let mut b = bytes;
            b.extend_from_slice(&reply(421, "4.7.0", "too many errors, closing"));
            return Action::Close(b);
        }
        Action::Send(bytes)
    }

    /// The next thing to do with the input so far, or `None` when more input is
    /// needed.
    pub fn step(&mut self) -> Option<Action> {
        match self.state {
            State::Closed | State::Waiting | State::Authenticating => None,
            State::Data(_) | State::Discard(_) => self.step_data(),
            _ => self.step_command(),
        }
    }

    fn step_data(&mut self) -> Option<Action> {
        let max = self.limits.max_message_bytes;
        let rest = &self.input[self.pos..];
        let (used, read) = match &mut self.state {
            State::Data(rx) => rx.read(rest, Some(&mut self.data)),
            State::Discard(rx) => rx.read(rest, None),
            _ => return None,
        };
        self.pos += used;
        match read {
            DataRead::BareLf => return Some(self.bare("LF")),
            DataRead::BareCr => return Some(self.bare("CR")),
            DataRead::More | DataRead::End => {}
        }
        let over = matches!(self.state, State::Discard(_)) || self.data.len() > max;
        if read == DataRead::More {
            // Over the limit, the rest is read into nothing.
            if over {
                self.data = Vec::new();
                self.state = match std::mem::replace(&mut self.state, State::Waiting) {
                    State::Data(rx) => State::Discard(rx),
                    other => other,
                };
            }
            return None;
        }
        if over {
            return Some(self.refuse_message(reply(
                552,
                "5.3.4",
                &format!("message exceeds the fixed size limit of {max} bytes"),
            )));
        }
        if let Some(why) = bad_bytes(&self.data) {
            return Some(self.refuse_message(reply(550, "5.6.0", why)));
        }
        self.state = State::Waiting;
        Some(Action::Message(Transaction {
            mail_from: std::mem::take(&mut self.mail_from),
            recipients: std::mem::take(&mut self.recipients),
            data: std::mem::take(&mut self.data),
            tls: self.tls_active,
            login: self.login.clone(),
            client: Client {
                peer: self.peer,
                helo: self.helo.clone(),
                esmtp: self.esmtp,
                forwarded: self.forwarded.take().map(Box::new),
            },
        }))
    }

    fn step_command(&mut self) -> Option<Action> {
        loop {
            let pending = &self.input[self.pos..];
            let Some(lf) = memchr::memchr(b'\n', pending) else {
                if pending.len() > MAX_LINE && !self.skipping_line {
                    // Too long and no end yet: refused now, the rest of it dropped as
                    // it comes.
                    self.pos = self.input.len();
                    self.skipping_line = true;
                    return Some(self.error(reply(500, "5.5.2", "line too long")));
                }
                if self.skipping_line {
                    self.pos = self.input.len();
                }
                return None;
            };
            let (start, end) = (self.pos, self.pos + lf + 1);
            self.pos = end;
            if std::mem::take(&mut self.skipping_line) {
                continue;
            }
            if lf > MAX_LINE {
                return Some(self.error(reply(500, "5.5.2", "line too long")));
            }
            // Only CRLF ends a line; a CR only as part of it (the parser would skip a
            // CR inside a word: "STARTT\rLS" read as STARTTLS, found by the fuzz
            // target); no NUL.
            let Some(body) = self.input[start..end - 1].strip_suffix(b"\r") else {
                return Some(self.bare("LF"));
            };
            if body.contains(&b'\r') {
                return Some(self.bare("CR"));
            }
            if body.contains(&0) {
                return Some(self.error(reply(500, "5.5.2", "NUL in a command")));
            }
            if matches!(
                self.state,
                State::AuthPlain | State::AuthLogin | State::AuthPassword(_)
            ) {
                // An AUTH response: base64, never a command.
                let line = Zeroizing::new(body.to_vec());
                return Some(self.auth_response(&line));
            }
            if let Some(args) = xforward_args(body) {
                return Some(match std::str::from_utf8(args) {
                    Ok(args) => {
                        let args = args.to_string();
                        self.xforward(&args)
                    }
                    Err(_) => self.error(reply(501, "5.5.4", "XFORWARD: not ASCII")),
                });
            }
            // A whole line: the parser never sees more or less than one, so what it
            // makes of the bytes does not depend on how they were cut into reads.
            let parsed = Request::parse(&mut self.input[start..end].iter()).map(|r| r.into_owned());
            return Some(match parsed {
                Ok(request) => self.command(request),
                // A whole line that the parser finds unfinished is a bad one.
                Err(ParseError::NeedsMoreData { .. }) => {
                    self.error(reply(501, "5.5.2", "syntax error"))
                }
                Err(e) => self.error(parse_error_reply(&e)),
            });
        }
    }

    fn command(&mut self, request: Request<String>) -> Action {
        match request {
            Request::Ehlo { host } => {
                self.reset();
                self.state = State::Ready;
                self.helo = host;
                self.esmtp = true;
                let mut ehlo = EhloResponse::new(self.hostname.as_str());
                ehlo.capabilities = smtp_proto::EXT_SIZE
                    | smtp_proto::EXT_PIPELINING
                    | smtp_proto::EXT_8BIT_MIME
                    | smtp_proto::EXT_ENHANCED_STATUS_CODES
                    | smtp_proto::EXT_SMTP_UTF8;
                if self.tls_offered && !self.tls_active {
                    ehlo.capabilities |= smtp_proto::EXT_START_TLS;
                }
                if self.auth_required && (self.tls_active || self.auth_in_clear) {
                    ehlo.capabilities |= smtp_proto::EXT_AUTH;
                    ehlo.auth_mechanisms = smtp_proto::AUTH_PLAIN | smtp_proto::AUTH_LOGIN;
                }
                ehlo.size = self.limits.max_message_bytes;
                let mut out = Vec::new();
                // Writing into a Vec cannot fail.
                let _ = ehlo.write(&mut out);
                if self.xforward {
                    // smtp-proto knows no XFORWARD: its line goes after the first.
                    let at = memchr::memchr(b'\n', &out).map_or(out.len(), |i| i + 1);
                    let line =
                        format!("250-XFORWARD {}\r\n", super::xforward::ATTRIBUTES.join(" "));
                    out.splice(at..at, line.into_bytes());
                }
                Action::Send(out)
            }
            Request::Helo { host } => {
                self.reset();
                self.state = State::Ready;
                self.helo = host;
                self.esmtp = false;
                Action::Send(format!("250 {}\r\n", self.hostname).into_bytes())
            }
            Request::Lhlo { .. } => self.error(reply(500, "5.5.1", "this is SMTP, not LMTP")),
            Request::StartTls => {
                if !self.tls_offered || self.tls_active {
                    return self.error(reply(503, "5.5.1", "TLS not available"));
                }
                if matches!(self.state, State::Mail) {
                    return self.error(reply(503, "5.5.1", "STARTTLS inside a transaction"));
                }
                Action::StartTls(reply(220, "2.0.0", "ready to start TLS"))
            }
            Request::Mail { from } => {
                if !matches!(self.state, State::Ready) {
                    return self.error(reply(503, "5.5.1", "send EHLO first, or RSET"));
                }
                if self.require_tls && !self.tls_active {
                    return self.error(reply(530, "5.7.0", "must issue STARTTLS first"));
                }
                if self.auth_required && self.login.is_none() {
                    return self.error(reply(530, "5.7.0", "authentication required"));
                }
                if from.size > self.limits.max_message_bytes {
                    return self.error(reply(
                        552,
                        "5.3.4",
                        "message size exceeds the fixed maximum message size",
                    ));
                }
                if !from.address.is_empty() && !plain_address(&from.address) {
                    return self.error(reply(553, "5.1.7", "bad sender address"));
                }
                self.mail_from = from.address;
                self.state = State::Mail;
                Action::Send(reply(250, "2.1.0", "sender ok"))
            }
            Request::Rcpt { to } => {
                if !matches!(self.state, State::Mail) {
                    return self.error(reply(503, "5.5.1", "need MAIL before RCPT"));
                }
                self.rcpt = Some(to.address.clone());
                if !plain_address(&to.address) {
                    return self.error(reply(553, "5.1.3", "bad recipient address"));
                }
                if let Some(domains) = &self.local_domains {
                    if !is_local(&to.address, domains) {
                        return self.error(reply(
                            550,
                            "5.7.1",
                            "relay access denied: not a domain this gateway serves",
                        ));
                    }
                }
                if self.recipients.len() >= self.limits.max_recipients {
                    return self.error(reply(452, "4.5.3", "too many recipients"));
                }
                self.rcpt = None;
                self.recipients.push(to.address);
                Action::Send(reply(250, "2.1.5", "recipient ok"))
            }
            Request::Data => {
                if !matches!(self.state, State::Mail) || self.recipients.is_empty() {
                    return self.error(reply(503, "5.5.1", "need MAIL and RCPT before DATA"));
                }
                self.data = Vec::new();
                self.state = State::Data(DataReader::default());
                Action::Send(b"354 end data with <CR><LF>.<CR><LF>\r\n".to_vec())
            }
            Request::Bdat { .. } => {
                // CHUNKING is not offered; the chunk that follows is read as commands
                // and counted as errors.
                self.error(reply(502, "5.5.1", "CHUNKING not offered"))
            }
            Request::Rset => {
                self.reset();
                if !matches!(self.state, State::Greeted) {
                    self.state = State::Ready;
                }
                Action::Send(reply(250, "2.0.0", "ok"))
            }
            Request::Noop { .. } => Action::Send(reply(250, "2.0.0", "ok")),
            Request::Quit => {
                self.state = State::Closed;
                Action::Close(reply(221, "2.0.0", "bye"))
            }
            Request::Vrfy { .. } => Action::Send(reply(252, "2.5.0", "cannot verify")),
            Request::Help { .. } => Action::Send(reply(214, "2.0.0", "see RFC 5321")),
            Request::Auth {
                mechanism,
                initial_response,
            } => self.auth(mechanism, &initial_response),
            Request::Expn { .. }
            | Request::Etrn { .. }
            | Request::Atrn { .. }
            | Request::Burl { .. } => self.error(reply(502, "5.5.1", "command not implemented")),
        }
    }
}

impl Session {
    /// `XFORWARD attribute=value...`: 550 unless the listener trusts its clients with
    /// it (Postfix's answer to a client not in `smtpd_authorized_xforward_hosts`), 503
    /// inside a transaction, 501 for a bad attribute (none taken).
    fn xforward(&mut self, args: &str) -> Action {
        if !self.xforward {
            return self.error(reply(550, "5.7.0", "insufficient authorization"));
        }
        match self.state {
            State::Ready => {}
            State::Mail => return self.error(reply(503, "5.5.1", "MAIL transaction in progress")),
            _ => return self.error(reply(503, "5.5.1", "send EHLO first")),
        }
        let mut forwarded = self.forwarded.clone().unwrap_or_default();
        match forwarded.apply(args) {
            Ok(()) => {
                self.forwarded = Some(forwarded);
                Action::Send(reply(250, "2.0.0", "ok"))
            }
            Err(e) => self.error(reply(501, "5.5.4", &e.to_string())),
        }
    }

    /// `AUTH MECHANISM [initial-response]` (RFC 4954).
    fn auth(&mut self, mechanism: u64, initial: &str) -> Action {
        if !self.auth_required {
            return self.error(reply(502, "5.5.1", "AUTH not offered"));
        }
        if !self.tls_active && !self.auth_in_clear {
            return self.error(reply(
                538,
                "5.7.11",
                "encryption required for requested authentication mechanism",
            ));
        }
        if !matches!(self.state, State::Ready) {
            return self.error(reply(
                503,
                "5.5.1",
                "AUTH after EHLO and outside a transaction",
            ));
        }
        if self.login.is_some() {
            return self.error(reply(503, "5.5.1", "already authenticated"));
        }
        match mechanism {
            smtp_proto::AUTH_PLAIN if initial.is_empty() => {
                self.state = State::AuthPlain;
                Action::Send(b"334 \r\n".to_vec())
            }
            smtp_proto::AUTH_PLAIN => {
                let initial = Zeroizing::new(initial.as_bytes().to_vec());
                self.state = State::AuthPlain;
                self.auth_response(&initial)
            }
            smtp_proto::AUTH_LOGIN if initial.is_empty() => {
                self.state = State::AuthLogin;
                // "Username:"
                Action::Send(b"334 VXNlcm5hbWU6\r\n".to_vec())
            }
            smtp_proto::AUTH_LOGIN => {
                let initial = Zeroizing::new(initial.as_bytes().to_vec());
                self.state = State::AuthLogin;
                self.auth_response(&initial)
            }
            _ => self.error(reply(
                504,
                "5.5.4",
                "mechanism not supported (PLAIN, LOGIN)",
            )),
        }
    }

    /// One base64 line of an AUTH exchange (`*` cancels it).
    fn auth_response(&mut self, line: &[u8]) -> Action {
        let state = std::mem::replace(&mut self.state, State::Ready);
        if line == b"*" {
            return self.error(reply(501, "5.0.0", "authentication cancelled"));
        }
        let decoded = if line == b"=" {
            Some(Zeroizing::new(Vec::new()))
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(line)
                .ok()
                .map(Zeroizing::new)
        };
        let Some(decoded) = decoded else {
            return self.error(reply(501, "5.5.2", "cannot decode the response (base64)"));
        };
        let text = |b: &[u8]| std::str::from_utf8(b).ok().map(str::to_string);
        match state {
            State::AuthPlain => {
                // RFC 4616: authzid NUL authcid NUL passwd; no acting for another.
                let mut parts = decoded.split(|&b| b == 0);
                let (Some(authzid), Some(authcid), Some(passwd), None) =
                    (parts.next(), parts.next(), parts.next(), parts.next())
                else {
                    return self.error(reply(501, "5.5.2", "malformed PLAIN response"));
                };
                match (text(authcid), text(passwd)) {
                    (Some(login), Some(password))
                        if !login.is_empty() && (authzid.is_empty() || authzid == authcid) =>
                    {
                        self.state = State::Authenticating;
                        Action::Authenticate(Credentials {
                            login,
                            password: Zeroizing::new(password),
                        })
                    }
                    _ => self.error(reply(535, "5.7.8", "authentication credentials invalid")),
                }
            }
            State::AuthLogin => match text(&decoded) {
                Some(login) if !login.is_empty() => {
                    self.state = State::AuthPassword(login);
                    // "Password:"
                    Action::Send(b"334 UGFzc3dvcmQ6\r\n".to_vec())
                }
                _ => self.error(reply(535, "5.7.8", "authentication credentials invalid")),
            },
            State::AuthPassword(login) => match text(&decoded) {
                Some(password) => {
                    self.state = State::Authenticating;
                    Action::Authenticate(Credentials {
                        login,
                        password: Zeroizing::new(password),
                    })
                }
                None => self.error(reply(535, "5.7.8", "authentication credentials invalid")),
            },
            other => {
                self.state = other;
                self.error(reply(503, "5.5.1", "no authentication in progress"))
            }
        }
    }
}

/// What follows `XFORWARD` on a command line (case-insensitive), or `None` for
/// another command (`smtp-proto` does not know this one).
fn xforward_args(line: &[u8]) -> Option<&[u8]> {
    const VERB: &[u8] = b"XFORWARD";
    let head = line.get(..VERB.len())?;
    if !head.eq_ignore_ascii_case(VERB) {
        return None;
    }
    let rest = &line[VERB.len()..];
    match rest.first() {
        None => Some(rest),
        Some(b' ' | b'\t') => Some(&rest[1..]),
        Some(_) => None,
    }
}

/// An address the gateway passes on as it was given: `local@domain`, a dot-atom local
/// part without `%` or `!` (old routing syntax a next hop may still follow), a host
/// name domain (UTF-8 allowed for SMTPUTF8). `smtp-proto` hands over a quoted local
/// part without its quotes, and the next hop, given it back unquoted, read
/// `<"victim@evil.example> ORCPT=rfc822;x"@ours.example>` as a recipient at
/// evil.example (found by review): such addresses are refused, as are address
/// literals and source routes.
fn plain_address(address: &str) -> bool {
    // RFC 5321 4.5.1: `<postmaster>` without a domain is taken.
    if address.eq_ignore_ascii_case("postmaster") {
        return true;
    }
    let Some((local, domain)) = address.rsplit_once('@') else {
        return false;
    };
    let hidden = |c: char| crate::error::shown(c.encode_utf8(&mut [0; 4]), 1).starts_with('\\');
    // Dots anywhere in the local part, as Postfix takes them (`a..b@`, `a.@`: old
    // carriers' addresses).
    let local_ok = !local.is_empty()
        && local.chars().all(|c| {
            c.is_ascii_alphanumeric() || "#$&'*+-/=?^_`{|}~.".contains(c) || (c as u32) >= 0x80
        });
    let domain = domain.trim_end_matches('.');
    let domain_ok = !domain.is_empty()
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.chars().all(|c| {
                    c.is_ascii_alphanumeric() || c == '-' || c == '_' || (c as u32) >= 0x80
                })
        });
    local_ok && domain_ok && !address.chars().any(hidden)
}

/// Whether `address`'s domain is one of `domains` (exact, `*.` for subdomains, `*`).
fn is_local(address: &str, domains: &[String]) -> bool {
    let Some((_, domain)) = address.rsplit_once('@') else {
        // `<postmaster>`: this host's own.
        return address.eq_ignore_ascii_case("postmaster");
    };
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    domains.iter().any(|d| {
        let d = d.to_ascii_lowercase();
        match d.strip_prefix("*.") {
            _ if d == "*" => true,
            Some(parent) => domain.ends_with(&format!(".{parent}")),
            None => domain == d,
        }
    })
}

/// Where a line of DATA is, for [`DataReader`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum DataAt {
    /// At the start of a line (after CRLF, or the first byte).
    #[default]
    LineStart,
    /// Inside a line.
    Line,
    /// Inside a line, after a CR.
    LineCr,
    /// A line that began with a dot (removed: RFC 5321 4.5.2).
    Dot,
    /// A line that is a dot and a CR so far.
    DotCr,
}

/// How far [`DataReader::read`] got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DataRead {
    /// The bytes are taken; the message goes on.
    More,
    /// `<CRLF>.<CRLF>`: the message ended.
    End,
    /// A LF not after a CR.
    BareLf,
    /// A CR not before a LF.
    BareCr,
}

/// The message after DATA: ends only at `<CRLF>.<CRLF>` (RFC 5321 4.1.1.4), and a dot
/// that begins a line is removed (4.5.2). A bare LF or CR stops the reading at the
/// byte that shows it (the LF; the byte after the CR); the session closes there.
#[derive(Debug, Default)]
pub(crate) struct DataReader {
    at: DataAt,
}

impl DataReader {
    /// Reads from `bytes` into `out` (or nowhere): how many bytes it took, and where
    /// that left the message (on [`DataRead::End`] the terminator is taken, not
    /// kept).
    pub(crate) fn read(
        &mut self,
        bytes: &[u8],
        mut out: Option<&mut Vec<u8>>,
    ) -> (usize, DataRead) {
        let mut push = |b: &[u8]| {
            if let Some(o) = out.as_deref_mut() {
                o.extend_from_slice(b);
            }
        };
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match (self.at, b) {
                (DataAt::LineStart, b'.') => self.at = DataAt::Dot,
                (DataAt::LineStart | DataAt::Line | DataAt::Dot, b'\n') => {
                    return (i + 1, DataRead::BareLf)
                }
                (DataAt::LineStart | DataAt::Line, b'\r') => {
                    push(b"\r");
                    self.at = DataAt::LineCr;
                }
                (DataAt::LineStart | DataAt::Line, _) => {
                    // Most bytes: the run up to the next CR or LF, copied at once.
                    let run = memchr::memchr2(b'\r', b'\n', &bytes[i..]).unwrap_or(bytes.len() - i);
                    push(&bytes[i..i + run]);
                    i += run;
                    self.at = DataAt::Line;
                    continue;
                }
                (DataAt::LineCr, b'\n') => {
                    push(b"\n");
                    self.at = DataAt::LineStart;
                }
                (DataAt::Dot, b'\r') => self.at = DataAt::DotCr,
                (DataAt::Dot, _) => {
                    push(&[b]);
                    self.at = DataAt::Line;
                }
                (DataAt::DotCr, b'\n') => {
                    *self = DataReader::default();
                    return (i + 1, DataRead::End);
                }
                (DataAt::LineCr | DataAt::DotCr, _) => return (i + 1, DataRead::BareCr),
            }
            i += 1;
        }
        (i, DataRead::More)
    }
}

/// Why a message's bytes are refused: NUL, or a CR or LF that is not part of CRLF
/// (which [`DataReader`] never lets through; the fuzz target checks it).
fn bad_bytes(data: &[u8]) -> Option<&'static str> {
    if memchr::memchr(0, data).is_some() {
        return Some("NUL in the message");
    }
    let mut prev = 0u8;
    for &b in data {
        if b == b'\n' && prev != b'\r' {
            return Some("bare LF in the message (line ends must be CRLF)");
        }
        if prev == b'\r' && b != b'\n' {
            return Some("bare CR in the message (line ends must be CRLF)");
        }
        prev = b;
    }
    if prev == b'\r' {
        return Some("bare CR in the message (line ends must be CRLF)");
    }
    None
}

fn parse_error_reply(e: &ParseError) -> Vec<u8> {
    match e {
        ParseError::UnknownCommand => reply(500, "5.5.1", "unknown command"),
        ParseError::InvalidSenderAddress => reply(501, "5.1.7", "bad sender address syntax"),
        ParseError::InvalidRecipientAddress => reply(501, "5.1.3", "bad recipient address syntax"),
        ParseError::SyntaxError { syntax } => reply(501, "5.5.4", &format!("syntax: {syntax}")),
        ParseError::InvalidParameter { param } => {
            reply(501, "5.5.4", &format!("bad parameter {param}"))
        }
        ParseError::UnsupportedParameter { .. } => reply(504, "5.5.4", "unsupported parameter"),
        ParseError::ResponseTooLong => reply(500, "5.5.2", "line too long"),
        _ => reply(500, "5.5.2", "syntax error"),
    }
}

/// The `smtp_session` fuzz target's checks, here so that its reproducers run as
/// regression tests (`tests/gateway/smtp_session_seeds.rs`) with the same code. The
/// first byte of `data` picks how the rest is cut into reads. Panics on a broken
/// invariant: replies are whole lines of a three-digit code; a message handed out has
/// one to `max_recipients` recipients, fits the size limit, has no NUL, bare CR or
/// bare LF, and makes one well-formed `Received:` field whatever its HELO and XFORWARD
/// said ([`super::trace::check_field`]); nothing happens after a close; and, for
/// inputs that do not reach STARTTLS
/// and have no overlong line (where the reads legitimately matter), the messages
/// handed out do not depend on how the bytes were cut.
#[doc(hidden)]
pub fn check_segmentation(data: &[u8]) {
    let Some((&cut, input)) = data.split_first() else {
        return;
    };
    let limits = SessionLimits {
        max_message_bytes: 4096,
        max_recipients: 5,
        max_errors: 1000,
    };
    let auth = cut & 0x80 != 0;
    // Bit 6: the listener trusts its client with XFORWARD.
    let xforward = cut & 0x40 != 0;
    let whole = drive_all(input, input.len(), &limits, auth, xforward);
    let cut_up = drive_all(input, cut as usize % 17 + 1, &limits, auth, xforward);
    let lower = input.to_ascii_lowercase();
    let starttls = lower.windows(8).any(|w| w == b"starttls");
    let long_line = input.split(|&b| b == b'\n').any(|l| l.len() > 4000);
    if !starttls && !long_line {
        assert_eq!(
            whole, cut_up,
            "message boundaries or refusals depend on the segmentation"
        );
    }
}

/// The messages handed out, whether STARTTLS was done, and the refusals noted (each
/// a 4xx or 5xx with a known status; the same however the bytes are cut). With `auth`, the session is
/// over TLS from the start and requires SMTP AUTH; the login `agent` with the password
/// `pw` is the one that verifies. With `xforward`, XFORWARD is taken.
fn drive_all(
    input: &[u8],
    cut: usize,
    limits: &SessionLimits,
    auth: bool,
    xforward: bool,
) -> (Vec<Transaction>, bool, Vec<(u16, &'static str)>) {
    let mut s = Session::new("fuzz.test", limits.clone(), !auth, auth, false);
    s.set_peer(IpAddr::from([127, 0, 0, 1]));
    if auth {
        s.require_auth();
    }
    if xforward {
        s.allow_xforward();
    }
    let mut messages = Vec::new();
    let mut tls = false;
    let mut refusals = Vec::new();
    let mut note = |s: &mut Session| {
        for r in s.take_refusals() {
            assert!(
                (400..600).contains(&r.code),
                "a refusal is 4xx or 5xx: {r:?}"
            );
            assert_ne!(
                r.status, "other",
                "a refusal's status is a known label: {r:?}"
            );
            refusals.push((r.code, r.status));
        }
    };
    for chunk in input.chunks(cut.max(1)) {
        s.push(chunk);
        while let Some(action) = s.step() {
            note(&mut s);
            match action {
                Action::Send(b) => check_replies(&b),
                Action::StartTls(b) => {
                    check_replies(&b);
                    s.tls_started();
                    tls = true;
                }
                Action::Close(b) => {
                    check_replies(&b);
                    assert!(s.step().is_none(), "nothing after a close");
                    return (messages, tls, refusals);
                }
                Action::Message(t) => {
                    check_message(&t, limits);
                    assert!(
                        !auth || t.login.as_deref() == Some("agent"),
                        "mail without AUTH"
                    );
                    messages.push(t);
                    if let Action::Send(b) = s.finish(b"250 2.0.0 ok\r\n".to_vec()) {
                        check_replies(&b);
                    }
                }
                Action::Authenticate(c) => {
                    let ok = c.login == "agent" && c.password.as_str() == "pw";
                    match s.authenticated(ok.then(|| c.login.clone())) {
                        Action::Send(b) | Action::Close(b) => check_replies(&b),
                        other => panic!("{other:?} after an AUTH verdict"),
                    }
                    note(&mut s);
                }
            }
        }
    }
    (messages, tls, refusals)
}

fn check_replies(b: &[u8]) {
    assert!(b.ends_with(b"\r\n"), "a reply ends its line");
    for line in b.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
        assert!(
            line.len() >= 4 && line[..3].iter().all(u8::is_ascii_digit),
            "a reply line starts with a code"
        );
        assert!(line[3] == b' ' || line[3] == b'-');
    }
}

fn check_message(t: &Transaction, limits: &SessionLimits) {
    assert!(!t.recipients.is_empty() && t.recipients.len() <= limits.max_recipients);
    assert!(t.data.len() <= limits.max_message_bytes);
    assert!(
        bad_bytes(&t.data).is_none(),
        "NUL, bare CR or bare LF handed out"
    );
    super::trace::check_field(&super::trace::received(
        t,
        "fuzz.test",
        "0123abcd",
        &t.recipients,
        0,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(session: &mut Session, input: &[u8]) -> (Vec<u8>, Vec<Transaction>) {
        session.push(input);
        let mut out = Vec::new();
        let mut msgs = Vec::new();
        while let Some(a) = session.step() {
            match a {
                Action::Send(b) | Action::StartTls(b) => out.extend(b),
                Action::Close(b) => {
                    out.extend(b);
                    break;
                }
                Action::Message(t) => {
                    msgs.push(t);
                    if let Action::Send(b) = session.finish(b"250 2.0.0 queued\r\n".to_vec()) {
                        out.extend(b);
                    }
                }
                Action::Authenticate(c) => {
                    let ok = c.login == "agent" && c.password.as_str() == "pw";
                    match session.authenticated(ok.then(|| c.login.clone())) {
                        Action::Send(b) => out.extend(b),
                        Action::Close(b) => {
                            out.extend(b);
                            break;
                        }
                        _ => {}
                    }
                }
            }
        }
        (out, msgs)
    }

    /// Issue #57 (SMTP smuggling): only `<CRLF>.<CRLF>` ends DATA. A dot line with an
    /// extra CR (which smtp-proto's reader took for the end) or bare LFs around a dot
    /// never end the message: the bare line end closes the session (521, as Postfix's
    /// `smtpd_forbid_bare_newline = reject`), so what follows is never read, as a
    /// second message or as commands.
    #[test]
    fn fail_smuggling_only_crlf_dot_crlf_ends_data() {
        for (end, what) in [
            (".\r\r\n", "CR"),
            ("\n.\n", "LF"),
            (".\n", "LF"),
            ("\n.\r\n", "LF"),
            (".\rX\r\n.\r\n", "CR"),
        ] {
            let mut s = session();
            let input = format!(
                "EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nSubject: one\r\n\r\nA\r\n{end}\
                 MAIL FROM:<evil@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nSubject: two\r\n\r\nB\r\n.\r\n"
            );
            let (out, msgs) = run(&mut s, input.as_bytes());
            let out = String::from_utf8(out).unwrap();
            assert!(msgs.is_empty(), "{end:?}: {msgs:?}");
            assert!(
                out.ends_with(&format!("354 end data with <CR><LF>.<CR><LF>\r\n521 5.5.2 gw.test Error: bare <{what}> received\r\n")),
                "{end:?}: {out}"
            );
            assert!(s.is_closed(), "{end:?}");
            assert_eq!(s.step(), None, "nothing after the close");
        }
    }

    /// Dot-unstuffing and the terminator, the same however the bytes are cut.
    #[test]
    fn data_reader_unstuffs_and_ends_at_crlf_dot_crlf_in_any_cut() {
        let text = b"..first\r\n.x\r\n...\r\nplain.\r\n.\r\nAFTER";
        let want: &[u8] = b".first\r\nx\r\n..\r\nplain.\r\n";
        for cut in 1..text.len() {
            let mut r = DataReader::default();
            let mut out = Vec::new();
            let mut taken = 0;
            let mut ended = false;
            for chunk in text.chunks(cut) {
                let (used, read) = r.read(chunk, Some(&mut out));
                taken += used;
                if read == DataRead::End {
                    ended = true;
                    break;
                }
                assert_eq!((used, read), (chunk.len(), DataRead::More));
            }
            assert!(ended, "cut {cut}");
            assert_eq!(out, want, "cut {cut}");
            assert_eq!(
                &text[taken..taken + 5.min(text.len() - taken)],
                &b"AFTER"[..5.min(text.len() - taken)],
                "cut {cut}"
            );
        }
        // An empty message.
        let (used, read) = DataReader::default().read(b".\r\nQUIT", Some(&mut Vec::new()));
        assert_eq!((used, read), (3, DataRead::End));
    }

    /// A bare LF or CR is found at the same byte however the bytes are cut: the LF
    /// itself, the byte after a bare CR (a CR last in a read waits for the next).
    #[test]
    fn fail_data_reader_stops_at_a_bare_line_end_in_any_cut() {
        for (text, at, want) in [
            (&b"ok\r\nbare\nmore\r\n.\r\n"[..], 9, DataRead::BareLf),
            (b"\n", 1, DataRead::BareLf),
            (b".\n", 2, DataRead::BareLf),
            (b"ok\r\ncr\rx\r\n.\r\n", 8, DataRead::BareCr),
            (b"ok\r\r\n.\r\n", 4, DataRead::BareCr),
            (b".\r.\r\n", 3, DataRead::BareCr),
            (b"x\r\n.\r\r\n", 6, DataRead::BareCr),
        ] {
            for cut in 1..=text.len() {
                let mut r = DataReader::default();
                let mut taken = 0;
                let mut got = DataRead::More;
                for chunk in text.chunks(cut) {
                    let (used, read) = r.read(chunk, None);
                    taken += used;
                    if read != DataRead::More {
                        got = read;
                        break;
                    }
                }
                assert_eq!((taken, got), (at, want), "{text:?} cut {cut}");
            }
        }
    }

    /// Issue #57: a command line ended by a bare LF, or with a CR inside, closes the
    /// session as in DATA; NUL in a command is an error the session survives.
    #[test]
    fn fail_bare_lf_or_cr_in_a_command_closes() {
        for (input, what) in [
            (&b"EHLO c\r\nNOOP\nNOOP\r\n"[..], "LF"),
            (b"EHLO c\n", "LF"),
            (b"EHLO c\r\nMAIL FROM:<a@x>\r\r\nNOOP\r\n", "CR"),
        ] {
            let mut s = session();
            let (out, _) = run(&mut s, input);
            let out = String::from_utf8(out).unwrap();
            assert!(
                out.ends_with(&format!(
                    "521 5.5.2 gw.test Error: bare <{what}> received\r\n"
                )),
                "{input:?}: {out}"
            );
            assert!(!out.contains("250 2.0.0 ok"), "nothing after: {out}");
            assert!(s.is_closed());
        }
        let mut s = session();
        let (out, _) = run(&mut s, b"EHLO c\r\nNO\0OP\r\nNOOP\r\n");
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.ends_with("500 5.5.2 NUL in a command\r\n250 2.0.0 ok\r\n"),
            "{out}"
        );
    }

    /// A session whose listener trusts its client with XFORWARD.
    fn xforward_session() -> Session {
        let mut s = session();
        s.set_peer(IpAddr::from([127, 0, 0, 1]));
        s.allow_xforward();
        s
    }

    const MAIL: &str = "MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nSubject: x\r\n\r\nhi\r\n.\r\n";

    /// Issue #57: on a trusted listener, XFORWARD (advertised after EHLO) names the
    /// client the message carries, for one transaction; what the session itself saw
    /// (HELO, peer, EHLO) is kept beside it.
    #[test]
    fn xforward_on_a_trusted_listener_names_the_client_for_one_transaction() {
        let mut s = xforward_session();
        let input = format!(
            "EHLO postfix.example\r\n\
             XFORWARD NAME=mail.client.example ADDR=192.0.2.7 PORT=40000\r\n\
             xforward PROTO=ESMTP HELO=client+2Eexample IDENT=4Q SOURCE=REMOTE\r\n{MAIL}{MAIL}"
        );
        let (out, msgs) = run(&mut s, input.as_bytes());
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.contains("250-XFORWARD NAME ADDR PORT PROTO HELO IDENT SOURCE\r\n"),
            "{out}"
        );
        assert_eq!(out.matches("250 2.0.0 ok\r\n").count(), 2, "{out}");
        assert_eq!(msgs.len(), 2);
        let c = &msgs[0].client;
        assert_eq!(c.helo, "postfix.example");
        assert!(c.esmtp);
        assert_eq!(c.peer, Some(IpAddr::from([127, 0, 0, 1])));
        let f = c.forwarded.as_ref().unwrap();
        assert_eq!(f.addr, Some(IpAddr::from([192, 0, 2, 7])));
        assert_eq!(f.helo.as_deref(), Some("client.example"));
        assert_eq!(c.describe(), "client.example [192.0.2.7]");
        assert_eq!(
            msgs[1].client.forwarded, None,
            "the next transaction has its own XFORWARD or none"
        );
        assert_eq!(msgs[1].client.describe(), "postfix.example [127.0.0.1]");
        // RSET forgets it too.
        let mut s = xforward_session();
        let (_, msgs) = run(
            &mut s,
            format!("EHLO p\r\nXFORWARD ADDR=192.0.2.7\r\nRSET\r\n{MAIL}").as_bytes(),
        );
        assert_eq!(msgs[0].client.forwarded, None);
    }

    /// Issue #57: XFORWARD from a client the listener does not trust is refused as
    /// Postfix refuses it (550 5.7.0) and changes nothing; on a trusted one, only
    /// after EHLO and before MAIL, and a bad attribute (501) takes none of the others.
    #[test]
    fn fail_xforward_untrusted_in_a_transaction_or_malformed() {
        let mut s = session();
        s.set_peer(IpAddr::from([127, 0, 0, 1]));
        let (out, msgs) = run(
            &mut s,
            format!("EHLO c\r\nXFORWARD ADDR=192.0.2.7 HELO=forged.example\r\n{MAIL}").as_bytes(),
        );
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains("XFORWARD"), "not advertised: {out}");
        assert!(
            out.contains("550 5.7.0 insufficient authorization\r\n"),
            "{out}"
        );
        assert_eq!(msgs[0].client.forwarded, None);
        assert_eq!(msgs[0].client.describe(), "c [127.0.0.1]");

        let long = "a".repeat(256);
        for (cmd, reply) in [
            ("XFORWARD ADDR=192.0.2.7\r\n", "503 5.5.1 send EHLO first"),
            (
                "EHLO c\r\nMAIL FROM:<a@x>\r\nXFORWARD ADDR=192.0.2.7\r\n",
                "503 5.5.1 MAIL transaction in progress",
            ),
            (
                "EHLO c\r\nXFORWARD\r\n",
                "501 5.5.4 syntax: XFORWARD attribute=value...",
            ),
            (
                "EHLO c\r\nXFORWARD ADDR=192.0.2.7 LOGIN=root\r\n",
                "501 5.5.4 unknown XFORWARD attribute",
            ),
            (
                &format!("EHLO c\r\nXFORWARD ADDR=192.0.2.7 HELO={long}\r\n"),
                "501 5.5.4 attribute value too long",
            ),
            (
                "EHLO c\r\nXFORWARD ADDR=192.0.2.7 HELO=a+0D+0\r\n",
                "501 5.5.4 bad xtext in HELO",
            ),
            (
                "EHLO c\r\nXFORWARD ADDR=192.0.2.7 PORT=99999\r\n",
                "501 5.5.4 bad PORT syntax",
            ),
        ] {
            let mut s = xforward_session();
            let (out, _) = run(&mut s, cmd.as_bytes());
            let out = String::from_utf8(out).unwrap();
            assert!(out.ends_with(&format!("{reply}\r\n")), "{cmd:?}: {out}");
            let (_, msgs) = run(&mut s, format!("RSET\r\nEHLO c\r\n{MAIL}").as_bytes());
            assert_eq!(msgs[0].client.forwarded, None, "{cmd:?}: none taken");
        }
        // `XFORWARDX` is another (unknown) command, not XFORWARD.
        let mut s = xforward_session();
        let (out, _) = run(&mut s, b"EHLO c\r\nXFORWARDX ADDR=1.2.3.4\r\n");
        assert!(String::from_utf8(out)
            .unwrap()
            .ends_with("500 5.5.1 unknown command\r\n"));
    }

    /// Issue #57, signals: what the session refuses itself is handed to the loop to
    /// log, with the transaction it concerned: a RCPT refused for relaying names its
    /// address and the MAIL FROM, a message over the limit its recipients, a MAIL
    /// without a login none; the closing reply says so.
    #[test]
    fn fail_refusals_in_the_session_are_noted_with_their_transaction() {
        let mut s = session();
        s.accept_domains(vec!["example.org".into()]);
        let big = "x".repeat(2000);
        let (_, msgs) = run(
            &mut s,
            format!(
                "EHLO c\r\nMAIL FROM:<>\r\nRCPT TO:<v@victim.example>\r\nRCPT TO:<b@example.org>\r\n\
                 DATA\r\nSubject: x\r\n\r\n{big}\r\n.\r\nFROB\r\n"
            )
            .as_bytes(),
        );
        assert!(msgs.is_empty());
        let r = s.take_refusals();
        assert_eq!(r.len(), 3, "{r:?}");
        assert_eq!(
            (
                r[0].code,
                r[0].status,
                r[0].mail_from.as_deref(),
                &r[0].recipients[..]
            ),
            (
                550,
                "5.7.1",
                Some(""),
                &["v@victim.example".to_string()][..]
            )
        );
        assert_eq!(
            (
                r[1].code,
                r[1].status,
                r[1].mail_from.as_deref(),
                &r[1].recipients[..]
            ),
            (552, "5.3.4", Some(""), &["b@example.org".to_string()][..])
        );
        assert_eq!(
            (r[2].code, r[2].mail_from.as_deref(), r[2].recipients.len()),
            (500, None, 0)
        );
        assert!(r.iter().all(|r| !r.closed));
        assert!(s.take_refusals().is_empty(), "each is taken once");

        let mut s = auth_session();
        let _ = run(&mut s, b"EHLO c\r\nMAIL FROM:<a@x>\r\n");
        let r = s.take_refusals();
        assert_eq!(
            (r[0].code, r[0].status, r[0].mail_from.as_deref()),
            (530, "5.7.0", None)
        );
        assert_eq!(r[0].text, "authentication required");

        let mut s = session();
        let _ = run(
            &mut s,
            b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nx\ny\r\n",
        );
        let r = s.take_refusals();
        assert_eq!(
            (r[0].code, r[0].closed, r[0].mail_from.as_deref()),
            (521, true, Some("a@x"))
        );
    }

    /// Every enhanced status code the session refuses with is one the metrics label
    /// by name ([`STATUSES`]), not `other`: read off this file's replies.
    #[test]
    fn every_refusal_status_is_a_known_label() {
        let source = include_str!("session.rs");
        let mut found = 0;
        for (i, _) in source.match_indices("reply(") {
            let rest = source[i + 6..].trim_start();
            let Some((code, rest)) = rest.split_once(',') else {
                continue;
            };
            let Ok(code) = code.trim().parse::<u16>() else {
                continue;
            };
            let Some(status) = rest
                .trim_start()
                .strip_prefix('"')
                .and_then(|r| r.split('"').next())
            else {
                continue;
            };
            if code >= 400 {
                found += 1;
                assert!(
                    STATUSES.contains(&status),
                    "{code} {status} is not in STATUSES"
                );
            }
        }
        assert!(found > 30, "only {found} replies read");
    }

    /// Issue #57: an inbound listener exposed on port 25 is no relay: RCPT for a
    /// domain it does not serve is refused.
    #[test]
    fn fail_relay_rcpt_outside_the_local_domains() {
        let mut s = session();
        s.accept_domains(vec!["example.org".into(), "*.corp.example".into()]);
        let (out, _) = run(
            &mut s,
            b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<bob@example.org>\r\nRCPT TO:<v@victim.example>\r\n\
              RCPT TO:<c@eu.corp.example>\r\nRCPT TO:<d@corp.example>\r\nRCPT TO:<e@example.org.victim.example>\r\n",
        );
        let out = String::from_utf8(out).unwrap();
        let mut quoted = session();
        quoted.accept_domains(vec!["example.org".into()]);
        let (q, _) = run(
            &mut quoted,
            b"EHLO c\r\nMAIL FROM:<a@x.example>\r\nRCPT TO:<\"victim@evil.example> ORCPT=rfc822;x\"@example.org>\r\n",
        );
        assert!(String::from_utf8(q)
            .unwrap()
            .ends_with("553 5.1.3 bad recipient address\r\n"));
        let codes: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.starts_with("250 2.1.0"))
            .skip(1)
            .map(|l| &l[..3])
            .collect();
        assert_eq!(codes, ["250", "550", "250", "550", "550"], "{out}");
        assert!(is_local("x@EXAMPLE.org.", &["example.org".into()]));
        // Quoted local parts, old routing syntax, literals: refused as addresses.
        for bad in [
            "victim@evil.example> ORCPT=rfc822;x@example.org",
            "victim%evil.example@example.org",
            "evil.example!victim@example.org",
            "a b@example.org",
            "a@[192.0.2.1]",
            "@a.example:b@example.org",
            "a@example..org",
            "bob\u{202e}gro.elpmaxe@example.org",
            "bob\u{200b}@example.org",
            "@example.org",
            "a@",
            "a",
        ] {
            assert!(!plain_address(bad), "{bad}");
        }
        for good in [
            "bob@example.org",
            "o'brien+tag@eu.corp.example",
            "jörg@münchen.example",
            "x@example.org.",
        ] {
            assert!(plain_address(good), "{good}");
        }
        assert!(is_local("x@anything", &["*".into()]));
        assert!(!is_local("no-domain", &["*".into()]));
    }

    /// A session over TLS that requires SMTP AUTH (the `agent`/`pw` login verifies).
    fn auth_session() -> Session {
        let mut s = Session::new(
            "gw.test",
            SessionLimits {
                max_message_bytes: 1000,
                max_recipients: 2,
                max_errors: 10,
            },
            false,
            true,
            false,
        );
        s.require_auth();
        s
    }

    fn b64(s: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    /// Issue #57: AUTH PLAIN (with and without an initial response) and LOGIN prove a
    /// login that the message then carries; without one, MAIL is refused.
    #[test]
    fn auth_plain_and_login_prove_the_login_the_message_carries() {
        let mail = "MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nSubject: x\r\n\r\nhi\r\n.\r\n";
        for auth in [
            format!("AUTH PLAIN {}\r\n", b64(b"\0agent\0pw")),
            format!("AUTH PLAIN\r\n{}\r\n", b64(b"agent\0agent\0pw")),
            format!("AUTH LOGIN\r\n{}\r\n{}\r\n", b64(b"agent"), b64(b"pw")),
            format!("AUTH LOGIN {}\r\n{}\r\n", b64(b"agent"), b64(b"pw")),
        ] {
            let mut s = auth_session();
            let (out, msgs) = run(&mut s, format!("EHLO c\r\n{auth}{mail}").as_bytes());
            let out = String::from_utf8(out).unwrap();
            assert!(
                out.contains("AUTH LOGIN PLAIN") || out.contains("AUTH PLAIN LOGIN"),
                "{out}"
            );
            assert!(out.contains("235 2.7.0"), "{auth:?}: {out}");
            assert_eq!(msgs.len(), 1, "{auth:?}: {out}");
            assert_eq!(msgs[0].login.as_deref(), Some("agent"));
        }
    }

    #[test]
    fn fail_auth_wrong_cancelled_malformed_or_acting_for_another() {
        for (auth, code) in [
            (
                format!("AUTH PLAIN {}\r\n", b64(b"\0agent\0guess")),
                "535 5.7.8",
            ),
            (
                format!("AUTH PLAIN {}\r\n", b64(b"mallory\0agent\0pw")),
                "535 5.7.8",
            ),
            (format!("AUTH PLAIN {}\r\n", b64(b"agent\0pw")), "501 5.5.2"),
            ("AUTH PLAIN not-base64!\r\n".to_string(), "501 5.5.2"),
            ("AUTH LOGIN\r\n*\r\n".to_string(), "501 5.0.0"),
            ("AUTH CRAM-MD5\r\n".to_string(), "504 5.5.4"),
        ] {
            let mut s = auth_session();
            let (out, msgs) = run(
                &mut s,
                format!("EHLO c\r\n{auth}MAIL FROM:<a@x>\r\n").as_bytes(),
            );
            let out = String::from_utf8(out).unwrap();
            assert!(out.contains(code), "{auth:?}: {out}");
            assert!(
                out.ends_with("530 5.7.0 authentication required\r\n"),
                "{auth:?}: {out}"
            );
            assert!(msgs.is_empty());
        }
        // Once proved, not again; and a session that does not require it does not
        // offer it.
        let mut s = auth_session();
        let twice = format!(
            "EHLO c\r\nAUTH PLAIN {0}\r\nAUTH PLAIN {0}\r\n",
            b64(b"\0agent\0pw")
        );
        let (out, _) = run(&mut s, twice.as_bytes());
        assert!(String::from_utf8(out)
            .unwrap()
            .ends_with("503 5.5.1 already authenticated\r\n"));
        let mut plain = session();
        let (out, _) = run(
            &mut plain,
            format!("EHLO c\r\nAUTH PLAIN {}\r\n", b64(b"\0agent\0pw")).as_bytes(),
        );
        let out = String::from_utf8(out).unwrap();
        assert!(
            !out.contains("AUTH PLAIN LOGIN") && out.ends_with("502 5.5.1 AUTH not offered\r\n"),
            "{out}"
        );
    }

    fn session() -> Session {
        Session::new(
            "gw.test",
            SessionLimits {
                max_message_bytes: 1000,
                max_recipients: 2,
                max_errors: 5,
            },
            true,
            false,
            false,
        )
    }

    #[test]
    fn pipelined_transaction() {
        let mut s = session();
        let (out, msgs) = run(
            &mut s,
            b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nSubject: x\r\n\r\n..dot\r\n.\r\nQUIT\r\n",
        );
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("SIZE 1000"), "{out}");
        assert!(out.contains("STARTTLS"), "{out}");
        assert!(
            out.ends_with("250 2.0.0 queued\r\n221 2.0.0 bye\r\n"),
            "{out}"
        );
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].mail_from, "a@x");
        assert_eq!(msgs[0].recipients, ["b@y"]);
        assert_eq!(msgs[0].data, b"Subject: x\r\n\r\n.dot\r\n");
    }

    #[test]
    fn fail_over_size_is_read_and_refused() {
        let mut s = session();
        let mut input = b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n".to_vec();
        for _ in 0..100 {
            input.extend_from_slice(b"0123456789012345678901234567890123456789\r\n");
        }
        input.extend_from_slice(b".\r\nNOOP\r\n");
        let (out, msgs) = run(&mut s, &input);
        let out = String::from_utf8(out).unwrap();
        assert!(msgs.is_empty());
        assert!(out.contains("552 5.3.4"), "{out}");
        assert!(
            out.ends_with("250 2.0.0 ok\r\n"),
            "the session goes on: {out}"
        );
    }

    /// Issue #57: a bare LF or CR in a message closes the session with 521 (Postfix's
    /// `smtpd_forbid_bare_newline = reject`, code 521); NUL is refused (550) and the
    /// session goes on; `<CRLF>.<CRLF>` after CRLF lines is a message.
    #[test]
    fn fail_bare_lf_bare_cr_and_nul_in_data() {
        for (body, end) in [
            (
                &b"a\nb\r\n"[..],
                "521 5.5.2 gw.test Error: bare <LF> received\r\n",
            ),
            (
                b"a\rb\r\n",
                "521 5.5.2 gw.test Error: bare <CR> received\r\n",
            ),
            (b"a\r", "521 5.5.2 gw.test Error: bare <CR> received\r\n"),
            (
                b"a\0b\r\n",
                "550 5.6.0 NUL in the message\r\n250 2.0.0 ok\r\n",
            ),
        ] {
            let mut s = session();
            let mut input = b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n".to_vec();
            input.extend_from_slice(body);
            input.extend_from_slice(b".\r\nNOOP\r\n");
            let (out, msgs) = run(&mut s, &input);
            assert!(msgs.is_empty());
            let out = String::from_utf8(out).unwrap();
            assert!(out.ends_with(end), "{body:?}: {out}");
        }
        let mut s = session();
        let (_, msgs) = run(
            &mut s,
            b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\nA\r\n\r\nB\r\n.\r\n",
        );
        assert_eq!(msgs[0].data, b"A\r\n\r\nB\r\n");
    }

    #[test]
    fn fail_too_many_recipients_and_errors_close() {
        let mut s = session();
        let (out, _) = run(
            &mut s,
            b"EHLO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<1@y>\r\nRCPT TO:<2@y>\r\nRCPT TO:<3@y>\r\n",
        );
        assert!(String::from_utf8_lossy(&out).ends_with("452 4.5.3 too many recipients\r\n"));
        let (out, _) = run(&mut s, b"garbage\r\nfoo\r\nbar\r\nbaz\r\nqux\r\n");
        let out = String::from_utf8_lossy(&out);
        assert!(
            out.ends_with("421 4.7.0 too many errors, closing\r\n"),
            "{out}"
        );
        assert!(s.is_closed());
    }

    #[test]
    fn starttls_drops_pipelined_plaintext() {
        let mut s = session();
        s.push(b"EHLO c\r\nSTARTTLS\r\nMAIL FROM:<evil@x>\r\n");
        assert!(matches!(s.step(), Some(Action::Send(_))));
        assert!(matches!(s.step(), Some(Action::StartTls(_))));
        s.tls_started();
        assert_eq!(s.step(), None, "the injected command is gone");
        let (out, _) = run(&mut s, b"MAIL FROM:<a@x>\r\n");
        assert!(
            String::from_utf8_lossy(&out).starts_with("503"),
            "EHLO again first"
        );
    }

    #[test]
    fn fail_bare_cr_in_a_command() {
        let mut s = session();
        let (out, _) = run(&mut s, b"EHLO c\r\nSTARTT\rLS\r\nNOOP\r\n");
        let out = String::from_utf8_lossy(&out);
        assert!(
            out.ends_with("521 5.5.2 gw.test Error: bare <CR> received\r\n"),
            "{out}"
        );
        assert!(!out.contains("220 2.0.0"), "not taken for STARTTLS: {out}");
    }

    #[test]
    fn fail_mail_without_tls_when_required() {
        let mut s = Session::new("gw", SessionLimits::default(), true, false, true);
        let (out, _) = run(&mut s, b"EHLO c\r\nMAIL FROM:<a@x>\r\n");
        assert!(String::from_utf8_lossy(&out).ends_with("530 5.7.0 must issue STARTTLS first\r\n"));
    }

    #[test]
    fn fail_overlong_line() {
        // In one read, or trickled in pieces (the receiver's own bound): a 5xx either
        // way, and the session goes on.
        for piece in [20_000, 1000] {
            let mut s = session();
            let mut line = b"NOOP ".to_vec();
            line.extend(std::iter::repeat_n(b'a', 10_000));
            line.extend_from_slice(b"\r\n");
            let mut out = Vec::new();
            for chunk in line.chunks(piece) {
                out.extend(run(&mut s, chunk).0);
            }
            out.extend(run(&mut s, b"NOOP\r\n").0);
            let out = String::from_utf8_lossy(&out);
            assert!(
                out.starts_with("500 5.5.2 line too long\r\n") || out.starts_with("501"),
                "{piece}: {out}"
            );
            assert!(out.ends_with("250 2.0.0 ok\r\n"), "{out}");
        }
    }
}
