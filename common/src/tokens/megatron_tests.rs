use proptest::prelude::*;

use super::*;

/// An `.idx` built field by field the way Megatron-Core's
/// `MMapIndexedDatasetBuilder.finalize` (`_IndexWriter.write`) writes it:
/// magic, `<Q` version, `<B` dtype code, `<Q` sequence count, `<Q` document
/// count, `int32` lengths, `int64` byte pointers (running sums of
/// `length * itemsize`), `int64` document indices.
fn megatron_writer(code: u8, itemsize: u64, lengths: &[i32], document_indices: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"MMIDIDX\x00\x00");
    out.extend_from_slice(&1u64.to_le_bytes());
    out.push(code);
    out.extend_from_slice(&(lengths.len() as u64).to_le_bytes());
    out.extend_from_slice(&(document_indices.len() as u64).to_le_bytes());
    for len in lengths {
        out.extend_from_slice(&len.to_le_bytes());
    }
    let mut pointer = 0i64;
    for len in lengths {
        out.extend_from_slice(&pointer.to_le_bytes());
        pointer += i64::from(*len) * itemsize as i64;
    }
    for d in document_indices {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out
}

fn expected(dtype: TokenDtype, lengths: &[u64]) -> Expected {
    Expected {
        dtype,
        data_offset: 0,
        tokens: lengths.iter().sum(),
        documents: lengths.len() as u64,
    }
}

#[test]
fn megatron_idx_round_trips_with_megatrons_own_layout() {
    let lengths = [5u64, 1, 7, 3];
    let index = DocIndex::from_lengths(lengths);
    for (dtype, code, size) in [(TokenDtype::U16, 8, 2), (TokenDtype::U32, 4, 4)] {
        let ours = encode_idx(dtype, &index, 0);
        let theirs = megatron_writer(code, size, &[5, 1, 7, 3], &[0, 1, 2, 3, 4]);
        assert_eq!(ours, theirs, "{dtype}: the bytes Megatron writes");
        let back = decode_idx("x.idx", &theirs, &expected(dtype, &lengths)).expect("reads");
        assert_eq!(back, index);
        let (min, max) = idx_bytes_bounds(4);
        assert!((min..=max).contains(&(theirs.len() as u64)));
    }
}

#[test]
fn megatron_idx_reads_sequences_grouped_into_documents() {
    // Megatron groups sentences into documents; each sequence is a
    // document to us.
    let bytes = megatron_writer(8, 2, &[2, 3, 4], &[0, 2, 3]);
    let idx = read_idx("g.idx", &bytes, 0, Some(18)).expect("reads");
    assert_eq!(idx.index, DocIndex::from_lengths([2, 3, 4]));
    assert_eq!(idx.dtype, TokenDtype::U16);
}

#[test]
fn megatron_idx_with_a_data_offset() {
    let index = DocIndex::from_lengths([3, 2]);
    let bytes = encode_idx(TokenDtype::U32, &index, 128);
    let idx = read_idx("npy.idx", &bytes, 128, Some(128 + 20)).expect("reads");
    assert_eq!(idx.index, index);
    let error = read_idx("npy.idx", &bytes, 0, None).expect_err("offset 0 is wrong");
    assert_eq!(error.offset, HEADER_BYTES + 4 * 2, "{error}");
    let error = read_idx("npy.idx", &bytes, 128, Some(147)).expect_err("data too short");
    assert!(
        error
            .to_string()
            .contains("past the data object's 147 bytes"),
        "{error}"
    );
}

#[test]
fn megatron_idx_refuses_a_gap_naming_the_file_and_entry() {
    let mut bytes = megatron_writer(8, 2, &[2, 3, 4], &[0, 1, 2, 3]);
    // Sequence 2's pointer (the third i64 after 3 lengths) off by 2 bytes.
    let at = (HEADER_BYTES + 4 * 3 + 8 * 2) as usize;
    bytes[at] += 2;
    let error = decode_idx(
        "data/shard-7.idx",
        &bytes,
        &expected(TokenDtype::U16, &[2, 3, 4]),
    )
    .expect_err("gap");
    assert_eq!(error.file, "data/shard-7.idx");
    assert_eq!(error.offset, at as u64);
    assert!(
        error
            .to_string()
            .starts_with("data/shard-7.idx: at byte 62"),
        "{error}"
    );
    assert!(error.reason.contains("contiguous"), "{error}");
}

#[test]
fn megatron_idx_refuses_hostile_headers() {
    let good = megatron_writer(8, 2, &[2, 3], &[0, 1, 2]);
    let cases: Vec<(Vec<u8>, u64, &str)> = vec![
        (good[..20].to_vec(), 0, "shorter than"),
        (
            {
                let mut b = good.clone();
                b[0] = b'X';
                b
            },
            0,
            "magic",
        ),
        (
            {
                let mut b = good.clone();
                b[9] = 2;
                b
            },
            9,
            "version 2",
        ),
        (
            {
                let mut b = good.clone();
                b[17] = 1;
                b
            },
            17,
            "uint8",
        ),
        (
            {
                let mut b = good.clone();
                b[18..26].copy_from_slice(&u64::MAX.to_le_bytes());
                b
            },
            18,
            "sequence_count",
        ),
        (
            {
                let mut b = good.clone();
                b[26..34].copy_from_slice(&(1u64 << 61).to_le_bytes());
                b
            },
            26,
            "document_count",
        ),
        (
            {
                let mut b = good.clone();
                b.extend_from_slice(&[0; 8]);
                b
            },
            good.len() as u64,
            "take",
        ),
        (
            {
                let mut b = good.clone();
                let at = HEADER_BYTES as usize + 4;
                b[at..at + 4].copy_from_slice(&(-3i32).to_le_bytes());
                b
            },
            HEADER_BYTES + 4,
            "negative",
        ),
        (
            {
                let mut b = good.clone();
                let at = good.len() - 8;
                b[at..].copy_from_slice(&5i64.to_le_bytes());
                b
            },
            good.len() as u64 - 8,
            "document_indices[2]",
        ),
    ];
    for (bytes, offset, what) in cases {
        let error = read_idx("bad.idx", &bytes, 0, None).expect_err(what);
        assert_eq!(error.file, "bad.idx");
        assert_eq!(error.offset, offset, "{what}: {error}");
        assert!(error.to_string().contains(what), "{what}: {error}");
    }
}

#[test]
fn megatron_idx_refuses_a_disagreeing_manifest() {
    let bytes = megatron_writer(8, 2, &[2, 3], &[0, 1, 2]);
    for (exp, what) in [
        (expected(TokenDtype::U32, &[2, 3]), "dtype"),
        (expected(TokenDtype::U16, &[5]), "documents"),
        (
            Expected {
                tokens: 6,
                ..expected(TokenDtype::U16, &[2, 3])
            },
            "tokens",
        ),
    ] {
        let error = decode_idx("m.idx", &bytes, &exp).expect_err(what);
        assert!(error.to_string().contains(what), "{error}");
    }
}

proptest! {
    /// Random bytes, truncations and flipped bytes of a good file are
    /// errors or indexes, never a panic or a huge allocation.
    #[test]
    fn megatron_idx_never_panics_on_hostile_bytes(
        lengths in proptest::collection::vec(0u64..50, 0..20),
        cut in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        noise in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let index = DocIndex::from_lengths(lengths.iter().copied());
        let good = encode_idx(TokenDtype::U16, &index, 0);
        prop_assert_eq!(&read_idx("p.idx", &good, 0, None).expect("good").index, &index);
        let truncated = &good[..cut.index(good.len() + 1)];
        if truncated.len() < good.len() {
            prop_assert!(read_idx("p.idx", truncated, 0, None).is_err());
        }
        let mut flipped = good.clone();
        for (at, byte) in &flips {
            let i = at.index(flipped.len());
            flipped[i] = *byte;
        }
        let _ = read_idx("p.idx", &flipped, 0, Some(1000));
        let mut noisy = MAGIC.to_vec();
        noisy.extend_from_slice(&noise);
        let _ = read_idx("p.idx", &noisy, 0, None);
        let _ = read_idx("p.idx", &noise, 0, None);
    }
}
