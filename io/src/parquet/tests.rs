//! Tests of Parquet tails: a file written by the `parquet` crate's own
//! writer is indexed from its tail alone; truncated, lying and mutated
//! footers are errors that name the file, never a panic or an allocation
//! sized from them; a changed tail is caught.

use std::sync::Arc;

use bytes::Bytes;
use object_store::memory::InMemory;
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

use super::*;

/// A file of `groups` row groups of 10 rows: `label` (int64) and `text`
/// (an optional string, null every third row).
fn file(groups: usize) -> Vec<u8> {
    let schema = Arc::new(
        parse_message_type("message m { required int64 label; optional binary text (UTF8); }")
            .expect("schema"),
    );
    let props = Arc::new(WriterProperties::builder().build());
    let mut out = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut out, schema, props).expect("writer");
    for g in 0..groups {
        let mut group = writer.next_row_group().expect("row group");
        let labels: Vec<i64> = (0..10).map(|i| (g * 10 + i) as i64).collect();
        let mut column = group.next_column().expect("column").expect("label");
        column
            .typed::<Int64Type>()
            .write_batch(&labels, None, None)
            .expect("labels");
        column.close().expect("close");
        let texts: Vec<ByteArray> = (0..10)
            .filter(|i| i % 3 != 0)
            .map(|i| ByteArray::from(format!("row {}", g * 10 + i).as_str()))
            .collect();
        let defs: Vec<i16> = (0..10).map(|i| i16::from(i % 3 != 0)).collect();
        let mut column = group.next_column().expect("column").expect("text");
        column
            .typed::<ByteArrayType>()
            .write_batch(&texts, Some(&defs), None)
            .expect("texts");
        column.close().expect("close");
        group.close().expect("close group");
    }
    writer.close().expect("close file");
    out
}

fn location_with(name: &str, data: Vec<u8>) -> Location {
    let store = Arc::new(InMemory::new());
    let location = Location::from_store(store, "ds", "memory:///ds");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime
        .block_on(location.put(name, Bytes::from(data)))
        .expect("put");
    location
}

fn index(name: &str, data: Vec<u8>) -> Result<(ShardEntry, Footer)> {
    let size = data.len() as u64;
    let location = location_with(name, data);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(index_file(&location, name, size, Some("\"e1\"".into())))
}

#[test]
fn a_file_is_indexed_from_its_tail_with_its_row_groups_and_byte_ranges() {
    let data = file(3);
    let (entry, footer) = index("a.parquet", data.clone()).expect("indexed");
    assert_eq!(entry.samples, 30);
    let groups = entry.row_groups().expect("row groups");
    assert_eq!(groups.rows, [10, 10, 10]);
    assert_eq!(groups.etag.as_deref(), Some("\"e1\""));
    let tail = &data[data.len() - groups.tail_bytes as usize..];
    check_tail("a.parquet", &entry, tail).expect("the same tail");
    for group in 0..3 {
        for column in 0..2 {
            for range in footer.ranges(group, column, 0..10) {
                assert!(
                    range.start >= 4 && range.end <= footer.tail_start,
                    "{range:?}"
                );
            }
        }
    }
    // The tail alone decodes to the same footer, as a reader loads it.
    let again = Footer::decode("a.parquet", data.len() as u64, Bytes::copy_from_slice(tail))
        .expect("decodes");
    assert_eq!(again.rows(), footer.rows());
    let mut changed = tail.to_vec();
    changed[0] ^= 1;
    let error = check_tail("a.parquet", &entry, &changed).expect_err("a changed tail");
    assert!(
        error.to_string().contains("changed since it was indexed"),
        "{error}"
    );
}

#[test]
fn truncated_files_and_lying_footer_lengths_are_errors_naming_the_file() {
    let data = file(2);
    let half = data[..data.len() / 2].to_vec();
    let error = index("t.parquet", half).expect_err("truncated").to_string();
    assert!(
        error.contains("t.parquet") && error.contains("PAR1"),
        "{error}"
    );
    let mut lying = data.clone();
    let n = lying.len();
    lying[n - 8..n - 4].copy_from_slice(&(u32::MAX - 7).to_le_bytes());
    let error = index("l.parquet", lying)
        .expect_err("lying length")
        .to_string();
    assert!(
        error.contains("l.parquet") && error.contains("claims"),
        "{error}"
    );
    let error = index("s.parquet", b"PAR1PAR1".to_vec())
        .expect_err("too small")
        .to_string();
    assert!(error.contains("too small"), "{error}");
}

#[test]
fn mutated_footers_decode_or_fail_but_never_panic_and_what_decodes_is_bounded() {
    let data = file(3);
    let n = data.len();
    let footer = u32::from_le_bytes(data[n - 8..n - 4].try_into().expect("4 bytes")) as usize;
    let tail_start = n - 8 - footer;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    let (mut decoded, mut refused) = (0, 0);
    for _ in 0..3000 {
        let mut tail = data[tail_start..].to_vec();
        for _ in 0..1 + next() % 4 {
            let at = next() % footer;
            tail[at] = next() as u8;
        }
        match Footer::decode("m.parquet", n as u64, Bytes::from(tail)) {
            Ok(footer) => {
                decoded += 1;
                // Every range a read would fetch lies inside the file.
                for group in 0..footer.metadata.num_row_groups() {
                    let rows = footer.rows()[group];
                    let leaves = footer.metadata.file_metadata().schema_descr().num_columns();
                    for column in 0..leaves {
                        for range in footer.ranges(group, column, 0..rows) {
                            assert!(range.end <= n as u64, "{range:?}");
                        }
                    }
                }
            }
            Err(error) => {
                refused += 1;
                assert!(error.to_string().starts_with("m.parquet: "), "{error}");
            }
        }
    }
    assert!(
        decoded > 0 && refused > 0,
        "{decoded} decoded, {refused} refused"
    );
}
