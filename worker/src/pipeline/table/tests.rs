//! A Parquet file written by the `parquet` crate's writer, with an offset
//! index and pages of 3 rows, read back through the planning and decoding
//! the loader uses: spans split into reads of about the read size, each
//! fetching only the pages of its rows, decode to the rows written; a null
//! is a field the sample lacks; a plan's bytes are refused when missing.

use std::sync::Arc;

use bytes::Bytes;
use object_store::memory::InMemory;
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use tributary_common::manifest::ColumnKind;
use tributary_common::plan::span::Span;
use tributary_io::parquet::index_file;
use tributary_io::Location;

use super::*;

const GROUP: usize = 24;

/// Two row groups of 24 rows: `label` (int64) and `blob` (binary, 1 KB a
/// row, null every fifth row), pages of 3 rows.
fn file() -> Vec<u8> {
    let schema = Arc::new(
        parse_message_type("message m { required int64 label; optional binary blob; }")
            .expect("schema"),
    );
    let props = Arc::new(
        WriterProperties::builder()
            .set_data_page_row_count_limit(3)
            .set_write_batch_size(3)
            .set_dictionary_enabled(false)
            .build(),
    );
    let mut out = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut out, schema, props).expect("writer");
    for g in 0..2 {
        let mut group = writer.next_row_group().expect("row group");
        let rows: Vec<usize> = (g * GROUP..(g + 1) * GROUP).collect();
        let labels: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
        let mut column = group.next_column().expect("column").expect("label");
        column
            .typed::<Int64Type>()
            .write_batch(&labels, None, None)
            .expect("labels");
        column.close().expect("close");
        let blobs: Vec<ByteArray> = rows
            .iter()
            .filter(|&&r| r % 5 != 0)
            .map(|&r| ByteArray::from(vec![r as u8; 1000]))
            .collect();
        let defs: Vec<i16> = rows.iter().map(|&r| i16::from(r % 5 != 0)).collect();
        let mut column = group.next_column().expect("column").expect("blob");
        column
            .typed::<ByteArrayType>()
            .write_batch(&blobs, Some(&defs), None)
            .expect("blobs");
        column.close().expect("close");
        group.close().expect("close group");
    }
    writer.close().expect("close file");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn spans_split_into_reads_of_their_pages_and_decode_to_the_rows_written() {
    let data = file();
    let size = data.len() as u64;
    let location = Location::from_store(Arc::new(InMemory::new()), "ds", "memory:///ds");
    location
        .put("f.parquet", Bytes::from(data.clone()))
        .await
        .expect("put");
    let (entry, footer) = index_file(&location, "f.parquet", size, None)
        .await
        .expect("indexed");
    assert!(
        footer.pages(0, 1).is_some(),
        "the writer wrote an offset index"
    );
    let footer = Arc::new(footer);
    let starts = entry.row_groups().expect("row groups").starts();
    let columns = column_reads(
        &footer,
        &[
            ("label".into(), ColumnKind::Label),
            ("blob".into(), ColumnKind::Bytes),
        ],
    )
    .expect("columns");
    let span = Span {
        shard: 0,
        start: 5,
        end: 40,
    };
    // About 4 KB a read: several per row group, tiling the span.
    let reads = plan_rows(&footer, &starts, &columns, &span, 4000);
    assert!(reads.len() >= 6, "{} reads", reads.len());
    let mut next = span.start;
    let mut fetched = 0;
    for (want, read) in &reads {
        assert_eq!(want.start, next, "reads tile the span");
        next = want.end;
        let parts: Vec<(u64, Bytes)> = read
            .ranges
            .iter()
            .map(|r| {
                (
                    r.start,
                    Bytes::copy_from_slice(&data[r.start as usize..r.end as usize]),
                )
            })
            .collect();
        fetched += read.ranges.iter().map(|r| r.end - r.start).sum::<u64>();
        let samples = read_rows(read, parts, want.clone(), 100, "f.parquet").expect("decodes");
        assert_eq!(samples.len(), want.len());
        for (sample, row) in samples.iter().zip(want.clone()) {
            assert_eq!(sample.id, 100 + u64::from(row));
            assert_eq!(sample.key, format!("f.parquet#{row}"));
            let label = sample
                .fields
                .iter()
                .find(|f| f.ext == "label")
                .expect("label");
            assert_eq!(&label.data[..], row.to_string().as_bytes());
            let blob = sample.fields.iter().find(|f| f.ext == "blob");
            if row % 5 == 0 {
                assert!(blob.is_none(), "row {row}: a null is no field");
            } else {
                assert_eq!(&blob.expect("blob").data[..], &[row as u8; 1000][..]);
            }
        }
    }
    assert_eq!(next, span.end);
    // Only the pages of rows 5..40 (and a page at each cut twice): far
    // from both whole row groups.
    assert!(fetched < size * 3 / 4, "{fetched} of {size} bytes");

    // A read missing a page it planned is an error, not a guess.
    let (want, read) = &reads[0];
    let short: Vec<(u64, Bytes)> = read.ranges[..read.ranges.len() - 1]
        .iter()
        .map(|r| {
            (
                r.start,
                Bytes::copy_from_slice(&data[r.start as usize..r.end as usize]),
            )
        })
        .collect();
    let error = read_rows(read, short, want.clone(), 0, "f.parquet").expect_err("missing bytes");
    assert!(error.contains("row group 0"), "{error}");
}
