//! The header of a `.npy` file of token ids: magic `\x93NUMPY`, version,
//! header length, and a Python dict literal with `descr` (`<u2`, `<i2`,
//! `<u4`, `<i4`), `fortran_order` and a 1-D `shape`. The tokens start at
//! the end of the header; the file must hold exactly `shape[0]` of them.

use tributary_common::tokens::megatron::IdxError;
use tributary_common::tokens::TokenDtype;

/// The longest header read (numpy's own limit for version 1 is 64 KiB).
pub const MAX_NPY_HEADER_BYTES: u64 = 1 << 20;
/// Bytes before the dict of a version 1 header (magic, version, `u16`
/// length); version 2 and 3 have a `u32` length, so 12.
pub const NPY_PREAMBLE_BYTES: u64 = 12;

/// What a `.npy` header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NpyHeader {
    pub dtype: TokenDtype,
    /// `<i2`/`<i4`: ids with the sign bit set are refused while scanning.
    pub signed: bool,
    /// Tokens in the file.
    pub tokens: u64,
    /// Where the tokens start.
    pub offset: u64,
}

/// Parses the header of `file` (`prefix`: its first bytes, at least the
/// whole header; `file_bytes`: its size). Errors name the file and the
/// byte offset. `Ok(Err(n))`: `prefix` is too short; read the first `n`
/// bytes and call again.
pub fn parse_npy_header(
    file: &str,
    prefix: &[u8],
    file_bytes: u64,
) -> Result<Result<NpyHeader, u64>, IdxError> {
    let err = |offset: u64, reason: String| IdxError {
        file: file.to_owned(),
        offset,
        reason,
    };
    if prefix.len() < 10 {
        return if file_bytes < 10 {
            Err(err(
                0,
                format!("is {file_bytes} bytes, too short for a .npy header"),
            ))
        } else {
            Ok(Err(NPY_PREAMBLE_BYTES.min(file_bytes)))
        };
    }
    if &prefix[..6] != b"\x93NUMPY" {
        return Err(err(
            0,
            "does not start with the .npy magic \\x93NUMPY".into(),
        ));
    }
    let (len, start) = match prefix[6] {
        1 => (u64::from(u16::from_le_bytes([prefix[8], prefix[9]])), 10u64),
        2 | 3 => {
            if prefix.len() < 12 {
                return Ok(Err(NPY_PREAMBLE_BYTES));
            }
            let len = u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]);
            (u64::from(len), 12u64)
        }
        major => {
            return Err(err(
                6,
                format!(".npy format version {major} (this build reads 1 to 3)"),
            ))
        }
    };
    if len > MAX_NPY_HEADER_BYTES {
        return Err(err(
            8,
            format!("header of {len} bytes, over the {MAX_NPY_HEADER_BYTES}-byte limit"),
        ));
    }
    let offset = start + len;
    if offset > file_bytes {
        return Err(err(
            8,
            format!("header of {len} bytes runs past the file's {file_bytes} bytes"),
        ));
    }
    if (prefix.len() as u64) < offset {
        return Ok(Err(offset));
    }
    let dict = std::str::from_utf8(&prefix[start as usize..offset as usize])
        .map_err(|_| err(start, "header is not text".into()))?;
    let descr =
        value_of(dict, "descr").ok_or_else(|| err(start, "header has no 'descr'".into()))?;
    let (dtype, signed) = match descr.trim_matches(|c| c == '\'' || c == '"') {
        "<u2" => (TokenDtype::U16, false),
        "<i2" => (TokenDtype::U16, true),
        "<u4" => (TokenDtype::U32, false),
        "<i4" => (TokenDtype::U32, true),
        other => {
            return Err(err(
                start,
                format!(
                    "dtype {other} is not a token dtype this build reads (<u2, <i2, <u4, <i4, little-endian); convert it with numpy's astype"
                ),
            ))
        }
    };
    let shape =
        value_of(dict, "shape").ok_or_else(|| err(start, "header has no 'shape'".into()))?;
    let dims: Vec<&str> = shape
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    let [dim] = dims[..] else {
        return Err(err(
            start,
            format!("shape {shape} is not 1-D; flatten the tokens to one dimension (reshape(-1))"),
        ));
    };
    let tokens: u64 = dim
        .parse()
        .map_err(|_| err(start, format!("shape {shape} is not a length")))?;
    let end = tokens
        .checked_mul(dtype.width())
        .and_then(|b| b.checked_add(offset));
    if end != Some(file_bytes) {
        return Err(err(
            offset,
            format!(
                "shape ({tokens},) of {dtype} needs {} bytes after the {offset}-byte header, the file has {}",
                tokens.saturating_mul(dtype.width()),
                file_bytes - offset
            ),
        ));
    }
    Ok(Ok(NpyHeader {
        dtype,
        signed,
        tokens,
        offset,
    }))
}

/// The text of `key`'s value in a Python dict literal: up to the next `,`
/// at depth 0 (a tuple's commas are inside parentheses).
fn value_of<'a>(dict: &'a str, key: &str) -> Option<&'a str> {
    let at = dict
        .find(&format!("'{key}'"))
        .or_else(|| dict.find(&format!("\"{key}\"")))?;
    let rest = &dict[at + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(rest[..i].trim()),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.npy` file as numpy 1.x+ writes it (version 1, header padded with
    /// spaces to a multiple of 64, ending in a newline).
    pub(crate) fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut dict =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while !(10 + dict.len() + 1).is_multiple_of(64) {
            dict.push(' ');
        }
        dict.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn npy_header_of_a_numpy_file() {
        let file = npy("<u2", "(3,)", &[1, 0, 2, 0, 3, 0]);
        let header = parse_npy_header("a.npy", &file, file.len() as u64)
            .expect("valid")
            .expect("whole");
        assert_eq!(header.offset, 128, "numpy pads the header to 64 bytes");
        assert_eq!(
            (header.dtype, header.signed, header.tokens),
            (TokenDtype::U16, false, 3)
        );
        let file = npy("<i4", "(2,)", &[0; 8]);
        let header = parse_npy_header("b.npy", &file, file.len() as u64)
            .expect("valid")
            .expect("whole");
        assert_eq!((header.dtype, header.signed), (TokenDtype::U32, true));
    }

    #[test]
    fn npy_header_asks_for_more_bytes() {
        let file = npy("<u2", "(3,)", &[0; 6]);
        assert_eq!(
            parse_npy_header("a.npy", &file[..12], file.len() as u64),
            Ok(Err(128))
        );
    }

    #[test]
    fn npy_header_refuses_what_it_cannot_read() {
        for (file, what) in [
            (npy("<f4", "(2,)", &[0; 8]), "dtype <f4"),
            (npy(">u2", "(2,)", &[0; 4]), "dtype >u2"),
            (npy("|u1", "(2,)", &[0; 2]), "dtype |u1"),
            (npy("<u2", "(2, 2)", &[0; 8]), "not 1-D"),
            (npy("<u2", "()", &[0; 2]), "not 1-D"),
            (npy("<u2", "(5,)", &[0; 8]), "needs 10 bytes"),
            (npy("<u4", "(18446744073709551615,)", &[0; 8]), "needs"),
            (b"NOTNUMPY\x01\x00\x00\x00".to_vec(), "magic"),
        ] {
            let error = parse_npy_header("bad.npy", &file, file.len() as u64)
                .expect_err(what)
                .to_string();
            assert!(error.starts_with("bad.npy: at byte"), "{error}");
            assert!(error.contains(what), "{what}: {error}");
        }
        let mut huge = npy("<u2", "(1,)", &[0; 2]);
        huge[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
        let error = parse_npy_header("h.npy", &huge, huge.len() as u64).expect_err("past the end");
        assert_eq!(error.offset, 8);
    }
}
