use std::ops::Range;

use proptest::prelude::*;

use super::*;

const P: i64 = 99;
const X: i64 = IGNORE_LABEL;

fn spec(length: u32, packing: Packing, ids: IdType) -> RowsSpec {
    RowsSpec {
        sequence: SequenceSpec { length, packing },
        ids,
        cu_seqlens: true,
        pad_id: P as u32,
    }
}

/// The values of an id column.
fn values(bytes: &[u8], ids: IdType) -> Vec<i64> {
    match ids {
        IdType::I64 => bytes
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect(),
        IdType::I32 => bytes
            .chunks_exact(4)
            .map(|b| i64::from(i32::from_le_bytes(b.try_into().expect("4 bytes"))))
            .collect(),
    }
}

fn int32s(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect()
}

/// Columns as values, one row-major vector each.
#[derive(Debug, PartialEq, Eq)]
struct Columns {
    input_ids: Vec<i64>,
    labels: Vec<i64>,
    position_ids: Vec<i64>,
    document_ids: Vec<i64>,
    attention_mask: Option<Vec<u8>>,
    cu_seqlens: Option<Vec<i32>>,
}

fn columns(batch: &SequenceBatch) -> Columns {
    let n = batch.rows * batch.length * batch.ids.width();
    for column in [
        &batch.input_ids,
        &batch.labels,
        &batch.position_ids,
        &batch.document_ids,
    ] {
        assert_eq!(column.len(), n);
    }
    Columns {
        input_ids: values(&batch.input_ids, batch.ids),
        labels: values(&batch.labels, batch.ids),
        position_ids: values(&batch.position_ids, batch.ids),
        document_ids: values(&batch.document_ids, batch.ids),
        attention_mask: batch.attention_mask.clone(),
        cu_seqlens: batch.cu_seqlens.as_deref().map(int32s),
    }
}

fn build_rows(rows: &[(Vec<u32>, Vec<u32>)], spec: &RowsSpec) -> Result<SequenceBatch, RowError> {
    let encoded: Vec<(Vec<u8>, Vec<u8>)> = rows.iter().map(|(t, s)| encode_row(t, s)).collect();
    let rows: Vec<Row<'_>> = encoded
        .iter()
        .map(|(tokens, segments)| Row { tokens, segments })
        .collect();
    build(&rows, spec)
}

const IDS: [IdType; 2] = [IdType::I64, IdType::I32];

#[test]
fn concat_columns_by_hand() {
    let rows = [
        (vec![10, 11, 12, 13, 14], vec![2, 3]),
        // Starts with the token the row before ended with.
        (vec![14, 20, 21, 22, 23], vec![1, 4]),
        // Its last piece is the label-only token.
        (vec![23, 24, 25, 26, 27], vec![4, 1]),
    ];
    for ids in IDS {
        let batch = build_rows(&rows, &spec(4, Packing::Concat, ids)).expect("good rows");
        assert_eq!((batch.rows, batch.length, batch.ids), (3, 4, ids));
        assert_eq!(
            columns(&batch),
            Columns {
                input_ids: vec![10, 11, 12, 13, 14, 20, 21, 22, 23, 24, 25, 26],
                labels: vec![11, 12, 13, 14, 20, 21, 22, 23, 24, 25, 26, 27],
                position_ids: vec![0, 1, 0, 1, 0, 0, 1, 2, 0, 1, 2, 3],
                document_ids: vec![0, 0, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0],
                attention_mask: None,
                cu_seqlens: Some(vec![0, 2, 4, 5, 8, 12]),
            },
            "{ids:?}"
        );
    }
}

#[test]
fn bestfit_columns_by_hand() {
    let rows = [
        (vec![1, 2, 3, 7, 8], vec![3, 2]),
        (vec![4, 5], vec![2]),
        (vec![], vec![]),
    ];
    for ids in IDS {
        let batch = build_rows(&rows, &spec(5, Packing::BestFit, ids)).expect("good rows");
        assert_eq!(
            columns(&batch),
            Columns {
                input_ids: vec![1, 2, 3, 7, 8, 4, 5, P, P, P, P, P, P, P, P],
                labels: vec![2, 3, X, 8, X, 5, X, X, X, X, X, X, X, X, X],
                position_ids: vec![0, 1, 2, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0],
                document_ids: vec![0, 0, 0, 1, 1, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1],
                attention_mask: Some(vec![1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
                cu_seqlens: Some(vec![0, 3, 5, 7, 10, 15]),
            },
            "{ids:?}"
        );
    }
}

#[test]
fn none_columns_by_hand() {
    let rows = [(vec![5, 6, 7], vec![3]), (vec![9], vec![1])];
    for ids in IDS {
        let mut spec = spec(3, Packing::None, ids);
        spec.cu_seqlens = false;
        let batch = build_rows(&rows, &spec).expect("good rows");
        assert_eq!(
            columns(&batch),
            Columns {
                input_ids: vec![5, 6, 7, 9, P, P],
                labels: vec![6, 7, X, X, X, X],
                position_ids: vec![0, 1, 2, 0, 0, 0],
                document_ids: vec![0, 0, 0, 0, -1, -1],
                attention_mask: Some(vec![1, 1, 1, 1, 0, 0]),
                cu_seqlens: None,
            },
            "{ids:?}"
        );
        spec.cu_seqlens = true;
        let batch = build_rows(&rows, &spec).expect("good rows");
        assert_eq!(columns(&batch).cu_seqlens, Some(vec![0, 3, 4, 6]));
    }
}

#[test]
fn an_empty_batch_has_empty_columns() {
    let batch = build(&[], &spec(8, Packing::Concat, IdType::I64)).expect("no rows");
    assert_eq!(batch.rows, 0);
    assert!(batch.input_ids.is_empty());
    assert_eq!(batch.cu_seqlens.as_deref().map(int32s), Some(vec![0]));
}

#[test]
fn malformed_rows_are_errors_naming_the_row() {
    let good = encode_row(&[1, 2, 3], &[3]);
    let concat = spec(2, Packing::Concat, IdType::I64);
    let bestfit = spec(2, Packing::BestFit, IdType::I64);
    let cases: Vec<(RowsSpec, Vec<u8>, Vec<u8>, RowError)> = vec![
        (
            concat,
            vec![0; 11],
            good.1.clone(),
            RowError::TokenBytes { row: 1, bytes: 11 },
        ),
        (
            concat,
            good.0.clone(),
            vec![3, 0, 0],
            RowError::SegmentBytes { row: 1, bytes: 3 },
        ),
        (
            concat,
            good.0.clone(),
            encode_row(&[], &[2, 0, 1]).1,
            RowError::EmptySegment { row: 1, segment: 1 },
        ),
        (
            concat,
            good.0.clone(),
            encode_row(&[], &[2, 2]).1,
            RowError::SegmentSum {
                row: 1,
                sum: 4,
                tokens: 3,
            },
        ),
        (
            concat,
            encode_row(&[1, 2], &[]).0,
            encode_row(&[], &[2]).1,
            RowError::ConcatLength {
                row: 1,
                tokens: 2,
                expected: 3,
            },
        ),
        (
            bestfit,
            good.0.clone(),
            good.1.clone(),
            RowError::TooLong {
                row: 1,
                tokens: 3,
                length: 2,
                packing: Packing::BestFit,
            },
        ),
        (
            RowsSpec {
                ids: IdType::I32,
                ..concat
            },
            encode_row(&[1, 1 << 31, 3], &[]).0,
            good.1.clone(),
            RowError::IdRange {
                row: 1,
                position: 1,
                id: 1 << 31,
            },
        ),
    ];
    for (spec, tokens, segments, want) in cases {
        let first = if spec.sequence.packing == Packing::Concat {
            good.clone()
        } else {
            encode_row(&[1], &[1])
        };
        let rows = [
            Row {
                tokens: &first.0,
                segments: &first.1,
            },
            Row {
                tokens: &tokens,
                segments: &segments,
            },
        ];
        let error = build(&rows, &spec).expect_err("a malformed row");
        assert_eq!(error, want);
        assert!(error.to_string().starts_with("row 1: "), "{error}");
    }
    let pad = RowsSpec {
        pad_id: 1 << 31,
        ..spec(2, Packing::None, IdType::I32)
    };
    assert_eq!(
        build(&[], &pad).expect_err("pad"),
        RowError::PadRange { pad_id: 1 << 31 }
    );
    assert_eq!(
        build(&[], &spec(0, Packing::None, IdType::I32)).expect_err("0"),
        RowError::ZeroLength
    );
    // More positions than cu_seqlens counts: refused before allocating.
    let empty = Row {
        tokens: &[],
        segments: &[],
    };
    let huge = spec(1 << 20, Packing::BestFit, IdType::I64);
    assert_eq!(
        build(&[empty; 2049], &huge).expect_err("over 2^31 positions"),
        RowError::TooManyPositions {
            rows: 2049,
            length: 1 << 20
        }
    );
    // Token ids of 2^31 and more fit int64.
    let wide = encode_row(&[1, u32::MAX, 3], &[3]);
    let batch = build(
        &[Row {
            tokens: &wide.0,
            segments: &wide.1,
        }],
        &concat,
    )
    .expect("int64");
    assert_eq!(
        values(&batch.input_ids, IdType::I64),
        vec![1, i64::from(u32::MAX)]
    );
}

/// The columns written one position at a time, straight from the module
/// docs.
fn reference(rows: &[(Vec<u32>, Vec<u32>)], spec: &RowsSpec) -> Columns {
    let length = spec.sequence.length as usize;
    let concat = spec.sequence.packing == Packing::Concat;
    let mut c = Columns {
        input_ids: vec![],
        labels: vec![],
        position_ids: vec![],
        document_ids: vec![],
        attention_mask: (!concat).then(Vec::new),
        cu_seqlens: Some(vec![0]),
    };
    for (r, (tokens, segments)) in rows.iter().enumerate() {
        // Piece and position in piece of each token.
        let mut owner = vec![];
        for (j, &len) in segments.iter().enumerate() {
            owner.extend((0..len as i64).map(|k| (j as i64, k)));
        }
        let mut ends = vec![];
        let mut at = 0;
        for &len in segments {
            at += len as usize;
            if at.min(length) > ends.last().copied().unwrap_or(0) {
                ends.push(at.min(length));
            }
        }
        if ends.last().copied().unwrap_or(0) < length {
            ends.push(length);
        }
        let cu = c.cu_seqlens.as_mut().expect("asked");
        cu.extend(ends.iter().map(|&e| (r * length + e) as i32));
        for i in 0..length {
            let real = i < tokens.len();
            c.input_ids.push(if real {
                i64::from(tokens[i])
            } else {
                i64::from(spec.pad_id)
            });
            let same = real && i + 1 < tokens.len() && (concat || owner[i].0 == owner[i + 1].0);
            c.labels
                .push(if same { i64::from(tokens[i + 1]) } else { X });
            c.position_ids.push(if real { owner[i].1 } else { 0 });
            c.document_ids.push(if real { owner[i].0 } else { -1 });
            if let Some(mask) = c.attention_mask.as_mut() {
                mask.push(u8::from(real));
            }
        }
    }
    c
}

/// Rows of random pieces for `packing` and `length`.
fn random_rows(length: usize, concat: bool) -> impl Strategy<Value = Vec<(Vec<u32>, Vec<u32>)>> {
    let row = prop::collection::vec(1u32..=(length as u32 + 1), 0..6).prop_flat_map(
        move |mut segments| {
            // Cut the pieces to the row's size: L + 1 for concat, at most L else.
            let want = if concat { length + 1 } else { length };
            let mut kept = Vec::new();
            let mut total = 0;
            for s in segments.drain(..) {
                let s = (s as usize).min(want - total);
                if s > 0 {
                    kept.push(s as u32);
                    total += s;
                }
            }
            if concat && total < want {
                kept.push((want - total) as u32);
                total = want;
            }
            (prop::collection::vec(0u32..1 << 31, total), Just(kept))
        },
    );
    prop::collection::vec(row, 0..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn build_writes_what_the_module_docs_say(
        (packing, length, rows) in prop_oneof![
            Just(Packing::Concat), Just(Packing::BestFit), Just(Packing::None)
        ]
        .prop_flat_map(|packing| (1usize..12).prop_flat_map(move |length| {
            (Just(packing), Just(length), random_rows(length, packing == Packing::Concat))
        })),
        ids in prop_oneof![Just(IdType::I64), Just(IdType::I32)],
    ) {
        let spec = spec(length as u32, packing, ids);
        let batch = build_rows(&rows, &spec).expect("good rows");
        prop_assert_eq!(columns(&batch), reference(&rows, &spec));
    }
}

#[test]
fn row_from_reads_takes_each_piece_from_its_read() {
    // A shard of ids 100 + t; reads 2..6 and 10..12.
    let ids = |range: Range<u64>, dtype: TokenDtype| -> Vec<u8> {
        range
            .flat_map(|t| match dtype {
                TokenDtype::U16 => (100 + t as u16).to_le_bytes().to_vec(),
                TokenDtype::U32 => (100 + t as u32).to_le_bytes().to_vec(),
            })
            .collect()
    };
    let pieces = [
        Piece {
            doc: 1,
            start: 4,
            end: 6,
        },
        Piece {
            doc: 3,
            start: 10,
            end: 11,
        },
        Piece {
            doc: 0,
            start: 2,
            end: 3,
        },
    ];
    for dtype in [TokenDtype::U16, TokenDtype::U32] {
        let (a, b) = (ids(2..6, dtype), ids(10..12, dtype));
        let reads = [(2..6, a.as_slice()), (10..12, b.as_slice())];
        let got = row_from_reads(&pieces, &reads, dtype).expect("all read");
        assert_eq!(
            got,
            encode_row(&[104, 105, 110, 102], &[2, 1, 1]),
            "{dtype}"
        );
        // A piece past its read, before every read, or a short read.
        let past = [Piece {
            doc: 1,
            start: 5,
            end: 7,
        }];
        let error = row_from_reads(&past, &reads, dtype).expect_err("unread");
        assert_eq!((error.doc, error.start, error.end), (1, 5, 7));
        assert!(
            error
                .to_string()
                .starts_with("tokens 5..7 (document 1) are not in"),
            "{error}"
        );
        let before = [Piece {
            doc: 0,
            start: 0,
            end: 1,
        }];
        assert!(row_from_reads(&before, &reads, dtype).is_err());
        let short = [(2..6, &a[..a.len() - 1])];
        let error = row_from_reads(&pieces[..1], &short, dtype).expect_err("short");
        assert!(error.to_string().contains("read 2..6 holds"), "{error}");
    }
}
