//! Token datasets: documents as runs of token ids, and the fixed-length
//! sequences (rows) a language model trains on.
//!
//! A token dataset's shard is a flat little-endian file of token ids (u16
//! or u32), the Megatron `.bin` layout, beside an index of its documents
//! (Megatron's `MMIDIDX` `.idx`, [`megatron`]). The dataset's
//! `manifest.json` ([`manifest`]) says so (`"format": "tributary-tokens"`)
//! and records tokens and documents per shard, so planning never reads a
//! shard.
//!
//! **A row is the plan's sample.** For a [`SequenceSpec`] (length `L` and a
//! [`Packing`]), every shard holds a number of rows that is a pure function
//! of its document index ([`layout::shard_rows`]): `concat` cuts the
//! shard's token stream (its documents in a seeded order per epoch) into
//! windows of `L + 1` tokens overlapping by one, `bestfit` packs whole
//! documents into rows of `L`, `none` is one document per row. The
//! coordinator's plans, splits, commits, resumes, dynamic units and mixes
//! count rows where they count samples for image datasets, so every
//! guarantee they give for samples (nothing lost, nothing twice, equal
//! parts for DDP lockstep, exact resume on a changed world) holds for
//! sequences, and therefore for tokens, unchanged. What a row holds (which
//! pieces of which documents) is [`layout::row_pieces`]; turning rows into
//! a batch's columns is [`rows`].
//!
//! - [`manifest`]: the token manifest (JSON), bounded and validated.
//! - [`megatron`]: Megatron `.idx` files, read within bounds and written.
//! - [`layout`]: rows per shard and the pieces of a run of rows.
//! - [`rows`]: rows into `input_ids`, `labels`, `position_ids`,
//!   `document_ids` (and `attention_mask`, `cu_seqlens`).

pub mod layout;
pub mod manifest;
pub mod megatron;
pub mod rows;

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The width of a dataset's token ids on disk (little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenDtype {
    U16,
    U32,
}

impl TokenDtype {
    /// Bytes per token.
    pub fn width(self) -> u64 {
        match self {
            Self::U16 => 2,
            Self::U32 => 4,
        }
    }

    /// The narrowest dtype holding ids `0..vocab_size`.
    pub fn for_vocab(vocab_size: u64) -> Self {
        if vocab_size <= 1 << 16 {
            Self::U16
        } else {
            Self::U32
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::U16 => "u16",
            Self::U32 => "u32",
        }
    }

    /// Reads the token ids of `bytes` (a whole number of tokens) into
    /// `out`, widened to u32.
    pub fn decode_into(self, bytes: &[u8], out: &mut Vec<u32>) {
        match self {
            Self::U16 => out.extend(
                bytes
                    .chunks_exact(2)
                    .map(|b| u32::from(u16::from_le_bytes([b[0], b[1]]))),
            ),
            Self::U32 => out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            ),
        }
    }
}

impl fmt::Display for TokenDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TokenDtype {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "u16" | "uint16" => Ok(Self::U16),
            "u32" | "uint32" => Ok(Self::U32),
            _ => Err(format!("unknown token dtype `{text}` (expected u16 or u32)")),
        }
    }
}

/// How documents become rows of `length` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Packing {
    /// Pretraining: a shard's documents, in a seeded order per epoch, form
    /// one stream cut into windows of `length + 1` tokens across document
    /// boundaries (window `i` is tokens `i·L ..= (i+1)·L`, so consecutive
    /// windows share one token and every token but the stream's first is a
    /// label exactly once).
    Concat,
    /// Fine-tuning: whole documents best-fit (first-fit decreasing) into
    /// rows of `length` tokens; a document longer than `length` is split
    /// into pieces of `length`; the rest of a row is padding.
    BestFit,
    /// One document per row, truncated or padded to `length`.
    None,
}

impl Packing {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Concat => "concat",
            Self::BestFit => "bestfit",
            Self::None => "none",
        }
    }
}

impl fmt::Display for Packing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Packing {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "concat" => Ok(Self::Concat),
            "bestfit" | "best_fit" | "best-fit" => Ok(Self::BestFit),
            "none" => Ok(Self::None),
            _ => Err(format!(
                "unknown packing `{text}` (expected concat, bestfit or none)"
            )),
        }
    }
}

/// The longest sequence a job may ask for (1 Mi tokens).
pub const MAX_SEQUENCE_LENGTH: u32 = 1 << 20;

/// Fixed-length sequences: what a token job's rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SequenceSpec {
    /// Tokens per row (`L`), 1..=[`MAX_SEQUENCE_LENGTH`].
    pub length: u32,
    pub packing: Packing,
}

/// The documents of one token shard: document `d` is tokens
/// `offsets[d]..offsets[d + 1]` of the shard's token stream (the data
/// object from its header on). Documents are contiguous and in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocIndex {
    offsets: Vec<u64>,
}

impl DocIndex {
    /// An index from `documents + 1` token offsets: the first 0, never
    /// decreasing. `None` otherwise.
    pub fn new(offsets: Vec<u64>) -> Option<Self> {
        let ok = offsets.first() == Some(&0) && offsets.windows(2).all(|w| w[0] <= w[1]);
        ok.then_some(Self { offsets })
    }

    /// An index of documents of these lengths, in order.
    pub fn from_lengths(lengths: impl IntoIterator<Item = u64>) -> Self {
        let mut offsets = vec![0];
        let mut at = 0u64;
        for len in lengths {
            at += len;
            offsets.push(at);
        }
        Self { offsets }
    }

    pub fn documents(&self) -> u64 {
        (self.offsets.len() - 1) as u64
    }

    pub fn tokens(&self) -> u64 {
        *self.offsets.last().expect("at least one offset")
    }

    /// Token range of document `doc`.
    ///
    /// # Panics
    ///
    /// If `doc >= documents()`.
    pub fn doc(&self, doc: u64) -> Range<u64> {
        let d = doc as usize;
        self.offsets[d]..self.offsets[d + 1]
    }

    pub fn doc_len(&self, doc: u64) -> u64 {
        let r = self.doc(doc);
        r.end - r.start
    }

    /// The `documents + 1` offsets.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }
}
