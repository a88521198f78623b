//! A bounded parser for numpy's `.npy` format (versions 1.0, 2.0 and 3.0):
//! the header is checked against a strict grammar and the data is returned
//! as a view of the input, never copied.
//!
//! The file is the magic `\x93NUMPY`, a major and a minor version byte, the
//! header length (a little-endian u16 for version 1, u32 for 2 and 3), the
//! header, then the array's bytes. The header is a Python dict literal:
//!
//! ```text
//! {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//! ```
//!
//! What is accepted:
//!
//! - exactly the keys `descr`, `fortran_order` and `shape`, each once, in
//!   any order, quoted with `'` or `"` (no escapes); spaces, tabs and
//!   newlines between tokens; a trailing comma in the dict and the tuple;
//! - `shape` a tuple of non-negative decimal integers (`()` for a scalar,
//!   `(5,)` for one dimension: `(5)` is an int in Python, so it is refused),
//!   at most [`MAX_DIMS`] of them; the old Python 2 `3L` suffix is allowed;
//! - `descr` one of the little-endian types of [`DType`]. Byte order only
//!   matters for multi-byte types: those must say `<` (what numpy writes on
//!   every little-endian machine). A 1-byte type may carry any of `|`, `<`,
//!   `>` or `=`, as all of them mean the same bytes. `=` (native) on a
//!   multi-byte type is refused because the file does not say which machine
//!   was native;
//! - `fortran_order: False` only.
//!
//! Refused with a message saying why and what to do instead: big-endian
//! multi-byte types, Fortran order, structured dtypes (a list `descr`),
//! object arrays (pickles), strings (`U`, `S`), complex, datetimes, void and
//! anything else. The header is at most [`MAX_HEADER_LEN`] bytes and the data
//! must be exactly `product(shape) * size` bytes, computed with checked
//! arithmetic; nothing read from the file sizes an allocation beyond the
//! header's own length.

/// The largest number of dimensions accepted.
pub const MAX_DIMS: usize = 32;

/// The longest header accepted, in bytes (numpy itself reads at most 10,000
/// by default; it writes about a hundred).
pub const MAX_HEADER_LEN: usize = 64 * 1024;

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The longest piece of the input quoted back in an error message.
const SHOWN: usize = 40;

/// A numpy element type Tributary reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    Bool,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F16,
    F32,
    F64,
}

impl DType {
    /// Every type, for tables and tests.
    pub const ALL: [DType; 12] = [
        DType::Bool,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::F32,
        DType::F64,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// numpy's little-endian descr, as `np.save` writes it on a
    /// little-endian machine.
    pub fn descr(self) -> &'static str {
        match self {
            DType::Bool => "|b1",
            DType::I8 => "|i1",
            DType::U8 => "|u1",
            DType::I16 => "<i2",
            DType::U16 => "<u2",
            DType::I32 => "<i4",
            DType::U32 => "<u4",
            DType::I64 => "<i8",
            DType::U64 => "<u8",
            DType::F16 => "<f2",
            DType::F32 => "<f4",
            DType::F64 => "<f8",
        }
    }

    /// The type of a descr's code without its byte order (`f4`, `b1`).
    fn from_code(code: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|t| &t.descr()[1..] == code)
    }
}

/// A parsed .npy: C-order little-endian data viewing the input bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Npy<'a> {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: &'a [u8],
}

/// Parses an .npy file (format versions 1.0, 2.0 and 3.0). Errors are short
/// lowercase sentences saying what is wrong (the caller adds shard/key/offset).
pub fn parse(bytes: &[u8]) -> Result<Npy<'_>, String> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err("not an npy file: it does not start with \\x93NUMPY".into());
    }
    let (major, minor) = match bytes.get(6..8) {
        Some(&[major, minor]) => (major, minor),
        _ => return Err("truncated npy file: no format version".into()),
    };
    let (len_size, start) = match (major, minor) {
        (1, 0) => (2, 10),
        (2, 0) | (3, 0) => (4, 12),
        _ => {
            return Err(format!(
                "npy format version {major}.{minor} is not supported (1.0, 2.0 and 3.0 are)"
            ))
        }
    };
    let header_len = match bytes.get(8..8 + len_size) {
        Some(&[a, b]) => usize::from(u16::from_le_bytes([a, b])),
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]) as usize,
        _ => return Err("truncated npy file: no header length".into()),
    };
    if header_len > MAX_HEADER_LEN {
        return Err(format!(
            "npy header of {header_len} bytes is over the limit of {MAX_HEADER_LEN}"
        ));
    }
    let Some(header) = bytes.get(start..start + header_len) else {
        return Err(format!(
            "truncated: the npy header says {header_len} bytes, {} follow",
            bytes.len() - start.min(bytes.len())
        ));
    };
    let data = &bytes[start + header_len..];
    let (dtype, shape) = parse_header(header)?;

    // The product of the non-zero dimensions must fit even when some
    // dimension is 0, so that callers may multiply them in any order.
    let mut bytes_if_nonzero = dtype.size() as u64;
    for &dim in shape.iter().filter(|&&d| d != 0) {
        bytes_if_nonzero = bytes_if_nonzero
            .checked_mul(dim)
            .ok_or_else(|| format!("npy shape {} has more than 2^64 bytes", show_shape(&shape)))?;
    }
    let expected = if shape.contains(&0) {
        0
    } else {
        bytes_if_nonzero
    };
    let follow = data.len() as u64;
    if expected > follow {
        return Err(format!(
            "truncated: the header says {expected} bytes of data, {follow} follow"
        ));
    }
    if expected < follow {
        return Err(format!(
            "trailing bytes: the header says {expected} bytes of data, {follow} follow"
        ));
    }
    // Each dimension fits in u64, so in usize on 64-bit targets.
    let shape = shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("dimension {d} does not fit in usize")))
        .collect::<Result<_, _>>()?;
    Ok(Npy { dtype, shape, data })
}

fn show_shape(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    }
}

/// `s` for an error message: at most [`SHOWN`] characters, quoted.
fn show(s: &[u8]) -> String {
    let text = String::from_utf8_lossy(&s[..s.len().min(SHOWN)]);
    let more = if s.len() > SHOWN { "..." } else { "" };
    format!("{text:?}{more}")
}

/// The header's three entries.
fn parse_header(header: &[u8]) -> Result<(DType, Vec<u64>), String> {
    let mut c = Cursor { h: header, pos: 0 };
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    c.skip_ws();
    c.expect(b'{', "the header to start with '{'")?;
    loop {
        c.skip_ws();
        if c.eat(b'}') {
            break;
        }
        let at = c.pos;
        let key = c.string()?;
        c.skip_ws();
        c.expect(b':', "':' after a key")?;
        c.skip_ws();
        let dup = match key {
            b"descr" => descr.replace(c.descr()?).is_some(),
            b"fortran_order" => fortran.replace(c.boolean()?).is_some(),
            b"shape" => shape.replace(c.shape()?).is_some(),
            _ => {
                return Err(format!(
                    "npy header has an unknown key {} at byte {at}",
                    show(key)
                ))
            }
        };
        if dup {
            return Err(format!("npy header has the key {} twice", show(key)));
        }
        c.skip_ws();
        if c.eat(b'}') {
            break;
        }
        c.expect(b',', "',' or '}' after a value")?;
    }
    c.skip_ws();
    if c.pos != header.len() {
        return Err(format!(
            "npy header has {} after its closing '}}' at byte {}",
            show(header[c.pos..].trim_ascii_end()),
            c.pos
        ));
    }
    let (Some(descr), Some(fortran), Some(shape)) = (descr, fortran, shape) else {
        return Err("npy header lacks one of 'descr', 'fortran_order' and 'shape'".into());
    };
    let dtype = dtype(descr)?;
    if fortran {
        return Err(
            "fortran-order arrays are not supported: save with np.ascontiguousarray".into(),
        );
    }
    Ok((dtype, shape))
}

/// The element type of a descr string, or why it is refused.
fn dtype(descr: &[u8]) -> Result<DType, String> {
    let shown = show(descr);
    let text = std::str::from_utf8(descr).map_err(|_| format!("dtype {shown} is not utf-8"))?;
    let (order, code) = match text.as_bytes().first() {
        Some(o @ (b'<' | b'>' | b'|' | b'=')) => (*o, &text[1..]),
        _ => {
            return Err(format!(
                "dtype {shown} does not start with a byte order (<, >, | or =)"
            ))
        }
    };
    if let Some(t) = DType::from_code(code) {
        return match order {
            _ if t.size() == 1 => Ok(t),
            b'<' => Ok(t),
            b'>' => Err(format!(
                "big-endian dtype {shown} is not supported: save a little-endian copy with a.astype('<{code}')"
            )),
            _ => Err(format!(
                "dtype {shown} does not say its byte order: save with '<{code}'"
            )),
        };
    }
    let why = match code.as_bytes().first() {
        Some(b'O') => "object arrays hold pickled python objects: save a numeric array",
        Some(b'U') => "unicode string arrays are not numeric: store text in a txt or json field",
        Some(b'S' | b'a') => {
            "byte string arrays are not numeric: store bytes in a field of their own"
        }
        Some(b'c') => "complex numbers: save the real and imaginary parts as floats",
        Some(b'M' | b'm') => "datetimes: save them as int64 with a.view('<i8')",
        Some(b'V') => "void and structured dtypes: save each field as its own array",
        Some(b'b' | b'i' | b'u' | b'f') => {
            "of its size: bool, 1 to 8 byte integers and 2, 4 and 8 byte floats are"
        }
        _ => "it is not a numpy type code",
    };
    Err(format!("dtype {shown} is not supported: {why}"))
}

/// A position in the header.
struct Cursor<'h> {
    h: &'h [u8],
    pos: usize,
}

impl<'h> Cursor<'h> {
    fn peek(&self) -> Option<u8> {
        self.h.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn unexpected(&self, wanted: &str) -> String {
        match self.peek() {
            None => format!("npy header ends where it should have {wanted}"),
            Some(b) if b.is_ascii_graphic() => format!(
                "npy header has '{}' at byte {} where it should have {wanted}",
                char::from(b),
                self.pos
            ),
            Some(b) => format!(
                "npy header has byte 0x{b:02x} at byte {} where it should have {wanted}",
                self.pos
            ),
        }
    }

    fn expect(&mut self, b: u8, wanted: &str) -> Result<(), String> {
        if self.eat(b) {
            Ok(())
        } else {
            Err(self.unexpected(wanted))
        }
    }

    /// A quoted string without escapes: its bytes.
    fn string(&mut self) -> Result<&'h [u8], String> {
        let quote = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return Err(self.unexpected("a quoted string")),
        };
        let start = self.pos + 1;
        let rest = &self.h[start..];
        match rest
            .iter()
            .position(|&b| b == quote || b == b'\\' || b == b'\n')
        {
            Some(n) if rest[n] == quote => {
                self.pos = start + n + 1;
                Ok(&rest[..n])
            }
            Some(n) if rest[n] == b'\\' => Err(format!(
                "npy header has an escape in a string at byte {}: escapes are not supported",
                start + n
            )),
            _ => Err(format!(
                "npy header has an unterminated string at byte {}",
                self.pos
            )),
        }
    }

    /// `descr`'s value: a string. A list is a structured dtype.
    fn descr(&mut self) -> Result<&'h [u8], String> {
        if self.peek() == Some(b'[') {
            return Err(
                "structured dtypes are not supported: save each field as its own array".into(),
            );
        }
        self.string()
    }

    fn boolean(&mut self) -> Result<bool, String> {
        let rest = &self.h[self.pos..];
        for (word, value) in [(&b"True"[..], true), (&b"False"[..], false)] {
            if rest.starts_with(word) {
                self.pos += word.len();
                return Ok(value);
            }
        }
        Err(self.unexpected("True or False"))
    }

    /// A tuple of at most [`MAX_DIMS`] non-negative integers.
    fn shape(&mut self) -> Result<Vec<u64>, String> {
        self.expect(b'(', "a shape tuple starting with '('")?;
        let mut dims = Vec::new();
        loop {
            self.skip_ws();
            if self.eat(b')') {
                return Ok(dims);
            }
            if dims.len() == MAX_DIMS {
                return Err(format!("npy shape has more than {MAX_DIMS} dimensions"));
            }
            dims.push(self.integer()?);
            self.skip_ws();
            if self.eat(b')') {
                if dims.len() == 1 {
                    return Err("npy shape (n) is an int, not a tuple: a one-dimensional shape is written (n,)".into());
                }
                return Ok(dims);
            }
            self.expect(b',', "',' or ')' in the shape")?;
        }
    }

    /// A decimal integer that fits in u64, with an optional Python 2 `L`.
    fn integer(&mut self) -> Result<u64, String> {
        let start = self.pos;
        let mut value: u64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(d - b'0')))
                .ok_or_else(|| format!("npy shape has a dimension over 2^64 at byte {start}"))?;
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.unexpected("a non-negative integer in the shape"));
        }
        if self.pos - start > 1 && self.h[start] == b'0' {
            return Err(format!(
                "npy shape has a dimension with a leading zero at byte {start}"
            ));
        }
        self.eat(b'L');
        Ok(value)
    }
}

#[cfg(test)]
mod tests;
