//! Decompressing one zstd chunk within its limit.

use crate::error::FormatError;
use crate::manifest::ShardMeta;
#[cfg(doc)]
use crate::manifest::MAX_CHUNK_BYTES;

/// Decompresses chunk `chunk` of a compressed shard, never past its limit
/// ([`ShardMeta::chunk_limit`]): a few KB of zstd can claim gigabytes. Where
/// the manifest records the chunk's size, that is the limit and the output
/// must be exactly that long; for a manifest without sizes the limit is a
/// cap. The buffer starts at the smaller of the limit and eight times the
/// stored size, and grows with the output: it never exceeds twice the
/// output, and the output never exceeds the limit (at most
/// [`MAX_CHUNK_BYTES`]), whatever the manifest or the frame claims.
pub fn decompress_chunk(
    meta: &ShardMeta,
    chunk: usize,
    stored: &[u8],
) -> Result<Vec<u8>, FormatError> {
    use std::io::Read;
    let fail = |message: String| FormatError::Decompress {
        shard: meta.name.clone(),
        chunk,
        offset: meta.chunk_offsets[chunk],
        message,
    };
    let limit = meta.chunk_limit(chunk);
    let recorded = meta.chunk_uncompressed(chunk);
    let capacity = (stored.len() as u64)
        .saturating_mul(8)
        .saturating_add(64 << 10)
        .min(limit);
    let mut plain = Vec::with_capacity(capacity as usize);
    let decoder =
        zstd::stream::read::Decoder::with_buffer(stored).map_err(|e| fail(e.to_string()))?;
    decoder
        .take(limit + 1)
        .read_to_end(&mut plain)
        .map_err(|e| fail(e.to_string()))?;
    let found = plain.len() as u64;
    if found > limit {
        return Err(fail(match recorded {
            Some(_) => format!("decompresses past its recorded size of {limit} bytes"),
            None => format!(
                "decompresses past {limit} bytes, the limit for a manifest without recorded chunk sizes"
            ),
        }));
    }
    if let Some(size) = recorded.filter(|&size| size != found) {
        return Err(fail(format!(
            "decompresses to {found} bytes, the manifest records {size}"
        )));
    }
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use crate::format::shard::{decode_chunks, ChunkRange};
    use crate::manifest::{CompressionKind, ShardMeta};

    /// One zstd chunk holding `frame`, claiming one sample.
    fn bomb_meta(frame: &[u8], recorded: Option<u64>) -> ShardMeta {
        ShardMeta {
            name: "bomb.tar.zst".into(),
            samples: 1,
            bytes: frame.len() as u64,
            crc32c: crc32c::crc32c(frame),
            chunk_offsets: vec![0, frame.len() as u64],
            chunk_samples: vec![1],
            chunk_crc32c: vec![crc32c::crc32c(frame)],
            chunk_uncompressed_bytes: recorded.into_iter().collect(),
        }
    }

    #[test]
    fn a_zstd_bomb_is_rejected_at_its_recorded_size() {
        // 256 MiB of zeros is a frame of a few KB.
        let frame = zstd::bulk::compress(&vec![0u8; 256 << 20], 3).expect("compress");
        assert!(frame.len() < 64 << 10, "{}", frame.len());
        let range = ChunkRange {
            chunks: 0..1,
            bytes: 0..frame.len() as u64,
            first_sample: 0,
        };
        let data = Bytes::from(frame.clone());
        for (recorded, expect) in [
            (
                Some(4096),
                "decompresses past its recorded size of 4096 bytes",
            ),
            (None, "past 67108864 bytes"),
        ] {
            let meta = bomb_meta(&frame, recorded);
            let err = decode_chunks(
                &meta,
                CompressionKind::Zstd,
                &range,
                &data,
                0,
                0..1,
                &mut Vec::new(),
            )
            .expect_err("a bomb");
            let text = err.to_string();
            assert!(text.contains("shard bomb.tar.zst"), "{text}");
            assert!(text.contains("zstd frame 0 at byte 0"), "{text}");
            assert!(text.contains(expect), "{text}");
        }
    }
}
