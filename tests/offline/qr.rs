//! Across the gap by QR code: the request and the response through PNG pictures
//! (written by the command line, read by `rqrr`), byte for byte.

use super::kit::{self, read};

#[test]
fn a_request_and_its_response_cross_as_qr_codes_byte_for_byte() {
    let h = kit::smime();
    let plain = h.compose("plain.eml", "req-qr", "Across the gap as pictures.");
    let (req, png) = (h.p("r.req"), h.p("r.png"));
    h.request("smime", &plain, &req, &["--qr", &png]);
    let picture = read(&png);
    assert!(picture.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert_eq!(
        mailseal::offline::qr::decode_png(&picture).expect("decodes"),
        read(&req)
    );
    // The offline host reads the request from the picture and answers with one.
    let (resp, resp_png) = (h.p("r.resp"), h.p("resp.png"));
    h.ok(
        "offline",
        &[
            "sign", "--qr-in", &png, "--yes", "--out", &resp, "--qr", &resp_png,
        ],
        b"",
    );
    assert_eq!(
        mailseal::offline::qr::decode_png(&read(&resp_png)).expect("decodes"),
        read(&resp)
    );
    let msg = h.p("m.eml");
    h.ok(
        "connected",
        &["assemble", &req, "--qr", &resp_png, "--out", &msg],
        b"",
    );
    h.ok("bob", &["open", "--in", &msg], b"");
}

#[test]
fn a_long_text_takes_a_sequence_and_a_lost_piece_is_named() {
    use mailseal::offline::qr::{decode_png, encode_png};
    let text: Vec<u8> = (0..5000u32).map(|i| b'A' + (i * 7 % 26) as u8).collect();
    let png = encode_png(&text).expect("encodes");
    assert_eq!(decode_png(&png).expect("decodes"), text);
    // Half the picture gone: the pieces in it do not make the text.
    let decoder = png::Decoder::new(std::io::Cursor::new(&png));
    let mut reader = decoder.read_info().expect("png");
    let mut buf = vec![0u8; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("frame");
    let half = (info.height / 2) as usize * info.line_size;
    buf[half..].fill(255);
    let mut cut = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut cut, info.width, info.height);
        enc.set_color(png::ColorType::Grayscale);
        let mut w = enc.write_header().expect("header");
        w.write_image_data(&buf).expect("data");
    }
    let err = decode_png(&cut).expect_err("pieces missing");
    assert!(err.to_string().contains("were not read"), "{err}");
    // Not a PNG, or a PNG without our codes.
    assert!(decode_png(b"not a png").is_err());
    assert!(decode_png(&cut[..cut.len() / 3]).is_err());
}

#[test]
fn zbar_reads_the_pictures_independently() {
    use std::process::Command;
    if !super::common::peer_available(
        "zbarimg (zbar-tools)",
        Command::new("zbarimg").arg("--version"),
    ) {
        return;
    }
    let h = kit::smime();
    let plain = h.compose("plain.eml", "req-zbar", "Read by another decoder.");
    let (req, png) = (h.p("r.req"), h.p("r.png"));
    h.request("smime", &plain, &req, &["--qr", &png]);
    let out = Command::new("zbarimg")
        .args(["--xml", "-q", &png])
        .output()
        .expect("zbarimg runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each symbol's data: "MSQR i/n TAG\n" and its piece.
    let xml = String::from_utf8(out.stdout).expect("utf-8");
    let mut pieces: Vec<(usize, String)> = xml
        .split("<data><![CDATA[")
        .skip(1)
        .map(|d| d.split("]]></data>").next().expect("cdata end").to_string())
        .map(|d| {
            let (head, body) = d.split_once('\n').expect("piece header");
            let place = head.split(' ').nth(1).expect("i/n");
            let i: usize = place.split('/').next().expect("i").parse().expect("number");
            (i, body.to_string())
        })
        .collect();
    pieces.sort();
    assert!(
        pieces.len() >= 2,
        "a 2 KiB message's request takes several codes"
    );
    let text: String = pieces.into_iter().map(|(_, p)| p).collect();
    assert_eq!(text.as_bytes(), read(&req));
}
