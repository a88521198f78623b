//! `tributary pack --tokenizer`: a corpus of text documents into a token
//! dataset.
//!
//! One thread reads the corpus in order, in batches of about
//! [`TokenPackOptions::batch_bytes`] of text (two batches read ahead); each
//! batch is tokenized on the rayon pool, one document per task, and its
//! documents are appended in corpus order (so the output is the same on any
//! number of cores) to the shard being written: each document's ids and
//! then the end-of-document id, little-endian u16 (when the vocabulary and
//! the end-of-document id fit) or u32. A shard is closed once it holds
//! [`TokenPackOptions::shard_tokens`] tokens (documents are never split);
//! its data object (`shard-000000.bin`) streams to the store while it is
//! written, its Megatron index (`shard-000000.idx`) follows it, and the
//! manifest comes last. A document that tokenizes to nothing is skipped
//! and counted. A run that fails deletes the shards it wrote; one that
//! replaces a dataset (`force`) writes under new names and deletes the old
//! objects only once the new manifest is in place, as the tar packer does.

use std::path::PathBuf;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

use rayon::prelude::*;
use tokio::runtime::Handle;
use tributary_common::manifest::MANIFEST_NAME;
use tributary_common::tokens::manifest::{TokenIndexRef, TokenManifest, TokenShard};
use tributary_common::tokens::megatron::encode_idx;
use tributary_common::tokens::{DocIndex, TokenDtype};
use tributary_io::upload::OnUploaded;
use tributary_io::{BlockingUpload, Location, Upload, UploadMeter, UploadOptions};

use super::corpus::{self, Document, Reader};
use super::tokenizer::Tokenizer;
use super::{existing_objects, shard_names};
use crate::error::{Result, ToolsError};
use crate::pack::{delete_all, new_version};
use crate::progress::Progress;

/// How `pack --tokenizer` packs.
#[derive(Debug, Clone)]
pub struct TokenPackOptions {
    /// `bytes` or the path of a Hugging Face `tokenizer.json`.
    pub tokenizer: String,
    /// The JSONL field holding a document's text.
    pub text_field: String,
    /// The end-of-document id (default: the tokenizer's).
    pub eos_id: Option<u32>,
    /// Close a shard once it holds this many tokens.
    pub shard_tokens: u64,
    /// Text read (and tokenized in parallel) at a time.
    pub batch_bytes: usize,
    pub upload: UploadOptions,
    /// Replace a dataset already at the destination.
    pub force: bool,
}

impl Default for TokenPackOptions {
    fn default() -> Self {
        Self {
            tokenizer: "bytes".into(),
            text_field: "text".into(),
            eos_id: None,
            shard_tokens: 32 << 20,
            batch_bytes: 4 << 20,
            upload: UploadOptions::default(),
            force: false,
        }
    }
}

/// What a token pack wrote.
#[derive(Debug, Clone)]
pub struct TokenPackSummary {
    pub shards: usize,
    pub documents: u64,
    pub tokens: u64,
    pub bytes: u64,
    pub dtype: TokenDtype,
    pub eos_id: u32,
    pub vocab_size: u64,
    /// Documents skipped because they hold no tokens.
    pub empty_documents: u64,
    /// Files in corpus directories that are not corpus files.
    pub skipped_files: u64,
}

/// Packs the corpus `paths` into a token dataset at `dest`.
pub async fn pack_tokens(
    paths: &[PathBuf],
    dest: &Location,
    options: &TokenPackOptions,
    progress: Arc<dyn Progress>,
) -> Result<TokenPackSummary> {
    if options.shard_tokens == 0 || options.batch_bytes == 0 {
        return Err(ToolsError::Config(
            "shard_tokens and batch_bytes must be at least 1".into(),
        ));
    }
    let (paths, opts) = (paths.to_vec(), options.clone());
    let (files, skipped_files, tokenizer) = tokio::task::spawn_blocking(move || {
        let (files, skipped) = corpus::files(&paths)?;
        let tokenizer = Tokenizer::open(&opts.tokenizer)?;
        Ok::<_, ToolsError>((files, skipped, tokenizer))
    })
    .await
    .map_err(|e| ToolsError::Stopped(format!("corpus scan panicked: {e}")))??;
    let eos_id = options.eos_id.or_else(|| tokenizer.default_eos()).ok_or_else(|| {
        ToolsError::Config(format!(
            "--tokenizer {}: it has none of the end-of-document tokens {} in its vocabulary; pass --eos-id N",
            options.tokenizer,
            super::tokenizer::EOS_TOKENS.join(", ")
        ))
    })?;
    let vocab_size = tokenizer.vocab_size().max(u64::from(eos_id) + 1);
    let dtype = TokenDtype::for_vocab(vocab_size);
    let old = existing_objects(dest, options.force).await?;
    let version = old.as_ref().map(|_| new_version());
    let job = Job {
        reader: Reader::new(files, &options.text_field, options.batch_bytes),
        tokenizer,
        eos_id,
        dtype,
        shard_tokens: options.shard_tokens,
        dest: dest.clone(),
        upload: options.upload,
        version,
        progress,
        meter: Arc::new(UploadMeter::default()),
        written: Vec::new(),
    };
    let handle = Handle::current();
    let (job, built) = tokio::task::spawn_blocking(move || {
        let mut job = job;
        let built = job.run(&handle);
        (job, built)
    })
    .await
    .map_err(|e| ToolsError::Stopped(format!("the token packer panicked: {e}")))?;
    let (shards, empty_documents) = match built {
        Ok(built) => built,
        Err(error) => {
            delete_all(dest, &job.written, "a shard of the failed pack").await;
            return Err(error);
        }
    };
    let manifest = TokenManifest::new(
        dtype,
        Some(eos_id),
        Some(vocab_size),
        Some(job.tokenizer.name()),
        shards,
    )
    .map_err(|error| {
        ToolsError::Stopped(format!("the packer built an invalid manifest: {error}"))
    })?;
    if let Err(error) = dest.put(MANIFEST_NAME, manifest.to_json().into()).await {
        delete_all(dest, &job.written, "a shard of the failed pack").await;
        return Err(error.into());
    }
    if let Some(old) = old {
        let new: std::collections::HashSet<&String> = job.written.iter().collect();
        let stale: Vec<String> = old.into_iter().filter(|n| !new.contains(n)).collect();
        delete_all(dest, &stale, "an object of the replaced dataset").await;
    }
    Ok(TokenPackSummary {
        shards: manifest.shards.len(),
        documents: manifest.documents,
        tokens: manifest.tokens,
        bytes: manifest.bytes,
        dtype,
        eos_id,
        vocab_size,
        empty_documents,
        skipped_files,
    })
}

/// One pack run, on a blocking thread.
struct Job {
    reader: Reader,
    tokenizer: Tokenizer,
    eos_id: u32,
    dtype: TokenDtype,
    shard_tokens: u64,
    dest: Location,
    upload: UploadOptions,
    version: Option<String>,
    progress: Arc<dyn Progress>,
    meter: Arc<UploadMeter>,
    /// Objects written (or begun), to delete if the run fails.
    written: Vec<String>,
}

/// The shard being written.
struct Open {
    data: String,
    sink: BlockingUpload,
    lengths: Vec<u64>,
    tokens: u64,
    buffer: Vec<u8>,
}

impl Job {
    /// Reads, tokenizes and writes every shard; returns their entries and
    /// the count of empty documents.
    fn run(&mut self, handle: &Handle) -> Result<(Vec<TokenShard>, u64)> {
        // The reader runs ahead by two batches on a thread of its own.
        let (tx, rx) = sync_channel::<Result<Vec<Document>>>(2);
        let mut reader = std::mem::replace(&mut self.reader, Reader::new(Vec::new(), "", 1));
        let read = std::thread::spawn(move || loop {
            let batch = reader.batch();
            let done = matches!(&batch, Ok(b) if b.is_empty()) || batch.is_err();
            if tx.send(batch).is_err() || done {
                return reader;
            }
        });
        let result = self.consume(&rx, handle);
        drop(rx);
        self.reader = read
            .join()
            .map_err(|_| ToolsError::Stopped("the corpus reader panicked".into()))?;
        result
    }

    fn consume(
        &mut self,
        rx: &std::sync::mpsc::Receiver<Result<Vec<Document>>>,
        handle: &Handle,
    ) -> Result<(Vec<TokenShard>, u64)> {
        let mut shards = Vec::new();
        let mut open: Option<Open> = None;
        let mut empty = 0u64;
        let result = (|| {
            loop {
                let batch = rx
                    .recv()
                    .map_err(|_| ToolsError::Stopped("the corpus reader stopped".into()))??;
                if batch.is_empty() {
                    break;
                }
                let encoded: Vec<std::result::Result<Vec<u32>, String>> = batch
                    .par_iter()
                    .map(|doc| {
                        let mut ids = Vec::with_capacity(doc.text.len() / 3 + 1);
                        self.tokenizer.encode(&doc.text, &mut ids).map(|()| ids)
                    })
                    .collect();
                let text_bytes: u64 = batch.iter().map(|d| d.text.len() as u64).sum();
                let mut tokens = 0;
                for (doc, ids) in batch.iter().zip(encoded) {
                    let ids = ids.map_err(|reason| {
                        ToolsError::Config(format!(
                            "{}: cannot tokenize: {reason}",
                            self.where_is(doc)
                        ))
                    })?;
                    if ids.is_empty() {
                        empty += 1;
                        continue;
                    }
                    let shard = match open.as_mut() {
                        Some(shard) => shard,
                        None => open.insert(self.open_shard(shards.len(), handle)),
                    };
                    tokens += self.append(shard, doc, &ids)?;
                    if shard.tokens >= self.shard_tokens {
                        let done = open.take().expect("a shard is open");
                        shards.push(self.close_shard(shards.len(), done, handle)?);
                    }
                }
                self.progress.advance(batch.len() as u64, text_bytes);
                self.progress.tokens(tokens);
            }
            if let Some(done) = open.take() {
                shards.push(self.close_shard(shards.len(), done, handle)?);
            }
            if shards.is_empty() {
                return Err(ToolsError::Config(format!(
                    "the corpus holds no documents with text ({empty} empty ones)"
                )));
            }
            Ok(())
        })();
        match result {
            Ok(()) => Ok((shards, empty)),
            Err(error) => {
                let error = match open {
                    Some(shard) => shard.sink.abort().map_or(error, ToolsError::from),
                    None => error,
                };
                Err(error)
            }
        }
    }

    fn where_is(&self, doc: &Document) -> String {
        let path = self.reader_path(doc.file);
        if doc.line == 0 {
            path
        } else {
            format!("{path}:{}", doc.line)
        }
    }

    fn reader_path(&self, file: usize) -> String {
        self.reader.path(file).display().to_string()
    }

    fn open_shard(&mut self, index: usize, handle: &Handle) -> Open {
        let (data, _) = shard_names(self.version.as_deref(), index);
        let on_uploaded: OnUploaded = {
            let progress = Arc::clone(&self.progress);
            Arc::new(move |bytes| progress.uploaded(bytes, 0))
        };
        let upload = Upload::new(&self.dest, &data, self.upload, Arc::clone(&self.meter))
            .on_uploaded(on_uploaded);
        self.written.push(data.clone());
        Open {
            data,
            sink: BlockingUpload::new(upload, handle.clone()),
            lengths: Vec::new(),
            tokens: 0,
            buffer: Vec::new(),
        }
    }

    /// Writes `ids` and the end-of-document id; returns the tokens written.
    fn append(&self, shard: &mut Open, doc: &Document, ids: &[u32]) -> Result<u64> {
        use std::io::Write;
        let len = ids.len() as u64 + 1;
        if len > i32::MAX as u64 {
            return Err(ToolsError::Config(format!(
                "{}: {len} tokens, over Megatron's {} per document; split the document",
                self.where_is(doc),
                i32::MAX
            )));
        }
        shard.buffer.clear();
        let eos = std::iter::once(&self.eos_id);
        match self.dtype {
            TokenDtype::U16 => {
                shard.buffer.reserve(2 * len as usize);
                for &id in ids.iter().chain(eos) {
                    let id = u16::try_from(id).map_err(|_| {
                        ToolsError::Config(format!(
                            "{}: token id {id} is past the vocabulary size the tokenizer reported; pass a tokenizer.json whose vocabulary lists every id",
                            self.where_is(doc)
                        ))
                    })?;
                    shard.buffer.extend_from_slice(&id.to_le_bytes());
                }
            }
            TokenDtype::U32 => {
                shard.buffer.reserve(4 * len as usize);
                for &id in ids.iter().chain(eos) {
                    shard.buffer.extend_from_slice(&id.to_le_bytes());
                }
            }
        }
        shard.sink.write_all(&shard.buffer).map_err(|error| {
            ToolsError::Stopped(format!(
                "writing {}: {error}",
                self.dest.url_of(&shard.data)
            ))
        })?;
        shard.lengths.push(len);
        shard.tokens += len;
        Ok(len)
    }

    /// Completes the data object, writes the index, returns the entry.
    fn close_shard(&mut self, index: usize, shard: Open, handle: &Handle) -> Result<TokenShard> {
        let Open {
            data,
            sink,
            lengths,
            tokens,
            ..
        } = shard;
        let uploaded = sink.finish()?;
        self.progress.uploaded(0, 1);
        let (_, idx_name) = shard_names(self.version.as_deref(), index);
        let doc_index = DocIndex::from_lengths(lengths);
        let idx = encode_idx(self.dtype, &doc_index, 0);
        let entry = TokenShard {
            name: data,
            bytes: uploaded.bytes,
            offset: 0,
            tokens,
            documents: doc_index.documents(),
            index: TokenIndexRef {
                name: idx_name.clone(),
                bytes: idx.len() as u64,
                crc32c: crc32c::crc32c(&idx),
            },
        };
        self.written.push(idx_name.clone());
        handle.block_on(self.dest.put(&idx_name, idx.into()))?;
        Ok(entry)
    }
}
