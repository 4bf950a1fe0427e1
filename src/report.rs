//! An error a `main` can return: `fn main() -> Result<(), mailseal::Report>`.
//!
//! A `main` that returns `Err` prints the error's `Debug`; for the library's error
//! enums that is their structure (`Seal(NoRecipientKey { address: ... })`), where their
//! `Display` is the sentence meant for a person. [`Report`] takes any error by `?` and
//! prints, as its `Debug`, the `Display` of the error and of each of its sources:
//!
//! ```text
//! Error: no certificate for bob@example.org in the key store
//! ```

use std::error::Error;
use std::fmt;

/// Any error, shown as a person reads it: its `Display` and the `Display` of each
/// source, one per line. A `main` that returns `Err` prints the error's `Debug`; for
/// the library's error enums that is their structure (`Seal(NoRecipientKey { address:
/// ... })`), where their `Display` is the sentence meant for a person:
///
/// ```
/// use mailseal::keystore::DirectoryStore;
///
/// fn main() -> Result<(), mailseal::Report> {
///     let dir = tempfile::tempdir()?;
///     let _store = DirectoryStore::open(dir.path().join("keys"))?;
///     Ok(())
/// }
/// ```
///
/// It is not itself an
/// [`Error`] (so that every error converts into it by `?`); [`Report::error`] gives the
/// error back, for [`crate::Classify`] or a `downcast_ref`.
pub struct Report(Box<dyn Error + Send + Sync + 'static>);

impl Report {
    /// The error reported.
    pub fn error(&self) -> &(dyn Error + Send + Sync + 'static) {
        self.0.as_ref()
    }
}

impl<E: Error + Send + Sync + 'static> From<E> for Report {
    fn from(e: E) -> Self {
        Report(Box::new(e))
    }
}

/// How many characters of one error's message a report shows: the command line's
/// bound on an error line.
const REPORT_CHARS: usize = 1000;

/// An error's message as a report shows it: escaped and bounded by
/// [`crate::error::shown`], so that text a message put into an error (a header value,
/// an identity) can neither forge a line nor drive the terminal, whichever layer
/// forgot to quote it.
fn line(e: &dyn Error) -> String {
    crate::error::shown(&e.to_string(), REPORT_CHARS)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&line(self.0.as_ref()))
    }
}

/// The `Display` of the error, then `caused by:` and each source's: what `main`
/// prints after `Error: `.
impl fmt::Debug for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = line(self.0.as_ref());
        f.write_str(&shown)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            let text = line(s);
            // A layer that shows its source in its own message (`#[error(transparent)]`,
            // `"...: {0}"`) is not repeated.
            if !shown.contains(&text) {
                write!(f, "\n  caused by: {text}")?;
                shown = text;
            }
            source = s.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_reads_as_display_with_each_new_source() {
        let refused = crate::keystore::KeyStoreError::Io {
            path: "/nowhere".into(),
            source: std::io::Error::other("disk on fire"),
        };
        let report = Report::from(refused);
        let debug = format!("{report:?}");
        assert_eq!(debug, "key store I/O on /nowhere: disk on fire");
        assert!(!debug.contains("Io {"), "{debug}");
        let send = crate::SendError::TooLarge {
            size: 10,
            limit: 5,
            who: "the receiver".into(),
        };
        assert_eq!(
            format!("{:?}", Report::from(send)),
            format!(
                "{}",
                Report::from(crate::SendError::TooLarge {
                    size: 10,
                    limit: 5,
                    who: "the receiver".into()
                })
            )
        );
        // A source its parent does not show is added on a line of its own.
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl fmt::Display for Outer {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("reading the message")
            }
        }
        impl Error for Outer {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }
        let debug = format!("{:?}", Report::from(Outer(std::io::Error::other("gone"))));
        assert_eq!(debug, "reading the message\n  caused by: gone");
    }
}
