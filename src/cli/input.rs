//! The one way every command names what it reads (a message, a request, a response,
//! an envelope): `FILE`, `-` or nothing for standard input, and `--in FILE` as the
//! same thing. A file that cannot be read is an I/O failure (exit 1), never "malformed".

use std::path::{Path, PathBuf};

use clap::Args;

/// The input of a command that reads one thing.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct Input {
    /// The input file; `-` or none: standard input.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// The same as FILE.
    #[arg(long = "in", value_name = "FILE", conflicts_with = "file")]
    input: Option<PathBuf>,
}

impl Input {
    /// The file named, or `None` for standard input.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.input
            .as_deref()
            .or(self.file.as_deref())
            .filter(|p| !is_stdin(p))
    }
}

/// Whether `path` is `-`, standard input.
pub(crate) fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}
