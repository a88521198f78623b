//! The tokenizers `pack --tokenizer` knows: `bytes` (built in: a token per
//! byte, end-of-document 256) and a Hugging Face `tokenizer.json` (the
//! `tokenizers` crate, pure Rust; no download, no training).

use std::path::Path;

use crate::error::{Result, ToolsError};

/// The end-of-document token of the `bytes` tokenizer.
pub const BYTES_EOS: u32 = 256;
/// The special tokens taken as a Hugging Face tokenizer's end of document,
/// in this order, when `--eos-id` is not given.
pub const EOS_TOKENS: [&str; 5] = [
    "<|endoftext|>",
    "</s>",
    "<|end_of_text|>",
    "<eos>",
    "<|eos|>",
];

/// A loaded tokenizer.
pub enum Tokenizer {
    /// Token = byte value; 256 ends a document; vocabulary 257.
    Bytes,
    /// A Hugging Face `tokenizer.json`.
    HuggingFace {
        tokenizer: Box<tokenizers::Tokenizer>,
        /// The file, for the manifest and messages.
        name: String,
        /// One past the largest id in its vocabulary (added tokens
        /// included).
        vocab_size: u64,
    },
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl Tokenizer {
    /// `bytes`, or the path of a Hugging Face `tokenizer.json`.
    pub fn open(spec: &str) -> Result<Self> {
        if spec == "bytes" {
            return Ok(Self::Bytes);
        }
        let path = Path::new(spec);
        if !path.is_file() {
            return Err(ToolsError::Config(format!(
                "--tokenizer {spec}: no such file; pass `bytes` (the built-in byte tokenizer) or the path of a Hugging Face tokenizer.json"
            )));
        }
        let tokenizer = tokenizers::Tokenizer::from_file(path).map_err(|error| {
            ToolsError::Config(format!(
                "--tokenizer {spec}: not a Hugging Face tokenizer.json this build can load ({error})"
            ))
        })?;
        let vocab_size = tokenizer
            .get_vocab(true)
            .values()
            .map(|&id| u64::from(id) + 1)
            .max()
            .unwrap_or(0)
            .max(tokenizer.get_vocab_size(true) as u64);
        let name = path
            .file_name()
            .map_or_else(|| spec.to_owned(), |n| n.to_string_lossy().into_owned());
        Ok(Self::HuggingFace {
            tokenizer: Box::new(tokenizer),
            name,
            vocab_size,
        })
    }

    /// What the manifest records as its `tokenizer`.
    pub fn name(&self) -> String {
        match self {
            Self::Bytes => "bytes".into(),
            Self::HuggingFace { name, .. } => name.clone(),
        }
    }

    /// One past the largest id it produces.
    pub fn vocab_size(&self) -> u64 {
        match self {
            Self::Bytes => u64::from(BYTES_EOS) + 1,
            Self::HuggingFace { vocab_size, .. } => *vocab_size,
        }
    }

    /// Its end-of-document token: 256 for `bytes`; for a Hugging Face
    /// tokenizer the first of [`EOS_TOKENS`] in its vocabulary.
    pub fn default_eos(&self) -> Option<u32> {
        match self {
            Self::Bytes => Some(BYTES_EOS),
            Self::HuggingFace { tokenizer, .. } => EOS_TOKENS
                .iter()
                .find_map(|token| tokenizer.token_to_id(token)),
        }
    }

    /// Appends the ids of `text` to `out` (no special tokens added: the
    /// packer appends the end-of-document token itself).
    pub fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        match self {
            Self::Bytes => {
                out.extend(text.bytes().map(u32::from));
                Ok(())
            }
            Self::HuggingFace { tokenizer, .. } => {
                let encoding = tokenizer
                    .encode_fast(text, false)
                    .map_err(|error| error.to_string())?;
                out.extend_from_slice(encoding.get_ids());
                Ok(())
            }
        }
    }
}
