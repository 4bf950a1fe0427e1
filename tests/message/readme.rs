//! `cargo run --release -- demo`, the README's first command: the tour in plain words.
//! The README's and the guide's shell blocks run in `docs_blocks.rs`.

use crate::common;

#[test]
fn demo_runs() {
    let out = common::run(&["demo"], b"");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("refused as expected (exit 6)"), "{stdout}");
    assert!(stdout.contains("SMTP redelivery: duplicate"), "{stdout}");
    // The MLS authentication service turns away a group made under a forged identity.
    assert!(
        stdout.contains(
            "refused as expected (exit 4): unauthenticated MLS credential: ann@mls.example"
        ),
        "{stdout}"
    );
    // Offline signing: assembled and opened; a changed request refused offline.
    assert!(stdout.contains("signed offline; assembled"), "{stdout}");
    assert!(
        stdout.contains("the same request with another To: refused as expected (exit 4)"),
        "{stdout}"
    );
    assert!(stdout.contains("demo finished"), "{stdout}");
    // Plain words: no Rust debug formatting, no failure marks for expected refusals.
    for debug in [
        "Some(",
        "None",
        "{ ",
        "FAIL",
        "\"delivered",
        "Deliver",
        "Held (",
    ] {
        assert!(!stdout.contains(debug), "{debug:?} in\n{stdout}");
    }
}
