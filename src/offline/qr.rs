//! Requests and responses across the gap as QR codes: the armored text cut into
//! pieces, one QR code each (error correction level M), stacked in one PNG that the
//! operator can look at in any viewer and a camera or scanner can read. Each code
//! says which piece it is and a digest of the whole, so pieces of two texts never mix
//! and a missing piece is named.
//!
//! Encoding is the `qrcode` crate, decoding `rqrr`, the picture `png`; nothing here
//! parses a QR code by hand.

use sha2::{Digest, Sha256};

/// Bytes of text per QR code (version 40-M holds 2331; smaller codes read better).
const PIECE: usize = 1400;
/// Pixels per module, and quiet-zone modules around each code.
const SCALE: usize = 4;
const QUIET: usize = 4;
/// The largest picture read, each side.
const MAX_SIDE: u32 = 16384;
/// The most pieces one text may take.
const MAX_PIECES: usize = 64;

/// Why a QR picture could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QrError {
    /// The text needs more QR codes than one picture holds (64).
    #[error("the text needs more than {MAX_PIECES} QR codes; carry it as a file")]
    TooLong,
    /// The encoder refused.
    #[error("QR encoding: {0}")]
    Encode(#[source] qrcode::types::QrError),
    /// The PNG could not be written or read.
    #[error("PNG: {0}")]
    Png(String),
    /// The picture holds no complete set of pieces.
    #[error("QR codes: {0}")]
    Decode(String),
}

impl crate::error::Classify for QrError {
    fn a2a_error(&self) -> crate::error::A2aErrorType {
        crate::error::A2aErrorType::InvalidRequestError
    }
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            Self::TooLong => crate::error::ErrorKind::InvalidArgument,
            _ => crate::error::ErrorKind::Malformed,
        }
    }
}

fn tag(text: &[u8]) -> String {
    crate::hex::hex(&Sha256::digest(text)[..6])
}

/// `text` as a PNG of one or more QR codes, stacked top to bottom.
pub fn encode_png(text: &[u8]) -> Result<Vec<u8>, QrError> {
    let pieces: Vec<&[u8]> = text.chunks(PIECE).collect();
    if pieces.len() > MAX_PIECES {
        return Err(QrError::TooLong);
    }
    let id = tag(text);
    let mut data = Vec::with_capacity(pieces.len());
    let mut codes = Vec::with_capacity(pieces.len());
    for (i, piece) in pieces.iter().enumerate() {
        let mut d = format!("MSQR {}/{} {id}\n", i + 1, pieces.len()).into_bytes();
        d.extend_from_slice(piece);
        codes.push(
            qrcode::QrCode::with_error_correction_level(&d, qrcode::EcLevel::M)
                .map_err(QrError::Encode)?,
        );
        data.push(d);
    }
    // `rqrr` misses a few of the codes the encoder makes once they are stacked (one
    // text in 200 of two or three pieces, measured with `examples/qr_probe.rs`; each
    // such code reads alone). A code the whole picture does not give back is made
    // again one version larger (another layout of the same data), so that no picture
    // we write fails our own reader.
    let mut tries = 0;
    let (side, height, pixels) = loop {
        let picture = draw(&codes);
        let unread = unread(&picture, &data);
        if unread.is_empty() {
            break picture;
        }
        tries += 1;
        if tries > RETRIES {
            return Err(QrError::Decode(
                "the QR codes made are not read back; carry the text as a file".into(),
            ));
        }
        for i in unread {
            let v = match codes[i].version() {
                qrcode::Version::Normal(v) if v < 40 => v + 1,
                _ => {
                    return Err(QrError::Decode(
                        "the QR codes made are not read back; carry the text as a file".into(),
                    ))
                }
            };
            codes[i] = qrcode::QrCode::with_version(
                &data[i],
                qrcode::Version::Normal(v),
                qrcode::EcLevel::M,
            )
            .map_err(QrError::Encode)?;
        }
    };
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, side as u32, height as u32);
        encoder.set_color(png::ColorType::Grayscale);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder
            .write_header()
            .map_err(|e| QrError::Png(e.to_string()))?;
        writer
            .write_image_data(&pixels)
            .map_err(|e| QrError::Png(e.to_string()))?;
    }
    Ok(out)
}

/// Larger versions tried for a piece our reader misses.
const RETRIES: u8 = 3;

/// The indices of `data` whose code is not read back from `picture`.
fn unread(picture: &(usize, usize, Vec<u8>), data: &[Vec<u8>]) -> Vec<usize> {
    let (w, h, pixels) = picture;
    let read = read_all(*w, *h, pixels);
    (0..data.len())
        .filter(|&i| !read.contains(&data[i]))
        .collect()
}

/// What every QR code `rqrr` finds in a grey picture carries: found in the whole
/// picture, and again in each band of rows between all-white rows. Stacked codes
/// can hide each other from `rqrr`'s finder-pattern grouping (a code it reads alone
/// it misses among others, about one picture in 200 of ours); each band holds one.
fn read_all(w: usize, h: usize, pixels: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut scan = |top: usize, rows: usize| {
        let mut image =
            rqrr::PreparedImage::prepare_from_greyscale(w, rows, |x, y| pixels[(top + y) * w + x]);
        for grid in image.detect_grids() {
            let mut data = Vec::new();
            if grid.decode_to(&mut data).is_ok() && !out.contains(&data) {
                out.push(data);
            }
        }
    };
    scan(0, h);
    // Bands: runs of rows with a dark pixel, with the white rows around them.
    let white = |y: usize| pixels[y * w..(y + 1) * w].iter().all(|&p| p >= 128);
    let mut bands = Vec::new();
    let mut y = 0;
    while y < h {
        if white(y) {
            y += 1;
            continue;
        }
        let start = y;
        while y < h && !white(y) {
            y += 1;
        }
        bands.push((start, y));
    }
    if bands.len() > 1 {
        for (i, &(start, end)) in bands.iter().enumerate() {
            // Half the white rows to each neighbour: the quiet zone stays.
            let top = if i == 0 {
                0
            } else {
                (bands[i - 1].1 + start) / 2
            };
            let bottom = bands
                .get(i + 1)
                .map_or(h, |next| (end + next.0).div_ceil(2));
            scan(top, bottom - top);
        }
    }
    out
}

/// `codes` drawn top to bottom, each in its quiet zone: width, height, grey levels.
fn draw(codes: &[qrcode::QrCode]) -> (usize, usize, Vec<u8>) {
    let side = codes
        .iter()
        .map(|c| (c.width() + 2 * QUIET) * SCALE)
        .max()
        .unwrap_or(0);
    let height: usize = codes.iter().map(|c| (c.width() + 2 * QUIET) * SCALE).sum();
    let mut pixels = vec![255u8; side * height];
    let mut top = 0;
    for code in codes {
        let w = code.width();
        let colors = code.to_colors();
        for y in 0..w {
            for x in 0..w {
                if colors[y * w + x] == qrcode::Color::Dark {
                    for dy in 0..SCALE {
                        let row = top + (y + QUIET) * SCALE + dy;
                        let start = row * side + (x + QUIET) * SCALE;
                        pixels[start..start + SCALE].fill(0);
                    }
                }
            }
        }
        top += (w + 2 * QUIET) * SCALE;
    }
    (side, height, pixels)
}

/// Grey levels of a PNG (any colour type, 8 or 16 bits), with its width and height.
fn grey(png_bytes: &[u8]) -> Result<(usize, usize, Vec<u8>), QrError> {
    let png_err = |e: png::DecodingError| QrError::Png(e.to_string());
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    decoder.set_limits(png::Limits { bytes: 512 << 20 });
    let mut reader = decoder.read_info().map_err(png_err)?;
    let (w, h) = (reader.info().width, reader.info().height);
    if w > MAX_SIDE || h > MAX_SIDE {
        return Err(QrError::Png(format!(
            "{w}x{h} is larger than {MAX_SIDE} a side"
        )));
    }
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| QrError::Png("the picture is too large".into()))?;
    let mut buf = vec![0u8; size];
    let info = reader.next_frame(&mut buf).map_err(png_err)?;
    let channels = info.color_type.samples();
    let (w, h) = (info.width as usize, info.height as usize);
    let line = info.line_size;
    let mut out = Vec::with_capacity(w * h);
    for y in 0..h {
        for x in 0..w {
            let at = y * line + x * channels;
            // A pixel outside the frame's buffer (none in a well-formed PNG) is white.
            let Some(px) = buf.get(at..at + channels).filter(|p| !p.is_empty()) else {
                out.push(255);
                continue;
            };
            let v = match channels {
                3 | 4 => {
                    ((px[0] as u32 * 299 + px[1] as u32 * 587 + px[2] as u32 * 114) / 1000) as u8
                }
                _ => px[0],
            };
            // A transparent pixel is background.
            let alpha = match channels {
                2 => px[1],
                4 => px[3],
                _ => 255,
            };
            out.push(if alpha < 128 { 255 } else { v });
        }
    }
    Ok((w, h, out))
}

/// The text the QR codes of a PNG carry (every piece of one text, in order, its
/// digest checked).
pub fn decode_png(png_bytes: &[u8]) -> Result<Vec<u8>, QrError> {
    let (w, h, pixels) = grey(png_bytes)?;
    let mut pieces: Vec<Option<Vec<u8>>> = Vec::new();
    let mut id: Option<String> = None;
    for data in read_all(w, h, &pixels) {
        let Some(nl) = data.iter().position(|&b| b == b'\n') else {
            continue;
        };
        let head = String::from_utf8_lossy(&data[..nl]).to_string();
        let mut words = head.split(' ');
        let (Some("MSQR"), Some(place), Some(tag_text), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            continue;
        };
        let Some((i, n)) = place
            .split_once('/')
            .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?)))
        else {
            continue;
        };
        if n == 0 || n > MAX_PIECES || i == 0 || i > n {
            continue;
        }
        match &id {
            Some(existing) if existing != tag_text => {
                return Err(QrError::Decode(
                    "the picture holds codes of two different texts".into(),
                ))
            }
            _ => id = Some(tag_text.to_string()),
        }
        if pieces.is_empty() {
            pieces = vec![None; n];
        } else if pieces.len() != n {
            return Err(QrError::Decode(
                "the codes disagree on how many pieces there are".into(),
            ));
        }
        pieces[i - 1] = Some(data[nl + 1..].to_vec());
    }
    let id = id.ok_or_else(|| QrError::Decode("no mailseal QR code found".into()))?;
    let missing: Vec<String> = pieces
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_none())
        .map(|(i, _)| (i + 1).to_string())
        .collect();
    if !missing.is_empty() {
        return Err(QrError::Decode(format!(
            "pieces {} of {} were not read",
            missing.join(", "),
            pieces.len()
        )));
    }
    let text: Vec<u8> = pieces.into_iter().flatten().flatten().collect();
    if tag(&text) != id {
        return Err(QrError::Decode(
            "the pieces do not make the text they name".into(),
        ));
    }
    Ok(text)
}
