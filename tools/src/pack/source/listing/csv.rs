//! A small, strict CSV record reader (RFC 4180): fields separated by `,`,
//! records by `\n` or `\r\n`; a field in double quotes may hold commas,
//! line breaks and doubled quotes (`""` for one `"`). A quote inside an
//! unquoted field, text after a closing quote and an unclosed quote are
//! errors naming the line. Blank lines are skipped. Records are bounded in
//! bytes and fields; the reader is bounded in total bytes.

use std::io::{BufRead, Read};

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("line {line}: {error}")]
    Io { line: usize, error: std::io::Error },
    #[error("line {line}: {reason}")]
    Syntax { line: usize, reason: String },
}

/// One record and the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub line: usize,
    pub fields: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    FieldStart,
    Unquoted,
    Quoted,
    /// A `"` inside a quoted field: the closing quote or the first of `""`.
    QuoteInQuoted,
    /// `\r` after a closing quote: `\n` must follow.
    CarriageReturn,
}

/// Reads records from a buffered reader.
#[derive(Debug)]
pub struct CsvReader<R> {
    reader: R,
    /// Lines read so far.
    line: usize,
    max_record_bytes: usize,
    max_fields: usize,
}

impl<R: BufRead> CsvReader<R> {
    pub fn new(reader: R, max_record_bytes: usize, max_fields: usize) -> Self {
        Self {
            reader,
            line: 0,
            max_record_bytes,
            max_fields,
        }
    }

    /// The reader the records come from.
    pub fn get_ref(&self) -> &R {
        &self.reader
    }

    /// The next record, or `None` at the end.
    pub fn next_record(&mut self) -> Result<Option<Record>, CsvError> {
        loop {
            let Some((record, quoted)) = self.read_record()? else {
                return Ok(None);
            };
            // A blank line (one empty unquoted field) is no record; a quoted
            // empty field (`""`) is one.
            if quoted || record.fields.len() != 1 || !record.fields[0].is_empty() {
                return Ok(Some(record));
            }
        }
    }

    /// The next record and whether it held a quoted field.
    fn read_record(&mut self) -> Result<Option<(Record, bool)>, CsvError> {
        let start = self.line + 1;
        let syntax = |line: usize, reason: String| CsvError::Syntax { line, reason };
        let mut fields: Vec<String> = Vec::new();
        let mut field: Vec<u8> = Vec::new();
        let mut state = State::FieldStart;
        let mut quoted_any = false;
        let mut bytes = 0usize;
        let mut buf = Vec::new();
        let finish = |field: &mut Vec<u8>, fields: &mut Vec<String>, line: usize| {
            if fields.len() == self.max_fields {
                return Err(syntax(
                    start,
                    format!("more than {} fields", self.max_fields),
                ));
            }
            let text = String::from_utf8(std::mem::take(field))
                .map_err(|_| syntax(line, "a field is not UTF-8".into()))?;
            fields.push(text);
            Ok(())
        };
        loop {
            buf.clear();
            let room = (self.max_record_bytes - bytes) as u64 + 1;
            let n = (&mut self.reader)
                .take(room)
                .read_until(b'\n', &mut buf)
                .map_err(|error| CsvError::Io {
                    line: self.line + 1,
                    error,
                })?;
            if n == 0 {
                // The end of the input.
                return match state {
                    State::FieldStart if fields.is_empty() && bytes == 0 => Ok(None),
                    State::Quoted => Err(syntax(start, "a quoted field is never closed".into())),
                    State::CarriageReturn => {
                        Err(syntax(self.line, "a `\\r` after a closing quote".into()))
                    }
                    _ => {
                        finish(&mut field, &mut fields, self.line)?;
                        Ok(Some((
                            Record {
                                line: start,
                                fields,
                            },
                            quoted_any,
                        )))
                    }
                };
            }
            self.line += 1;
            bytes += n;
            if bytes > self.max_record_bytes {
                return Err(syntax(
                    start,
                    format!("a record over {} bytes", self.max_record_bytes),
                ));
            }
            for &byte in &buf {
                state = match (state, byte) {
                    (State::FieldStart, b'"') => {
                        quoted_any = true;
                        State::Quoted
                    }
                    (State::FieldStart | State::Unquoted, b',') => {
                        finish(&mut field, &mut fields, self.line)?;
                        State::FieldStart
                    }
                    (State::FieldStart | State::Unquoted, b'\n') => {
                        if field.last() == Some(&b'\r') {
                            field.pop();
                        }
                        finish(&mut field, &mut fields, self.line)?;
                        return Ok(Some((Record { line: start, fields }, quoted_any)));
                    }
                    (State::Unquoted, b'"') => {
                        return Err(syntax(
                            self.line,
                            "a `\"` inside an unquoted field (quote the whole field and double the quote)".into(),
                        ))
                    }
                    (State::FieldStart | State::Unquoted, byte) => {
                        field.push(byte);
                        State::Unquoted
                    }
                    (State::Quoted, b'"') => State::QuoteInQuoted,
                    (State::Quoted, byte) => {
                        field.push(byte);
                        State::Quoted
                    }
                    (State::QuoteInQuoted, b'"') => {
                        field.push(b'"');
                        State::Quoted
                    }
                    (State::QuoteInQuoted, b',') => {
                        finish(&mut field, &mut fields, self.line)?;
                        State::FieldStart
                    }
                    (State::QuoteInQuoted | State::CarriageReturn, b'\n') => {
                        finish(&mut field, &mut fields, self.line)?;
                        return Ok(Some((Record { line: start, fields }, true)));
                    }
                    (State::QuoteInQuoted, b'\r') => State::CarriageReturn,
                    (State::QuoteInQuoted | State::CarriageReturn, _) => {
                        return Err(syntax(
                            self.line,
                            "text after the closing quote of a field".into(),
                        ))
                    }
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: impl AsRef<[u8]>) -> Result<Vec<(usize, Vec<String>)>, CsvError> {
        let mut reader = CsvReader::new(text.as_ref(), 1 << 10, 8);
        let mut out = Vec::new();
        while let Some(record) = reader.next_record()? {
            out.push((record.line, record.fields));
        }
        Ok(out)
    }

    fn fields(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn quoted_fields_hold_commas_quotes_and_line_breaks() {
        let text = "path,label,caption\r\na.jpg,cat,\"a cat, \"\"sitting\"\"\non a mat\"\n\nb.jpg,,plain\n\"c.jpg\",\"\",\"\"";
        let got = records(text).expect("parses");
        assert_eq!(
            got,
            vec![
                (1, fields(&["path", "label", "caption"])),
                (2, fields(&["a.jpg", "cat", "a cat, \"sitting\"\non a mat"])),
                (5, fields(&["b.jpg", "", "plain"])),
                (6, fields(&["c.jpg", "", ""])),
            ]
        );
    }

    #[test]
    fn a_lone_quoted_empty_field_is_a_record_not_a_blank_line() {
        let got = records("\"\"\n\n").expect("parses");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].1, fields(&[""]));
    }

    #[test]
    fn malformed_records_are_errors_naming_the_line() {
        for (text, line, words) in [
            (&b"a,b\nc,\"d\n"[..], 2, "never closed"),
            (b"a,b\nc,d\"e\n", 2, "inside an unquoted field"),
            (b"a\n\"b\"c\n", 2, "after the closing quote"),
            (b"a\nb,c,d,e,f,g,h,i,j\n", 2, "more than 8 fields"),
            (b"a\n\"b\xff\"\n", 2, "not UTF-8"),
        ] {
            let error = records(text)
                .expect_err(&String::from_utf8_lossy(text))
                .to_string();
            let text = String::from_utf8_lossy(text);
            assert!(
                error.starts_with(&format!("line {line}:")),
                "{text:?}: {error}"
            );
            assert!(error.contains(words), "{text:?}: {error}");
        }
    }

    #[test]
    fn a_record_over_the_byte_limit_is_refused_without_reading_it_all() {
        let long = format!("\"{}", "x".repeat(1 << 20));
        let error = records(&long).expect_err("too long").to_string();
        assert!(error.contains("over 1024 bytes"), "{error}");
    }
}
