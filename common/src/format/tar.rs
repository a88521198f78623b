//! The tar subset Tributary writes and the tar dialects it reads.
//!
//! Writing produces plain POSIX ustar entries (mode 0644, uid/gid 0, mtime 0)
//! so output is byte-for-byte deterministic. Reading accepts ustar, GNU long
//! names (`L`) and pax extended headers (`x`, `g`), which is what Python's
//! `tarfile` (and therefore the `webdataset` library) and GNU tar emit.

use std::ops::Range;

/// Tar's block size: every header and every padded payload is a multiple of it.
pub const BLOCK: usize = 512;

/// Errors met while writing or parsing tar bytes. Offsets are absolute byte
/// offsets within the archive the caller is reading.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TarError {
    #[error(
        "truncated tar data: {what} at byte {offset} needs {need} bytes but only {have} remain"
    )]
    Truncated {
        offset: u64,
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("corrupt tar header at byte {offset}: {reason}")]
    BadHeader { offset: u64, reason: String },
    #[error(
        "tar entry name `{name}` does not fit a ustar header (100-byte name, 155-byte prefix)"
    )]
    NameTooLong { name: String },
    #[error("tar entry `{}` is {size} bytes, over the 8 GiB ustar limit", crate::text::printable(.name))]
    TooLarge { name: String, size: u64 },
}

/// Length of `len` bytes rounded up to whole blocks.
pub fn padded(len: usize) -> usize {
    len.div_ceil(BLOCK) * BLOCK
}

/// Bytes one entry of `data_len` payload bytes takes in the archive.
pub fn entry_len(data_len: usize) -> usize {
    BLOCK + padded(data_len)
}

fn write_octal(field: &mut [u8], value: u64) {
    // `width - 1` octal digits followed by NUL, as ustar expects.
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(text.as_bytes());
    field[digits] = 0;
}

/// Appends one regular-file entry named `name` holding `data`.
pub fn append_entry(out: &mut Vec<u8>, name: &str, data: &[u8]) -> Result<(), TarError> {
    const MAX_SIZE: u64 = 0o777_7777_7777;
    if data.len() as u64 > MAX_SIZE {
        return Err(TarError::TooLarge {
            name: name.to_owned(),
            size: data.len() as u64,
        });
    }
    let mut header = [0u8; BLOCK];
    let (prefix, base) = split_name(name)?;
    header[..base.len()].copy_from_slice(base.as_bytes());
    header[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    write_octal(&mut header[100..108], 0o644);
    write_octal(&mut header[108..116], 0);
    write_octal(&mut header[116..124], 0);
    write_octal(&mut header[124..136], data.len() as u64);
    write_octal(&mut header[136..148], 0);
    header[156] = b'0';
    header[257..263].copy_from_slice(b"ustar\0");
    header[263..265].copy_from_slice(b"00");
    header[148..156].fill(b' ');
    let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    let text = format!("{sum:06o}\0 ");
    header[148..156].copy_from_slice(text.as_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out.resize(out.len() + padded(data.len()) - data.len(), 0);
    Ok(())
}

/// Appends the end-of-archive marker (two zero blocks).
pub fn append_end(out: &mut Vec<u8>) {
    out.resize(out.len() + 2 * BLOCK, 0);
}

fn split_name(name: &str) -> Result<(&str, &str), TarError> {
    if name.len() <= 100 {
        return Ok(("", name));
    }
    let too_long = || TarError::NameTooLong {
        name: name.to_owned(),
    };
    // The split must fall on a '/': prefix <= 155 bytes, rest <= 100 bytes.
    name.char_indices()
        .filter(|&(i, c)| c == '/' && i <= 155 && name.len() - i - 1 <= 100 && i > 0)
        .map(|(i, _)| (&name[..i], &name[i + 1..]))
        .next()
        .ok_or_else(too_long)
}

/// One regular file found in an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TarEntry {
    /// Full path, after applying pax `path` or GNU long-name records.
    pub name: String,
    /// Offset of the first header belonging to this entry, including any
    /// extension headers in front of it: where a reader must start.
    pub start: u64,
    /// Payload bytes, as a range into the buffer given to [`TarReader`].
    pub data: Range<usize>,
    /// Offset one past the entry's padded payload.
    pub end: u64,
}

/// Iterates the regular files of a tar byte buffer.
///
/// The buffer may hold a whole archive or any run of whole entries cut from
/// one: reaching the buffer's end on an entry boundary ends the iteration, as
/// does the end-of-archive marker.
#[derive(Debug)]
pub struct TarReader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    finished: bool,
}

impl<'a> TarReader<'a> {
    /// Reads `buf`, whose first byte sits at archive offset `base`.
    pub fn new(buf: &'a [u8], base: u64) -> Self {
        Self {
            buf,
            pos: 0,
            base,
            finished: false,
        }
    }

    /// Whether the end-of-archive marker was reached (as opposed to the end
    /// of the buffer).
    pub fn saw_end_marker(&self) -> bool {
        self.finished && self.pos < self.buf.len()
    }

    fn offset(&self, pos: usize) -> u64 {
        self.base + pos as u64
    }

    fn take(&self, pos: usize, len: usize, what: &'static str) -> Result<&'a [u8], TarError> {
        let have = self.buf.len().saturating_sub(pos);
        if have < len {
            return Err(TarError::Truncated {
                offset: self.offset(pos),
                what,
                need: len,
                have,
            });
        }
        Ok(&self.buf[pos..pos + len])
    }

    /// The next regular file, `None` at the end of the archive or buffer.
    pub fn next_entry(&mut self) -> Result<Option<TarEntry>, TarError> {
        let mut start: Option<usize> = None;
        let mut long_name: Option<String> = None;
        let mut pax_size: Option<u64> = None;
        loop {
            if self.finished || self.pos == self.buf.len() {
                if let Some(s) = start {
                    return Err(TarError::Truncated {
                        offset: self.offset(s),
                        what: "extension header without its entry",
                        need: BLOCK,
                        have: 0,
                    });
                }
                self.finished = true;
                return Ok(None);
            }
            let header_pos = self.pos;
            let header = self.take(header_pos, BLOCK, "tar header")?;
            if header.iter().all(|&b| b == 0) {
                self.finished = true;
                continue;
            }
            let header_offset = self.offset(header_pos);
            verify_checksum(header, header_offset)?;
            let size = match pax_size.take() {
                Some(size) => size,
                None => parse_size(&header[124..136], header_offset)?,
            };
            let size = usize::try_from(size).map_err(|_| TarError::BadHeader {
                offset: header_offset,
                reason: format!("entry size {size} does not fit in memory"),
            })?;
            let data_pos = header_pos + BLOCK;
            let data = self.take(data_pos, size, "entry payload")?;
            let padded_len = padded(size);
            // The last entry of a cut buffer may lack its trailing padding only
            // if the buffer was cut exactly at the payload's end; require it.
            self.take(data_pos, padded_len, "entry padding")?;
            self.pos = data_pos + padded_len;
            let entry_start = *start.get_or_insert(header_pos);
            match header[156] {
                b'0' | 0 | b'7' => {
                    let name = match long_name.take() {
                        Some(name) => name,
                        None => header_name(header, header_offset)?,
                    };
                    return Ok(Some(TarEntry {
                        name,
                        start: self.offset(entry_start),
                        data: data_pos..data_pos + size,
                        end: self.offset(self.pos),
                    }));
                }
                b'x' => {
                    let records = parse_pax(data, self.offset(data_pos))?;
                    for (key, value) in records {
                        match key {
                            "path" => long_name = Some(value.to_owned()),
                            "size" => {
                                pax_size = Some(value.parse().map_err(|_| TarError::BadHeader {
                                    offset: header_offset,
                                    reason: format!("pax size `{value}` is not a number"),
                                })?)
                            }
                            _ => {}
                        }
                    }
                }
                b'L' => {
                    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
                    long_name = Some(utf8(&data[..end], header_offset)?.to_owned());
                }
                // Global pax headers, directories, links, devices: not samples.
                _ => {
                    start = None;
                    long_name = None;
                }
            }
        }
    }
}

pub(crate) fn utf8(bytes: &[u8], offset: u64) -> Result<&str, TarError> {
    std::str::from_utf8(bytes).map_err(|_| TarError::BadHeader {
        offset,
        reason: "entry name is not UTF-8".into(),
    })
}

pub(crate) fn cstr(field: &[u8]) -> &[u8] {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    &field[..end]
}

pub(crate) fn header_name(header: &[u8], offset: u64) -> Result<String, TarError> {
    let name = utf8(cstr(&header[..100]), offset)?;
    let prefix = if &header[257..262] == b"ustar" {
        utf8(cstr(&header[345..500]), offset)?
    } else {
        ""
    };
    Ok(if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    })
}

fn parse_octal(field: &[u8], offset: u64, what: &str) -> Result<u64, TarError> {
    let text = cstr(field);
    let text = std::str::from_utf8(text)
        .unwrap_or("?")
        .trim_matches([' ', '\0']);
    if text.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(text, 8).map_err(|_| TarError::BadHeader {
        offset,
        reason: format!("{what} field `{text}` is not octal"),
    })
}

/// An entry's size: octal, or GNU base-256 for sizes over 8 GiB (a first
/// byte of `0x80`, then big-endian bytes). A base-256 value past `u64` or a
/// negative one (`0xff`) is an error.
pub(crate) fn parse_size(field: &[u8], offset: u64) -> Result<u64, TarError> {
    if field[0] & 0x80 != 0 {
        let bad = |reason: &str| TarError::BadHeader {
            offset,
            reason: format!("base-256 size {reason}"),
        };
        if field[0] & 0x40 != 0 {
            return Err(bad("is negative"));
        }
        return field[1..]
            .iter()
            .try_fold(u64::from(field[0] & 0x3f), |acc, &b| {
                acc.checked_mul(256)?.checked_add(u64::from(b))
            })
            .ok_or_else(|| bad("does not fit in 64 bits"));
    }
    parse_octal(field, offset, "size")
}

pub(crate) fn verify_checksum(header: &[u8], offset: u64) -> Result<(), TarError> {
    let stored = parse_octal(&header[148..156], offset, "checksum")?;
    let unsigned: u64 = header
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u64::from(b)
            }
        })
        .sum();
    let signed: i64 = header
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                i64::from(b as i8)
            }
        })
        .sum();
    if stored == unsigned || stored as i64 == signed {
        Ok(())
    } else {
        Err(TarError::BadHeader {
            offset,
            reason: format!("header checksum is {stored:o}, computed {unsigned:o}"),
        })
    }
}

/// Parses pax records: `"<len> <key>=<value>\n"` repeated.
pub(crate) fn parse_pax(mut data: &[u8], offset: u64) -> Result<Vec<(&str, &str)>, TarError> {
    let bad = |reason: &str| TarError::BadHeader {
        offset,
        reason: format!("pax header: {reason}"),
    };
    let mut records = Vec::new();
    while !data.is_empty() && data[0] != 0 {
        let space = data
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| bad("record without length"))?;
        let len: usize = std::str::from_utf8(&data[..space])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("record length is not a number"))?;
        if len <= space + 1 || len > data.len() {
            return Err(bad("record length out of range"));
        }
        let record = std::str::from_utf8(&data[space + 1..len - 1])
            .map_err(|_| bad("record is not UTF-8"))?;
        let (key, value) = record
            .split_once('=')
            .ok_or_else(|| bad("record without `=`"))?;
        records.push((key, value));
        data = &data[len..];
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, data) in entries {
            append_entry(&mut out, name, data).expect("append");
        }
        append_end(&mut out);
        out
    }

    #[test]
    fn round_trip_and_offsets() {
        let buf = archive(&[
            ("a/1.jpg", b"hello"),
            ("a/1.cls", b"3"),
            ("b/2.txt", &[7; 600]),
        ]);
        let mut reader = TarReader::new(&buf, 0);
        let mut names = Vec::new();
        while let Some(entry) = reader.next_entry().expect("parse") {
            names.push((entry.name.clone(), entry.start, buf[entry.data].to_vec()));
        }
        assert!(reader.saw_end_marker());
        assert_eq!(names[0], ("a/1.jpg".into(), 0, b"hello".to_vec()));
        assert_eq!(names[1], ("a/1.cls".into(), 1024, b"3".to_vec()));
        assert_eq!(names[2].1, 2048);
        assert_eq!(names[2].2, vec![7; 600]);
        assert_eq!(buf.len(), 2048 + 512 + 1024 + 1024);
    }

    #[test]
    fn long_names_use_the_prefix_field() {
        let name = format!("{}/{}", "d".repeat(120), "k.jpg");
        let buf = archive(&[(&name, b"x")]);
        let entry = TarReader::new(&buf, 0).next_entry().expect("parse");
        assert_eq!(entry.map(|e| e.name), Some(name));
        let err = append_entry(&mut Vec::new(), &"x".repeat(300), b"");
        assert!(matches!(err, Err(TarError::NameTooLong { .. })));
    }

    #[test]
    fn corrupt_and_truncated_headers_are_errors_with_offsets() {
        let mut buf = archive(&[("a.jpg", b"hello"), ("b.jpg", b"world")]);
        buf[1024 + 10] ^= 0xff;
        let mut reader = TarReader::new(&buf, 4096);
        assert!(reader.next_entry().expect("first entry").is_some());
        let err = reader.next_entry().expect_err("checksum must fail");
        assert!(
            matches!(err, TarError::BadHeader { offset: 5120, .. }),
            "{err}"
        );

        let buf = archive(&[("a.jpg", &[1; 2000])]);
        let err = TarReader::new(&buf[..1000], 0)
            .next_entry()
            .expect_err("payload is cut");
        assert!(
            matches!(err, TarError::Truncated { offset: 512, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_base256_size_past_u64_is_an_error_not_a_truncated_value() {
        let mut field = [0u8; 12];
        field[0] = 0x80;
        field[3] = 1; // 2^64: one past u64::MAX
        let err = parse_size(&field, 1536).expect_err("past u64");
        assert!(
            matches!(err, TarError::BadHeader { offset: 1536, ref reason } if reason.contains("64 bits")),
            "{err}"
        );
        let mut field = [0u8; 12];
        field[0] = 0x80;
        field[11] = 5;
        field[10] = 1;
        assert_eq!(parse_size(&field, 0), Ok(256 + 5));
        field[4..].fill(0xff);
        assert_eq!(parse_size(&field, 0), Ok(u64::MAX));
        assert!(parse_size(&[0xff; 12], 0).is_err(), "negative");
    }

    #[test]
    fn pax_path_overrides_the_header_name() {
        // A pax header followed by its entry, as Python's tarfile writes them.
        let mut buf = Vec::new();
        let record = "30 path=some/long/name.jpg\n";
        let record = format!("{} {}", record.len(), &record[3..]);
        append_entry(&mut buf, "PaxHeader", record.as_bytes()).expect("pax");
        buf[156] = b'x';
        buf[148..156].fill(b' ');
        let sum: u32 = buf[..512].iter().map(|&b| u32::from(b)).sum();
        buf[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        append_entry(&mut buf, "short.jpg", b"data").expect("entry");
        let entry = TarReader::new(&buf, 0)
            .next_entry()
            .expect("parse")
            .expect("entry");
        assert_eq!(entry.name, "some/long/name.jpg");
        assert_eq!(entry.start, 0);
        assert_eq!(&buf[entry.data], b"data");
    }
}
