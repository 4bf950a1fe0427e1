//! Shared by the targets that reach Sequoia's parser (included with `#[path]`), and
//! by `mime_split_diff` for mail-parser's.
//!
//! mailseal catches the panics raised inside Sequoia's parser (an upstream `unwrap`
//! on truncated SEIPDv1, see `openpgp::open::guarded`) and refuses the message, but
//! libFuzzer's panic hook would abort on them even so.

/// Lets panics raised in Sequoia's own files through; every other panic still aborts.
#[allow(dead_code)]
pub fn let_through() {
    let_through_from("sequoia-openpgp-");
}

/// Lets panics raised in files whose path contains `crate_dir` (a crate's source
/// folder, `name-`) through to `catch_unwind`; every other panic still aborts.
pub fn let_through_from(crate_dir: &'static str) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info
            .location()
            .is_some_and(|l| l.file().contains(crate_dir))
        {
            return;
        }
        previous(info)
    }));
}
