//! The manifest of a token dataset (`manifest.json`, `"format":
//! "tributary-tokens"`): per shard its data object, where its tokens start,
//! how many tokens and documents it holds, and its Megatron `.idx` object
//! ([`super::megatron`]), so that planning in tokens or rows never reads a
//! shard.
//!
//! ```json
//! {"format": "tributary-tokens", "version": 1, "dtype": "u16", "eos_id": 256, "vocab_size": 257,
//!  "tokenizer": "bytes", "tokens": 123, "documents": 7, "bytes": 246,
//!  "shards": [{"name": "shard-000000.bin", "bytes": 246, "offset": 0, "tokens": 123, "documents": 7,
//!              "index": {"name": "shard-000000.idx", "bytes": 222, "crc32c": 1234}}]}
//! ```
//!
//! Names are relative to the manifest's directory (the rule of tar
//! manifests: no leading `/`, no `..`, no control characters). Every count
//! is bounded against the others when the manifest is parsed or built
//! ([`TokenManifest::from_json`], [`TokenManifest::new`]): a shard's tokens
//! fit in its bytes after `offset`, it holds at least one document and no
//! more documents than tokens, its index object's size is possible for that
//! many documents, and the totals are the sums (without overflow). Errors
//! are [`ManifestError`]s naming the shard (`shards[3]`, and its name) and
//! the field.

use serde::{Deserialize, Serialize};

use super::megatron;
use super::TokenDtype;
use crate::error::ManifestError;
use crate::manifest::check_name;

/// The `format` of a token dataset's manifest.
pub const TOKEN_FORMAT: &str = "tributary-tokens";
/// The manifest version this build writes and reads.
pub const TOKEN_VERSION: u32 = 1;
/// The longest `tokenizer` description kept in a manifest.
pub const MAX_TOKENIZER_BYTES: usize = 1024;

/// A shard's Megatron index object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenIndexRef {
    /// Object name, relative to the manifest.
    pub name: String,
    pub bytes: u64,
    /// CRC32C of the whole index object.
    pub crc32c: u32,
}

/// One token shard: a data object of little-endian token ids from byte
/// `offset` on, and its document index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenShard {
    /// The data object's name, relative to the manifest.
    pub name: String,
    /// The data object's size.
    pub bytes: u64,
    /// Where the tokens start in the data object (0 for a `.bin`; the
    /// header's length for an `.npy`).
    #[serde(default)]
    pub offset: u64,
    pub tokens: u64,
    pub documents: u64,
    pub index: TokenIndexRef,
}

impl TokenShard {
    /// The byte range of the shard's tokens in its data object.
    pub fn token_bytes(&self, dtype: TokenDtype) -> std::ops::Range<u64> {
        self.offset..self.offset + self.tokens * dtype.width()
    }

    /// Checks the shard's counts against each other; errors are `(field,
    /// reason)`.
    fn validate(&self, dtype: TokenDtype) -> Result<(), (String, String)> {
        let err = |field: &str, reason: String| Err((field.to_owned(), reason));
        check_name("name", &self.name)?;
        check_name("index.name", &self.index.name)?;
        if self.index.name == self.name {
            return err(
                "index.name",
                "is the data object's name: the index is an object of its own".into(),
            );
        }
        if self.documents == 0 {
            return err("documents", "is 0: empty shards are not allowed".into());
        }
        if self.documents > self.tokens {
            return err(
                "documents",
                format!(
                    "is {}, more than the shard's {} tokens (a document holds at least its end-of-document token)",
                    self.documents, self.tokens
                ),
            );
        }
        let end = self
            .tokens
            .checked_mul(dtype.width())
            .and_then(|b| b.checked_add(self.offset));
        match end {
            Some(end) if end <= self.bytes => {}
            _ => {
                return err(
                    "tokens",
                    format!(
                        "{} {dtype} tokens from offset {} do not fit in the shard's {} bytes",
                        self.tokens, self.offset, self.bytes
                    ),
                )
            }
        }
        let (min, max) = megatron::idx_bytes_bounds(self.documents);
        if self.index.bytes < min || self.index.bytes > max {
            return err(
                "index.bytes",
                format!(
                    "is {}, impossible for an index of {} documents ({min} to {max} bytes)",
                    self.index.bytes, self.documents
                ),
            );
        }
        Ok(())
    }
}

/// A token dataset's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenManifest {
    /// Always [`TOKEN_FORMAT`].
    pub format: String,
    /// Always [`TOKEN_VERSION`].
    pub version: u32,
    pub dtype: TokenDtype,
    /// The end-of-document token the packer appended (or the indexer split
    /// on), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eos_id: Option<u32>,
    /// Token ids are below this, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab_size: Option<u64>,
    /// What made the tokens (`bytes`, a tokenizer file's name, `megatron`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// Totals over the shards.
    pub tokens: u64,
    pub documents: u64,
    pub bytes: u64,
    pub shards: Vec<TokenShard>,
}

/// Just the `format` of a manifest, to tell the kinds apart.
#[derive(Deserialize)]
struct FormatOnly {
    #[serde(default)]
    format: Option<String>,
}

/// Whether `bytes` is a token dataset's manifest (by its `format`; an
/// unparsable document is not).
pub fn is_token_manifest(bytes: &[u8]) -> bool {
    serde_json::from_slice::<FormatOnly>(bytes)
        .is_ok_and(|f| f.format.as_deref() == Some(TOKEN_FORMAT))
}

impl TokenManifest {
    /// A manifest of `shards` (totals summed), validated.
    pub fn new(
        dtype: TokenDtype,
        eos_id: Option<u32>,
        vocab_size: Option<u64>,
        tokenizer: Option<String>,
        shards: Vec<TokenShard>,
    ) -> Result<Self, ManifestError> {
        let overflow = |field: &str| ManifestError::Invalid {
            field: field.to_owned(),
            reason: "the shards' sum overflows 64 bits".into(),
        };
        let mut totals = (0u64, 0u64, 0u64);
        for shard in &shards {
            totals.0 = totals
                .0
                .checked_add(shard.tokens)
                .ok_or_else(|| overflow("tokens"))?;
            totals.1 = totals
                .1
                .checked_add(shard.documents)
                .ok_or_else(|| overflow("documents"))?;
            totals.2 = totals
                .2
                .checked_add(shard.bytes)
                .ok_or_else(|| overflow("bytes"))?;
        }
        let manifest = Self {
            format: TOKEN_FORMAT.to_owned(),
            version: TOKEN_VERSION,
            dtype,
            eos_id,
            vocab_size,
            tokenizer,
            tokens: totals.0,
            documents: totals.1,
            bytes: totals.2,
            shards,
        };
        manifest.validate()?;
        Ok(manifest)
    }

    /// Parses and validates a token manifest.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ManifestError> {
        let de = &mut serde_json::Deserializer::from_slice(bytes);
        let manifest: Self = serde_path_to_error::deserialize(de).map_err(|err| {
            let path = err.path().to_string();
            let message = err.into_inner().to_string();
            ManifestError::Parse { path, message }
        })?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// The manifest as JSON (compact, one line, newline-terminated).
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).expect("a token manifest always serialises");
        out.push(b'\n');
        out
    }

    /// Shard `i`, if there is one.
    pub fn shard(&self, i: usize) -> Option<&TokenShard> {
        self.shards.get(i)
    }

    /// Bytes per token.
    pub fn width(&self) -> u64 {
        self.dtype.width()
    }

    /// Every count against the others; the first problem found.
    pub fn validate(&self) -> Result<(), ManifestError> {
        let invalid = |field: &str, reason: String| {
            Err(ManifestError::Invalid {
                field: field.to_owned(),
                reason,
            })
        };
        if self.format != TOKEN_FORMAT {
            return invalid(
                "format",
                format!("is {:?}, expected {TOKEN_FORMAT:?}", self.format),
            );
        }
        if self.version != TOKEN_VERSION {
            return Err(ManifestError::Version {
                found: self.version,
                supported: TOKEN_VERSION,
            });
        }
        if let Some(vocab) = self.vocab_size {
            let most = 1u64 << (8 * self.dtype.width());
            if vocab == 0 || vocab > most {
                return invalid(
                    "vocab_size",
                    format!("is {vocab}, not in 1..={most} for {} tokens", self.dtype),
                );
            }
            if let Some(eos) = self.eos_id.filter(|&eos| u64::from(eos) >= vocab) {
                return invalid(
                    "eos_id",
                    format!("is {eos}, not below the vocabulary size {vocab}"),
                );
            }
        }
        if let Some(eos) = self.eos_id {
            if self.dtype == TokenDtype::U16 && eos > u32::from(u16::MAX) {
                return invalid("eos_id", format!("is {eos}, past the u16 range"));
            }
        }
        if let Some(tokenizer) = &self.tokenizer {
            if tokenizer.len() > MAX_TOKENIZER_BYTES || tokenizer.chars().any(char::is_control) {
                return invalid(
                    "tokenizer",
                    format!(
                        "must be at most {MAX_TOKENIZER_BYTES} bytes without control characters"
                    ),
                );
            }
        }
        if self.shards.is_empty() {
            return invalid(
                "shards",
                "is empty: a dataset holds at least one shard".into(),
            );
        }
        let mut totals = (0u64, 0u64, 0u64);
        let mut names = std::collections::HashSet::with_capacity(self.shards.len() * 2);
        for (i, shard) in self.shards.iter().enumerate() {
            let named = |field: String, reason: String| ManifestError::Invalid {
                field: format!("shards[{i}].{field}"),
                reason: format!("(shard {:?}) {reason}", shard.name),
            };
            shard
                .validate(self.dtype)
                .map_err(|(field, reason)| named(field, reason))?;
            for (field, name) in [("name", &shard.name), ("index.name", &shard.index.name)] {
                if !names.insert(name.as_str()) {
                    return Err(named(
                        field.into(),
                        format!("{name:?} is named twice in the manifest"),
                    ));
                }
            }
            // Each shard's tokens fit in its bytes, so the sums of tokens and
            // documents are bounded by the sum of bytes: only bytes can
            // overflow, and that is checked first.
            totals.2 = totals
                .2
                .checked_add(shard.bytes)
                .ok_or_else(|| named("bytes".into(), "the sum of shard bytes overflows".into()))?;
            totals.0 += shard.tokens;
            totals.1 += shard.documents;
        }
        for (field, found, sum) in [
            ("tokens", self.tokens, totals.0),
            ("documents", self.documents, totals.1),
            ("bytes", self.bytes, totals.2),
        ] {
            if found != sum {
                return invalid(field, format!("is {found}, but the shards sum to {sum}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
