//! The checks of one shard's chunk columns: every count, offset and size
//! bounded against the others before anything is sized from them.

use super::meta::{CompressionKind, ShardMeta, MAX_CHUNK_BYTES, MAX_NAME_BYTES, MIN_SAMPLE_BYTES};

/// Checks that `name` (in `field`) is a relative object name.
pub(crate) fn check_name(field: &str, name: &str) -> Result<(), (String, String)> {
    if name.is_empty()
        || name.starts_with('/')
        || name.contains("..")
        || name.len() > MAX_NAME_BYTES
        || name.chars().any(char::is_control)
    {
        return Err((
            field.to_owned(),
            format!(
                "{name:?} is not a relative object name (at most {MAX_NAME_BYTES} bytes, no control characters)"
            ),
        ));
    }
    Ok(())
}

/// Checks that a shard holds samples.
pub(super) fn check_samples(samples: u32) -> Result<(), (String, String)> {
    if samples == 0 {
        return Err((
            "samples".into(),
            "is 0: empty shards are not allowed".into(),
        ));
    }
    Ok(())
}

/// Checks one shard entry: every count, offset and size against the others,
/// so that nothing sized from it later can be absurd. Errors are `(field,
/// reason)`.
pub(super) fn validate_shard(
    shard: &ShardMeta,
    compression: CompressionKind,
) -> Result<(), (String, String)> {
    let err = |field: &str, reason: String| Err((field.to_owned(), reason));
    let chunks = shard.chunk_crc32c.len();
    check_name("name", &shard.name)?;
    check_samples(shard.samples)?;
    if shard.chunk_offsets.len() != chunks + 1 {
        return err(
            "chunk_offsets",
            format!(
                "has {} entries, expected {} (one per chunk plus the end)",
                shard.chunk_offsets.len(),
                chunks + 1
            ),
        );
    }
    if let Some(i) = shard.chunk_offsets.windows(2).position(|w| w[0] >= w[1]) {
        return err(
            "chunk_offsets",
            format!("entry {} is not below entry {}", i, i + 1),
        );
    }
    if shard.chunk_offsets[chunks] > shard.bytes {
        return err(
            "chunk_offsets",
            format!(
                "ends at {}, past the shard's {} bytes",
                shard.chunk_offsets[chunks], shard.bytes
            ),
        );
    }
    if let Some(chunk) = (0..chunks).find(|&c| shard.chunk_stored_bytes(c) > MAX_CHUNK_BYTES) {
        return err(
            "chunk_offsets",
            format!(
                "chunk {chunk} is {} bytes, over the {MAX_CHUNK_BYTES}-byte chunk limit",
                shard.chunk_stored_bytes(chunk)
            ),
        );
    }
    let counted: u64 = match compression {
        CompressionKind::None => {
            if !shard.chunk_samples.is_empty() {
                return err(
                    "chunk_samples",
                    "must be absent for uncompressed shards".into(),
                );
            }
            if !shard.chunk_uncompressed_bytes.is_empty() {
                return err(
                    "chunk_uncompressed_bytes",
                    "must be absent for uncompressed shards".into(),
                );
            }
            if let Some(chunk) =
                (0..chunks).find(|&c| shard.chunk_stored_bytes(c) < MIN_SAMPLE_BYTES)
            {
                return err(
                    "chunk_offsets",
                    format!(
                        "chunk {chunk} is {} bytes, too short for a sample (a tar header is {MIN_SAMPLE_BYTES})",
                        shard.chunk_stored_bytes(chunk)
                    ),
                );
            }
            chunks as u64
        }
        CompressionKind::Zstd => validate_zstd_chunks(shard)?,
    };
    if counted != u64::from(shard.samples) {
        return err(
            "samples",
            format!("is {}, but the chunks hold {counted}", shard.samples),
        );
    }
    Ok(())
}

/// The sample and size columns of a compressed shard; returns the samples
/// the chunks hold.
fn validate_zstd_chunks(shard: &ShardMeta) -> Result<u64, (String, String)> {
    let err = |field: &str, reason: String| Err((field.to_owned(), reason));
    let chunks = shard.chunk_crc32c.len();
    if shard.chunk_samples.len() != chunks {
        return err(
            "chunk_samples",
            format!(
                "has {} entries for {chunks} chunks",
                shard.chunk_samples.len()
            ),
        );
    }
    let sizes = &shard.chunk_uncompressed_bytes;
    if !sizes.is_empty() && sizes.len() != chunks {
        return err(
            "chunk_uncompressed_bytes",
            format!("has {} entries for {chunks} chunks", sizes.len()),
        );
    }
    if let Some(chunk) = sizes.iter().position(|&size| size > MAX_CHUNK_BYTES) {
        return err(
            "chunk_uncompressed_bytes",
            format!(
                "chunk {chunk} is {} bytes, over the {MAX_CHUNK_BYTES}-byte chunk limit",
                sizes[chunk]
            ),
        );
    }
    let mut total = 0u64;
    for (chunk, &n) in shard.chunk_samples.iter().enumerate() {
        if n == 0 {
            return err("chunk_samples", format!("chunk {chunk} holds no samples"));
        }
        let limit = shard.chunk_limit(chunk);
        if u64::from(n) > limit / MIN_SAMPLE_BYTES {
            let (field, what) = if sizes.is_empty() {
                ("chunk_samples", "may decompress to at most")
            } else {
                ("chunk_uncompressed_bytes", "decompresses to")
            };
            return err(
                field,
                format!(
                    "chunk {chunk} holds {n} samples but {what} {limit} bytes \
                     (a sample takes at least {MIN_SAMPLE_BYTES})"
                ),
            );
        }
        total += u64::from(n);
    }
    Ok(total)
}
