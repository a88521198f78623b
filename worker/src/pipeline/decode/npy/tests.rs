//! Tests of the .npy parser: numpy-written fixtures, the header grammar,
//! the bounds, and proptests that no input panics.

use proptest::prelude::*;

use super::*;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../../../../tests/data/npy/", $name, ".npy")).as_slice()
    };
}

/// Files written by numpy 2.3 (`worker/tests/data/npy/make.py`) that are
/// read, with their type and shape.
fn accepted() -> [(&'static [u8], DType, &'static [usize]); 8] {
    [
        (fixture!("f32_2x3"), DType::F32, &[2, 3]),
        (fixture!("i64_scalar"), DType::I64, &[]),
        (fixture!("u8_5"), DType::U8, &[5]),
        (fixture!("bool_2x2"), DType::Bool, &[2, 2]),
        (fixture!("f16_3"), DType::F16, &[3]),
        (fixture!("empty_0x3"), DType::I16, &[0, 3]),
        (fixture!("v2_i32_2x2"), DType::I32, &[2, 2]),
        (fixture!("v3_u16_3"), DType::U16, &[3]),
    ]
}

/// Files written by numpy that are refused, with their message.
fn refused() -> [(&'static [u8], &'static str); 6] {
    [
        (
            fixture!("fortran_2x3"),
            "fortran-order arrays are not supported: save with np.ascontiguousarray",
        ),
        (
            fixture!("big_endian_f4"),
            "big-endian dtype \">f4\" is not supported: save a little-endian copy with a.astype('<f4')",
        ),
        (fixture!("object"), "dtype \"|O\" is not supported: object arrays"),
        (fixture!("unicode"), "dtype \"<U2\" is not supported: unicode string arrays"),
        (
            fixture!("structured"),
            "structured dtypes are not supported: save each field as its own array",
        ),
        (fixture!("complex"), "dtype \"<c8\" is not supported: complex numbers"),
    ]
}

/// A file of format `major`.0 with `header` padded as numpy pads it.
fn npy_file(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
    let prefix = if major == 1 { 10 } else { 12 };
    let mut header = header.to_string();
    while !(prefix + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = MAGIC.to_vec();
    out.extend([major, 0]);
    if major == 1 {
        out.extend((header.len() as u16).to_le_bytes());
    } else {
        out.extend((header.len() as u32).to_le_bytes());
    }
    out.extend(header.as_bytes());
    out.extend(data);
    out
}

fn header(descr: &str, shape: &str) -> String {
    format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}")
}

/// What every `Ok` promises.
fn assert_consistent(npy: &Npy<'_>) {
    let elements = npy.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    assert_eq!(
        elements.and_then(|n| n.checked_mul(npy.dtype.size())),
        Some(npy.data.len()),
        "{npy:?}"
    );
}

#[test]
fn numpy_written_files_are_read_with_their_type_shape_and_bytes() {
    for (i, (file, dtype, shape)) in accepted().into_iter().enumerate() {
        let npy = parse(file).unwrap_or_else(|e| panic!("fixture {i}: {e}"));
        assert_eq!((npy.dtype, &npy.shape[..]), (dtype, shape), "fixture {i}");
        assert_eq!(npy.data, &file[file.len() - npy.data.len()..]);
        assert_consistent(&npy);
    }
    let values = |file| parse(file).expect("fixture parses").data.to_vec();
    let f32s: Vec<f32> = values(fixture!("f32_2x3"))
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(f32s, [0.0, 1.5, 3.0, 4.5, 6.0, 7.5]);
    assert_eq!(values(fixture!("i64_scalar")), (-7i64).to_le_bytes());
    assert_eq!(values(fixture!("u8_5")), [0, 1, 2, 254, 255]);
    assert_eq!(values(fixture!("bool_2x2")), [1, 0, 0, 1]);
    // 1.0, -2.5 and 65504 as IEEE half floats.
    assert_eq!(
        values(fixture!("f16_3")),
        [0x00, 0x3c, 0x00, 0xc1, 0xff, 0x7b]
    );
    let i32s: Vec<u8> = [1i32, -2, 3, -4]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(values(fixture!("v2_i32_2x2")), i32s);
    assert_eq!(values(fixture!("v3_u16_3")), [1, 0, 2, 0, 0xff, 0xff]);
}

#[test]
fn numpy_written_files_of_unsupported_kinds_are_refused_saying_why() {
    for (file, message) in refused() {
        let err = parse(file).expect_err(message);
        assert!(
            err.starts_with(message),
            "{err:?} should start with {message:?}"
        );
    }
}

#[test]
fn every_dtype_reads_back_from_its_descr() {
    for dtype in DType::ALL {
        let descr = dtype.descr();
        let size: usize = descr[2..].parse().expect("size digits");
        assert_eq!(dtype.size(), size, "{descr}");
        let file = npy_file(1, &header(descr, "(2,)"), &vec![0; 2 * size]);
        let npy = parse(&file).expect(descr);
        assert_eq!((npy.dtype, npy.shape), (dtype, vec![2]));
    }
}

#[test]
fn the_header_grammar_takes_what_python_writes() {
    let cases = [
        "{\"shape\": (2, 2), \"descr\": \"<i2\", \"fortran_order\": False}",
        "{ 'fortran_order' : False ,\n\t'shape':(2,2,),'descr':'<i2' , }",
        "{'descr': '<i2', 'fortran_order': False, 'shape': (2L, 2L)}",
    ];
    for h in cases {
        let file = npy_file(1, h, &[0; 8]);
        let npy = parse(&file).unwrap_or_else(|e| panic!("{h}: {e}"));
        assert_eq!((npy.dtype, npy.shape), (DType::I16, vec![2, 2]), "{h}");
    }
    for (descr, dtype) in [("=u1", DType::U8), (">i1", DType::I8), ("<b1", DType::Bool)] {
        let file = npy_file(1, &header(descr, "(3,)"), &[0; 3]);
        let npy = parse(&file).expect(descr);
        assert_eq!(npy.dtype, dtype);
    }
}

#[test]
fn headers_outside_the_grammar_are_refused_saying_what_is_wrong() {
    let shaped = |shape: &str| header("<i2", shape);
    let cases = [
        (shaped("(4)"), "npy shape (n) is an int, not a tuple"),
        (
            shaped("[4]"),
            "npy header has '[' at byte 50 where it should have a shape tuple",
        ),
        (
            shaped("(-4,)"),
            "npy header has '-' at byte 51 where it should have a non-negative",
        ),
        (
            shaped("(04,)"),
            "npy shape has a dimension with a leading zero",
        ),
        (shaped("(4,,)"), "npy header has ',' at byte 53"),
        (
            "{'descr': '<i2', 'fortran_order': False, 'shape': (4, }".into(),
            "npy header has '}' at byte 54",
        ),
        (
            shaped("(18446744073709551616,)"),
            "npy shape has a dimension over 2^64",
        ),
        (
            header("=f4", "(1,)"),
            "dtype \"=f4\" does not say its byte order: save with '<f4'",
        ),
        (
            header("|i4", "(1,)"),
            "dtype \"|i4\" does not say its byte order",
        ),
        (
            header("f4", "(1,)"),
            "dtype \"f4\" does not start with a byte order",
        ),
        (
            header("<f16", "(1,)"),
            "dtype \"<f16\" is not supported: of its size",
        ),
        (
            header("<M8[ns]", "(1,)"),
            "dtype \"<M8[ns]\" is not supported: datetimes",
        ),
        (
            header("<x", "(1,)"),
            "dtype \"<x\" is not supported: it is not a numpy type code",
        ),
        (
            "{'descr': '<i2', 'shape': (1,)}".into(),
            "npy header lacks one of",
        ),
        (
            "{'descr': '<i2', 'descr': '<i2', 'fortran_order': False, 'shape': (1,)}".into(),
            "npy header has the key \"descr\" twice",
        ),
        (
            "{'descr': '<i2', 'fortran_order': False, 'shape': (1,), 'x': 1}".into(),
            "npy header has an unknown key \"x\" at byte 56",
        ),
        (
            "{'de\\scr': '<i2'}".into(),
            "npy header has an escape in a string at byte 4",
        ),
        (
            "{'descr: '<i2'}".into(),
            "npy header has '<' at byte 10 where it should have ':'",
        ),
        (
            "{'descr': '<i2".into(),
            "npy header has an unterminated string at byte 10",
        ),
        (
            "{'descr': '<i2', 'fortran_order': false, 'shape': (1,)}".into(),
            "npy header has 'f' at byte 34 where it should have True or False",
        ),
        (
            format!("{} x", shaped("(1,)")),
            "npy header has \"x\" after its closing '}'",
        ),
        (
            "'descr'".into(),
            "npy header has ''' at byte 0 where it should have the header",
        ),
        (
            "{'descr': '<i2',\0}".into(),
            "npy header has byte 0x00 at byte 16",
        ),
    ];
    let wrong: Vec<String> = cases
        .into_iter()
        .filter_map(|(h, message)| match parse(&npy_file(1, &h, &[0; 2])) {
            Err(e) if e.starts_with(message) => None,
            got => Some(format!("{h:?}: {got:?} should start with {message:?}")),
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn dimensions_are_capped_at_max_dims() {
    let dims = |n: usize| format!("({})", vec!["1,"; n].concat());
    let file = npy_file(1, &header("|u1", &dims(MAX_DIMS)), &[7]);
    let npy = parse(&file).expect("32 dims");
    assert_eq!((npy.shape, npy.data), (vec![1; MAX_DIMS], &[7][..]));
    let err = parse(&npy_file(1, &header("|u1", &dims(MAX_DIMS + 1)), &[7])).expect_err("33");
    assert_eq!(err, "npy shape has more than 32 dimensions");
}

#[test]
fn data_of_the_wrong_length_is_refused_with_both_lengths() {
    let h = header("<f4", "(2, 3)");
    let err = parse(&npy_file(1, &h, &[0; 23])).expect_err("short");
    assert_eq!(
        err,
        "truncated: the header says 24 bytes of data, 23 follow"
    );
    let err = parse(&npy_file(1, &h, &[0; 25])).expect_err("long");
    assert_eq!(
        err,
        "trailing bytes: the header says 24 bytes of data, 25 follow"
    );
}

#[test]
fn a_shape_of_more_than_2_64_bytes_is_refused_even_with_a_zero_dimension() {
    for shape in [
        "(4294967296, 4294967296)",
        "(0, 4294967296, 4294967296)",
        "(2305843009213693952,)",
    ] {
        let err = parse(&npy_file(1, &header("<f8", shape), &[])).expect_err(shape);
        assert!(err.ends_with("has more than 2^64 bytes"), "{shape}: {err}");
    }
    let file = npy_file(1, &header("<f8", "(0, 4294967296)"), &[]);
    let npy = parse(&file).expect("empty");
    assert_eq!(npy.shape, [0, 1 << 32]);
}

#[test]
fn framing_errors_say_what_is_wrong() {
    let good = npy_file(2, &header("|u1", "(1,)"), &[1]);
    let version = |major: u8, minor: u8| {
        let mut f = good.clone();
        f[6..8].copy_from_slice(&[major, minor]);
        f
    };
    let with_len = |len: u32| {
        let mut f = good.clone();
        f[8..12].copy_from_slice(&len.to_le_bytes());
        f
    };
    let cases: [(Vec<u8>, &str); 8] = [
        (b"PK\x03\x04".to_vec(), "not an npy file"),
        (good[..7].to_vec(), "truncated npy file: no format version"),
        (good[..10].to_vec(), "truncated npy file: no header length"),
        (version(1, 1), "npy format version 1.1 is not supported"),
        (version(4, 0), "npy format version 4.0 is not supported"),
        (
            with_len(65537),
            "npy header of 65537 bytes is over the limit of 65536",
        ),
        (
            with_len(65536),
            "truncated: the npy header says 65536 bytes, 117 follow",
        ),
        (
            with_len(u32::MAX),
            "npy header of 4294967295 bytes is over the limit",
        ),
    ];
    for (file, message) in cases {
        let err = parse(&file).expect_err(message);
        assert!(
            err.starts_with(message),
            "{err:?} should start with {message:?}"
        );
    }
    assert_eq!(parse(&good).expect("good").data, [1]);
}

fn dtype_strategy() -> impl Strategy<Value = DType> {
    (0..DType::ALL.len()).prop_map(|i| DType::ALL[i])
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
        with_magic in any::<bool>(),
    ) {
        let mut file = if with_magic { MAGIC.to_vec() } else { Vec::new() };
        file.extend(bytes);
        if let Ok(npy) = parse(&file) {
            assert_consistent(&npy);
        }
    }

    #[test]
    fn mutated_files_never_panic_and_ok_means_consistent(
        which in 0..14usize,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0..4u8), 1..6),
    ) {
        let mut file = match accepted().get(which) {
            Some(a) => a.0.to_vec(),
            None => refused()[which - 8].0.to_vec(),
        };
        for (at, byte, op) in edits {
            let at = at % (file.len() + 1);
            match op {
                0 if at < file.len() => file[at] = byte,
                1 => file.insert(at, byte),
                2 if at < file.len() => {
                    file.remove(at);
                }
                _ => file.truncate(at),
            }
        }
        if let Ok(npy) = parse(&file) {
            assert_consistent(&npy);
        }
    }

    #[test]
    fn written_arrays_read_back(
        dtype in dtype_strategy(),
        shape in proptest::collection::vec(0usize..4, 0..5),
        major in 1u8..4,
    ) {
        let dims: Vec<String> = shape.iter().map(|d| format!("{d},")).collect();
        let len = shape.iter().product::<usize>() * dtype.size();
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let h = header(dtype.descr(), &format!("({})", dims.concat()));
        let file = npy_file(major, &h, &data);
        let npy = parse(&file).map_err(TestCaseError::fail)?;
        prop_assert_eq!(
            (npy.dtype, &npy.shape[..], npy.data),
            (dtype, &shape[..], &data[..])
        );
    }
}
