//! all-MiniLM-L6-v2 sentence embeddings on the CPU.
//!
//! The model is BERT (6 layers, 384 wide, 12 heads of 32, feed-forward
//! 1536, exact GELU) followed by sentence-transformers' mean pooling and L2
//! normalisation. This crate runs exactly that, reading the same
//! `model.safetensors`, but shaped for what a server does with it:
//!
//! - **Packed sequences, no padding.** The texts of a batch are laid end to
//!   end as one matrix of tokens. Every step but attention works on tokens
//!   independently, so the projections and the feed-forward are one large
//!   matrix multiply per weight for the whole batch, and attention runs per
//!   text and head on that text's own tokens. A padded batch computes (and
//!   then masks) every text at the length of the longest; here no
//!   arithmetic is spent on padding at all.
//! - **The same GEMM as candle** (the `gemm` crate, runtime-dispatched
//!   AVX2/FMA/AVX-512 kernels), with the bias written into the output first
//!   so it is added by the multiply, and Q, K and V as one multiply of 1,152
//!   columns.
//! - **Fused, vectorisable element-wise steps**: GELU uses erf with a
//!   maximum error below 1e-6 (Abramowitz–Stegun 7.1.26) and softmax an
//!   exponential good to 2e-7 relative, both branch-free so the compiler
//!   vectorises them, instead of a libm call per element; residual adds
//!   and layer norms are one pass each. Buffers are allocated once per
//!   forward pass, not per operation.
//! - **Two modes.** [`Parallel::Rayon`] spreads the multiplies and the
//!   per-head attention over rayon's pool (ingestion batches);
//!   [`Parallel::None`] runs on the calling thread only (a search query of
//!   a dozen tokens, where handing work to other threads costs more than it
//!   saves, and which must not wait for the pool that ingestion keeps busy).
//!
//! - **Half-width weights for queries** ([`Weights::Half`]): a query of a
//!   dozen tokens does little arithmetic per weight, so its pass is bound by
//!   reading the 42 MB of f32 layer weights from memory (more than this
//!   machine's 32 MB L3). Where the CPU converts IEEE half floats in
//!   hardware (x86-64 with AVX2, FMA and F16C), the query path multiplies
//!   with an f16 copy of the layer weights (21 MB) by a small kernel of its
//!   own: weights widened to f32 in registers, activations and sums in f32.
//!   Ingestion ([`Weights::Full`]) keeps the published f32 weights.
//!
//! The vectors equal the reference implementation's within float
//! tolerance (the server's tests pin four of them, recorded from candle's
//! BERT, and hold both paths to them).

use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use std::path::Path;

/// Width of the hidden states and of the sentence vectors.
pub const HIDDEN: usize = 384;
const HEADS: usize = 12;
const HEAD_DIM: usize = HIDDEN / HEADS;
const INTER: usize = 1536;
const LAYERS: usize = 6;
const QKV: usize = 3 * HIDDEN;
/// Longest sequence the position embeddings allow.
pub const MAX_POSITIONS: usize = 512;
const LAYER_NORM_EPS: f32 = 1e-12;

/// Where the work of one forward pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parallel {
    /// On the calling thread only.
    None,
    /// On rayon's global pool as well.
    Rayon,
}

impl Parallel {
    fn gemm(self) -> gemm::Parallelism {
        match self {
            Parallel::None => gemm::Parallelism::None,
            Parallel::Rayon => gemm::Parallelism::Rayon(rayon::current_num_threads()),
        }
    }
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

/// Which copy of the layer weights a forward pass multiplies with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    /// The published f32 weights (ingestion's batches, which are bound by
    /// arithmetic).
    Full,
    /// The f16 copy where this CPU has one (see [`Model::has_half_weights`]),
    /// else the f32 weights: half the memory traffic for a short query,
    /// whose pass is bound by reading the weights. Sums stay f32; the
    /// vectors differ from [`Weights::Full`]'s by less than 1e-4.
    Half,
}

/// A weight stored as `in × out`, row-major (transposed from PyTorch's
/// `out × in` once at load), and its bias.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    /// `weight` as IEEE half floats (bits) in panels of [`half::COLUMNS`]
    /// columns ([`half::pack`]), when the CPU can multiply them
    /// ([`half::supported`]) and the width is a multiple of
    /// [`half::COLUMNS`].
    half: Option<Vec<u16>>,
}

impl Linear {
    fn new(weight: Vec<f32>, bias: Vec<f32>) -> Linear {
        let half = (half::supported() && bias.len().is_multiple_of(half::COLUMNS))
            .then(|| half::pack(&weight, bias.len()));
        Linear { weight, bias, half }
    }
}

struct Layer {
    /// Q, K and V side by side: `384 × 1152`.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

/// The loaded model.
pub struct Model {
    vocab: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    /// Token type 0 (sentence embeddings use only that type).
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

#[derive(serde::Deserialize)]
struct Config {
    hidden_size: usize,
    intermediate_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    max_position_embeddings: usize,
    vocab_size: usize,
    hidden_act: String,
    #[serde(default)]
    position_embedding_type: Option<String>,
}

impl Model {
    /// Loads `config.json` and `model.safetensors` from `dir`; refuses a
    /// model of another shape than all-MiniLM-L6-v2's.
    pub fn load(dir: &Path) -> Result<Model> {
        let config: Config = serde_json::from_slice(
            &std::fs::read(dir.join("config.json")).context("reading config.json")?,
        )
        .context("parsing config.json")?;
        if (
            config.hidden_size,
            config.intermediate_size,
            config.num_attention_heads,
            config.num_hidden_layers,
        ) != (HIDDEN, INTER, HEADS, LAYERS)
            || config.max_position_embeddings < MAX_POSITIONS
            || config.hidden_act != "gelu"
            || config
                .position_embedding_type
                .as_deref()
                .is_some_and(|t| t != "absolute")
        {
            bail!("config.json does not describe all-MiniLM-L6-v2");
        }
        let bytes =
            std::fs::read(dir.join("model.safetensors")).context("reading model.safetensors")?;
        let tensors =
            safetensors::SafeTensors::deserialize(&bytes).context("parsing model.safetensors")?;
        let get = |name: &str, shape: &[usize]| -> Result<Vec<f32>> {
            let view = tensors
                .tensor(name)
                .or_else(|_| tensors.tensor(&format!("bert.{name}")))
                .with_context(|| format!("model.safetensors has no {name}"))?;
            if view.dtype() != safetensors::Dtype::F32 || view.shape() != shape {
                bail!(
                    "{name}: expected F32 {shape:?}, found {:?} {:?}",
                    view.dtype(),
                    view.shape()
                );
            }
            Ok(view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect())
        };
        // PyTorch stores `out × in`; the multiply reads `in × out`.
        let linear = |prefix: &str, inputs: usize, outputs: usize| -> Result<Linear> {
            let w = get(&format!("{prefix}.weight"), &[outputs, inputs])?;
            Ok(Linear::new(
                transpose(&w, outputs, inputs),
                get(&format!("{prefix}.bias"), &[outputs])?,
            ))
        };
        let norm = |prefix: &str| -> Result<Norm> {
            Ok(Norm {
                weight: get(&format!("{prefix}.weight"), &[HIDDEN])?,
                bias: get(&format!("{prefix}.bias"), &[HIDDEN])?,
            })
        };
        let layers = (0..LAYERS)
            .map(|i| -> Result<Layer> {
                let p = format!("encoder.layer.{i}");
                let q = linear(&format!("{p}.attention.self.query"), HIDDEN, HIDDEN)?;
                let k = linear(&format!("{p}.attention.self.key"), HIDDEN, HIDDEN)?;
                let v = linear(&format!("{p}.attention.self.value"), HIDDEN, HIDDEN)?;
                // Rows of `in × 1152`: the row of Q, then K's, then V's.
                let mut weight = Vec::with_capacity(HIDDEN * QKV);
                for row in 0..HIDDEN {
                    for part in [&q, &k, &v] {
                        weight.extend_from_slice(&part.weight[row * HIDDEN..(row + 1) * HIDDEN]);
                    }
                }
                let bias = [q.bias, k.bias, v.bias].concat();
                Ok(Layer {
                    qkv: Linear::new(weight, bias),
                    attention_out: linear(&format!("{p}.attention.output.dense"), HIDDEN, HIDDEN)?,
                    attention_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                    intermediate: linear(&format!("{p}.intermediate.dense"), HIDDEN, INTER)?,
                    output: linear(&format!("{p}.output.dense"), INTER, HIDDEN)?,
                    output_norm: norm(&format!("{p}.output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let vocab = config.vocab_size;
        let mut token_type = get("embeddings.token_type_embeddings.weight", &[2, HIDDEN])
            .or_else(|_| get("embeddings.token_type_embeddings.weight", &[1, HIDDEN]))?;
        token_type.truncate(HIDDEN);
        Ok(Model {
            vocab,
            word: get("embeddings.word_embeddings.weight", &[vocab, HIDDEN])?,
            position: get(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, HIDDEN],
            )?,
            token_type,
            embedding_norm: norm("embeddings.LayerNorm")?,
            layers,
        })
    }

    /// Whether [`Weights::Half`] multiplies with f16 weights on this CPU
    /// (else it uses the f32 ones).
    pub fn has_half_weights(&self) -> bool {
        self.layers.iter().all(|l| {
            [&l.qkv, &l.attention_out, &l.intermediate, &l.output]
                .iter()
                .all(|w| w.half.is_some())
        })
    }

    /// The unit-length sentence vectors of tokenised texts (each the
    /// tokenizer's ids with `[CLS]` and `[SEP]`, 1 to [`MAX_POSITIONS`]
    /// tokens), in order, with the published f32 weights.
    pub fn embed(&self, texts: &[&[u32]], parallel: Parallel) -> Result<Vec<Vec<f32>>> {
        self.embed_with(texts, parallel, Weights::Full)
    }

    /// [`Model::embed`] with a choice of weights.
    pub fn embed_with(
        &self,
        texts: &[&[u32]],
        parallel: Parallel,
        weights: Weights,
    ) -> Result<Vec<Vec<f32>>> {
        let mut starts = Vec::with_capacity(texts.len() + 1);
        starts.push(0);
        for ids in texts {
            if ids.is_empty() || ids.len() > MAX_POSITIONS {
                bail!(
                    "a text must have 1 to {MAX_POSITIONS} tokens, not {}",
                    ids.len()
                );
            }
            if let Some(bad) = ids.iter().find(|&&id| id as usize >= self.vocab) {
                bail!("token id {bad} is outside the vocabulary");
            }
            starts.push(starts[starts.len() - 1] + ids.len());
        }
        let tokens = starts[texts.len()];
        if tokens == 0 {
            return Ok(Vec::new());
        }

        // Embeddings: word + position + token type 0, normalised.
        let mut x = vec![0f32; tokens * HIDDEN];
        for (t, ids) in texts.iter().enumerate() {
            for (p, &id) in ids.iter().enumerate() {
                let row = &mut x[(starts[t] + p) * HIDDEN..][..HIDDEN];
                let word = &self.word[id as usize * HIDDEN..][..HIDDEN];
                let position = &self.position[p * HIDDEN..][..HIDDEN];
                for (((o, w), p), y) in row.iter_mut().zip(word).zip(position).zip(&self.token_type)
                {
                    *o = w + p + y;
                }
            }
        }
        layer_norm(&mut x, &self.embedding_norm, parallel);

        let mut qkv = Vec::new();
        let mut context = vec![0f32; tokens * HIDDEN];
        let mut attended = Vec::new();
        let mut intermediate = Vec::new();
        let mut output = Vec::new();
        let linear = |input: &[f32], weight: &Linear, out: &mut Vec<f32>| {
            linear(input, tokens, weight, out, parallel, weights)
        };
        for layer in &self.layers {
            linear(&x, &layer.qkv, &mut qkv);
            attention(&qkv, &starts, &mut context, parallel);
            linear(&context, &layer.attention_out, &mut attended);
            add(&mut attended, &x);
            layer_norm(&mut attended, &layer.attention_norm, parallel);
            linear(&attended, &layer.intermediate, &mut intermediate);
            gelu(&mut intermediate, parallel);
            linear(&intermediate, &layer.output, &mut output);
            add(&mut output, &attended);
            layer_norm(&mut output, &layer.output_norm, parallel);
            std::mem::swap(&mut x, &mut output);
        }

        // Mean over each text's tokens, then unit length.
        Ok(starts
            .windows(2)
            .map(|w| {
                let mut mean = vec![0f32; HIDDEN];
                for row in x[w[0] * HIDDEN..w[1] * HIDDEN].chunks_exact(HIDDEN) {
                    for (m, v) in mean.iter_mut().zip(row) {
                        *m += v;
                    }
                }
                let n = (w[1] - w[0]) as f32;
                mean.iter_mut().for_each(|m| *m /= n);
                let norm = mean.iter().map(|m| m * m).sum::<f32>().sqrt().max(1e-12);
                mean.iter_mut().for_each(|m| *m /= norm);
                mean
            })
            .collect())
    }
}

fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; w.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = w[r * cols + c];
        }
    }
    out
}

/// `out = input · weight + bias` for `tokens` rows.
fn linear(
    input: &[f32],
    tokens: usize,
    linear: &Linear,
    out: &mut Vec<f32>,
    parallel: Parallel,
    weights: Weights,
) {
    let inputs = input.len() / tokens;
    let outputs = linear.bias.len();
    assert_eq!(input.len(), tokens * inputs);
    assert_eq!(linear.weight.len(), inputs * outputs);
    out.clear();
    out.reserve(tokens * outputs);
    for _ in 0..tokens {
        out.extend_from_slice(&linear.bias);
    }
    if let (Weights::Half, Some(weight)) = (weights, &linear.half) {
        half::multiply_add(input, tokens, inputs, weight, outputs, out, parallel);
        return;
    }
    // SAFETY: the three matrices are row-major and their lengths were
    // checked against the dimensions and strides passed; `out` is borrowed
    // mutably and aliases neither input.
    unsafe {
        gemm::gemm(
            tokens,
            outputs,
            inputs,
            out.as_mut_ptr(),
            1,
            outputs as isize,
            true,
            input.as_ptr(),
            1,
            inputs as isize,
            linear.weight.as_ptr(),
            1,
            outputs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            parallel.gemm(),
        );
    }
}

/// Self-attention of every text (rows `starts[i]..starts[i + 1]`) and head
/// on the packed `tokens × 1152` Q|K|V; writes `tokens × 384`.
fn attention(qkv: &[f32], starts: &[usize], context: &mut [f32], parallel: Parallel) {
    let jobs: Vec<(usize, usize)> = (0..starts.len() - 1)
        .flat_map(|t| (0..HEADS).map(move |h| (t, h)))
        .collect();
    let head = |&(t, h): &(usize, usize)| -> Vec<f32> {
        let (start, len) = (starts[t], starts[t + 1] - starts[t]);
        let base = &qkv[start * QKV..starts[t + 1] * QKV];
        let mut scores = vec![0f32; len * len];
        let scale = 1.0 / (HEAD_DIM as f32).sqrt();
        // SAFETY: Q, K and V of head `h` are `len × 32` blocks of `base`
        // with row stride 1152 (in bounds: the last row's block ends at
        // most at `len × 1152`); `scores` is `len × len`, row-major.
        unsafe {
            gemm::gemm(
                len,
                len,
                HEAD_DIM,
                scores.as_mut_ptr(),
                1,
                len as isize,
                false,
                base.as_ptr().add(h * HEAD_DIM),
                1,
                QKV as isize,
                // Kᵀ: element (d, j) is K[j][d].
                base.as_ptr().add(HIDDEN + h * HEAD_DIM),
                QKV as isize,
                1,
                0.0,
                scale,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
        for row in scores.chunks_exact_mut(len) {
            softmax(row);
        }
        let mut out = vec![0f32; len * HEAD_DIM];
        // SAFETY: as above; `out` is `len × 32`, row-major.
        unsafe {
            gemm::gemm(
                len,
                HEAD_DIM,
                len,
                out.as_mut_ptr(),
                1,
                HEAD_DIM as isize,
                false,
                scores.as_ptr(),
                1,
                len as isize,
                base.as_ptr().add(2 * HIDDEN + h * HEAD_DIM),
                1,
                QKV as isize,
                0.0,
                1.0,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
        out
    };
    let heads: Vec<Vec<f32>> = match parallel {
        Parallel::None => jobs.iter().map(head).collect(),
        Parallel::Rayon => jobs.par_iter().map(head).collect(),
    };
    for (&(t, h), out) in jobs.iter().zip(heads) {
        for (r, row) in out.chunks_exact(HEAD_DIM).enumerate() {
            context[(starts[t] + r) * HIDDEN + h * HEAD_DIM..][..HEAD_DIM].copy_from_slice(row);
        }
    }
}

/// The f16-weight multiply of the query path.
mod half {
    use super::Parallel;
    use rayon::prelude::*;

    /// Output columns per kernel step (two 8-lane registers).
    pub(super) const COLUMNS: usize = 16;
    /// Output columns per parallel task.
    const COLUMNS_PER_TASK: usize = 4 * COLUMNS;

    /// Whether this CPU converts f16 in hardware and has the FMA the kernel
    /// uses.
    pub(super) fn supported() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("fma")
                && std::is_x86_feature_detected!("f16c")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// An `inputs × outputs` f32 weight (row-major; `outputs` a multiple of
    /// [`COLUMNS`]) as f16 bits in panels: the `inputs × 16` block of
    /// columns `16p..16p + 16` is contiguous (row-major within), panel
    /// after panel. The kernel then reads each panel as one sequential
    /// stream, which the hardware prefetchers keep ahead of it, instead of
    /// 32 bytes every `outputs × 2` bytes.
    pub(super) fn pack(weight: &[f32], outputs: usize) -> Vec<u16> {
        let inputs = weight.len() / outputs;
        let mut packed = Vec::with_capacity(weight.len());
        for panel in (0..outputs).step_by(COLUMNS) {
            for row in weight.chunks_exact(outputs).take(inputs) {
                packed.extend(
                    row[panel..panel + COLUMNS]
                        .iter()
                        .map(|&w| ::half::f16::from_f32(w).to_bits()),
                );
            }
        }
        packed
    }

    /// `out += input · weight` for `tokens × inputs` f32 `input` and an
    /// `inputs × outputs` f16 `weight` packed by [`pack`]; `outputs` is a
    /// multiple of [`COLUMNS`]. Only called when [`supported`] (the weights
    /// exist only then).
    pub(super) fn multiply_add(
        input: &[f32],
        tokens: usize,
        inputs: usize,
        weight: &[u16],
        outputs: usize,
        out: &mut [f32],
        parallel: Parallel,
    ) {
        assert!(supported() && outputs.is_multiple_of(COLUMNS));
        assert_eq!(input.len(), tokens * inputs);
        assert_eq!(weight.len(), inputs * outputs);
        assert_eq!(out.len(), tokens * outputs);
        // Each task owns a band of output columns in every row; the bands
        // are disjoint, so the tasks write disjoint elements of `out`.
        let out = Shared(out.as_mut_ptr());
        let band = |start: usize| {
            let end = (start + COLUMNS_PER_TASK).min(outputs);
            // SAFETY: `supported()` was checked; the slices' lengths were
            // checked against the dimensions above; `out` points at
            // `tokens × outputs` elements and this task writes only
            // columns `start..end` of them.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                x86::band(
                    input,
                    tokens,
                    inputs,
                    weight,
                    outputs,
                    out.ptr(),
                    start,
                    end,
                )
            }
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("f16 weights are only built on x86-64: {start}")
        };
        let starts = (0..outputs).step_by(COLUMNS_PER_TASK);
        match parallel {
            Parallel::None => starts.for_each(band),
            Parallel::Rayon => starts.collect::<Vec<_>>().into_par_iter().for_each(band),
        }
    }

    /// The output's pointer, handed to the tasks that write disjoint
    /// columns of it.
    #[derive(Clone, Copy)]
    struct Shared(*mut f32);
    // SAFETY: every task writes a disjoint set of elements (its band of
    // columns) and `multiply_add` returns only after all tasks end.
    unsafe impl Send for Shared {}
    unsafe impl Sync for Shared {}

    impl Shared {
        /// (A method, so that closures capture the whole `Shared`.)
        fn ptr(self) -> *mut f32 {
            self.0
        }
    }

    #[cfg(target_arch = "x86_64")]
    mod x86 {
        use super::COLUMNS;
        use std::arch::x86_64::*;

        /// Rows of tokens per kernel step: 6 × 2 accumulators, 2 weight
        /// registers and a broadcast fit the 16 AVX2 registers.
        const ROWS: usize = 6;

        /// Columns `start..end` of `out += input · weight`, one panel of
        /// [`COLUMNS`] at a time: the panel's `inputs × 16` weights (12 KB
        /// at 384 inputs, contiguous) are read from memory once and stay in
        /// L1 for every group of rows.
        ///
        /// # Safety
        /// The CPU has AVX2, FMA and F16C; `input` is `tokens × inputs`,
        /// `weight` `inputs × outputs` packed by [`super::pack`], `out`
        /// points at `tokens × outputs` elements; `start` and `end` are
        /// multiples of [`COLUMNS`] within `outputs`.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn band(
            input: &[f32],
            tokens: usize,
            inputs: usize,
            weight: &[u16],
            outputs: usize,
            out: *mut f32,
            start: usize,
            end: usize,
        ) {
            let shape = Shape {
                input: input.as_ptr(),
                inputs,
                weight: weight.as_ptr(),
                outputs,
                out,
            };
            for column in (start..end).step_by(COLUMNS) {
                let mut row = 0;
                while row + ROWS <= tokens {
                    // SAFETY: rows `row..row + 6` and the panel are in
                    // bounds (checked by the loop and the caller).
                    unsafe { block::<ROWS>(&shape, row, column) };
                    row += ROWS;
                }
                // SAFETY: as above, for the remaining rows.
                unsafe {
                    match tokens - row {
                        0 => {}
                        1 => block::<1>(&shape, row, column),
                        2 => block::<2>(&shape, row, column),
                        3 => block::<3>(&shape, row, column),
                        4 => block::<4>(&shape, row, column),
                        _ => block::<5>(&shape, row, column),
                    }
                }
            }
        }

        struct Shape {
            input: *const f32,
            inputs: usize,
            weight: *const u16,
            outputs: usize,
            out: *mut f32,
        }

        /// `R` rows from `row`, 16 columns from `column`.
        ///
        /// # Safety
        /// As [`band`]'s, and rows `row..row + R` exist.
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn block<const R: usize>(s: &Shape, row: usize, column: usize) {
            // SAFETY: every pointer below stays inside the matrices the
            // caller vouched for: rows `row..row + R`, columns
            // `column..column + 16`, inputs `0..s.inputs`.
            unsafe {
                let mut acc = [[_mm256_setzero_ps(); 2]; R];
                for (r, acc) in acc.iter_mut().enumerate() {
                    let o = s.out.add((row + r) * s.outputs + column);
                    acc[0] = _mm256_loadu_ps(o);
                    acc[1] = _mm256_loadu_ps(o.add(8));
                }
                let panel = s.weight.add(column * s.inputs);
                for k in 0..s.inputs {
                    let w = panel.add(k * COLUMNS);
                    let w0 = _mm256_cvtph_ps(_mm_loadu_si128(w.cast()));
                    let w1 = _mm256_cvtph_ps(_mm_loadu_si128(w.add(8).cast()));
                    for (r, acc) in acc.iter_mut().enumerate() {
                        let x = _mm256_broadcast_ss(&*s.input.add((row + r) * s.inputs + k));
                        acc[0] = _mm256_fmadd_ps(x, w0, acc[0]);
                        acc[1] = _mm256_fmadd_ps(x, w1, acc[1]);
                    }
                }
                for (r, acc) in acc.iter().enumerate() {
                    let o = s.out.add((row + r) * s.outputs + column);
                    _mm256_storeu_ps(o, acc[0]);
                    _mm256_storeu_ps(o.add(8), acc[1]);
                }
            }
        }
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Rows of this many tokens per parallel task of the element-wise steps.
const ROWS_PER_TASK: usize = 64;

fn layer_norm(x: &mut [f32], norm: &Norm, parallel: Parallel) {
    let one = |row: &mut [f32]| {
        let n = HIDDEN as f32;
        let mean = row.iter().sum::<f32>() / n;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
        let inv = 1.0 / (var + LAYER_NORM_EPS).sqrt();
        for ((v, w), b) in row.iter_mut().zip(&norm.weight).zip(&norm.bias) {
            *v = (*v - mean) * inv * w + b;
        }
    };
    match parallel {
        Parallel::None => x.chunks_exact_mut(HIDDEN).for_each(one),
        Parallel::Rayon => x
            .par_chunks_mut(HIDDEN * ROWS_PER_TASK)
            .for_each(|rows| rows.chunks_exact_mut(HIDDEN).for_each(one)),
    }
}

fn gelu(x: &mut [f32], parallel: Parallel) {
    let run = |xs: &mut [f32]| {
        for v in xs {
            *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
        }
    };
    match parallel {
        Parallel::None => run(x),
        Parallel::Rayon => x.par_chunks_mut(INTER * ROWS_PER_TASK).for_each(run),
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = exp(*v - max);
        sum += *v;
    }
    let inv = 1.0 / sum;
    row.iter_mut().for_each(|v| *v *= inv);
}

/// `e^x`, relative error below 2e-7, for `x` in [-87, 88] (clamped
/// outside); branch-free so loops of it vectorise.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two so that `n × LN2_HI` is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5 × 2²³ rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * LOG2_E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    // e^r for |r| <= ln2 / 2: Taylor to r⁶ (remainder below 1.2e-7).
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// erf(x) with an absolute error below 1e-6 (Abramowitz and Stegun,
/// 7.1.26: 1.5e-7, plus f32 rounding), branch-free.
#[inline(always)]
fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A1: f32 = 0.254_829_6;
    const A2: f32 = -0.284_496_74;
    const A3: f32 = 1.421_413_7;
    const A4: f32 = -1.453_152_1;
    const A5: f32 = 1.061_405_4;
    let a = x.abs();
    let t = 1.0 / (1.0 + P * a);
    let poly = t * (A1 + t * (A2 + t * (A3 + t * (A4 + t * A5))));
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_libm() {
        let mut worst = 0f32;
        let mut x = -87.0f32;
        while x < 88.0 {
            let rel = ((exp(x) - x.exp()) / x.exp()).abs();
            worst = worst.max(rel);
            x += 0.0137;
        }
        assert!(worst < 4e-7, "{worst}");
        assert_eq!(exp(-1000.0), exp(-87.0));
    }

    #[test]
    fn erf_matches_the_series() {
        // erf by its Maclaurin series in f64 (converges well for |x| <= 3).
        fn reference(x: f64) -> f64 {
            let mut sum = 0.0;
            let mut term = x;
            for n in 0..200 {
                sum += term / (2 * n + 1) as f64;
                term *= -x * x / (n + 1) as f64;
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        }
        let mut worst = 0f64;
        let mut x = -3.0f32;
        while x <= 3.0 {
            worst = worst.max((erf(x) as f64 - reference(x as f64)).abs());
            x += 0.001;
        }
        assert!(worst < 1e-6, "{worst}");
        assert!((erf(5.0) - 1.0).abs() < 1e-6 && (erf(-5.0) + 1.0).abs() < 1e-6);
        assert!(erf(0.0).abs() < 1e-6);
    }

    #[test]
    fn softmax_sums_to_one_and_orders() {
        let mut row = [1.0, 2.0, 3.0, -50.0];
        softmax(&mut row);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(row[2] > row[1] && row[1] > row[0] && row[3] < 1e-20);
        let e: Vec<f32> = [1f32, 2.0, 3.0].iter().map(|v| (v - 3.0).exp()).collect();
        let s: f32 = e.iter().sum::<f32>() + (-53f32).exp();
        assert!((row[0] - e[0] / s).abs() < 1e-6);
    }

    #[test]
    fn linear_is_input_times_weight_plus_bias() {
        // 2 tokens × 3 inputs, 3 × 2 weight.
        let weights = Linear::new(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], vec![0.5, -0.5]);
        let input = [1.0, 0.0, 2.0, 0.0, 1.0, 1.0];
        for parallel in [Parallel::None, Parallel::Rayon] {
            let mut out = Vec::new();
            linear(&input, 2, &weights, &mut out, parallel, Weights::Full);
            assert_eq!(
                out,
                vec![
                    1.0 + 10.0 + 0.5,
                    2.0 + 12.0 - 0.5,
                    3.0 + 5.0 + 0.5,
                    4.0 + 6.0 - 0.5
                ]
            );
        }
    }

    #[test]
    fn half_weights_multiply_like_their_f32_values() {
        if !half::supported() {
            return;
        }
        // A deterministic pseudo-random source (no dependency for it).
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let (inputs, outputs) = (40, 3 * half::COLUMNS * 3);
        // f32 weights already on the f16 grid, so both paths multiply the
        // same numbers and differ only by summation order.
        let weight: Vec<f32> = (0..inputs * outputs)
            .map(|_| ::half::f16::from_f32(next()).to_f32())
            .collect();
        let bias: Vec<f32> = (0..outputs).map(|_| next()).collect();
        let weights = Linear::new(weight, bias);
        assert!(weights.half.is_some());
        // Every remainder of the 6-row blocks, and more than one block.
        for tokens in 1..=13 {
            let input: Vec<f32> = (0..tokens * inputs).map(|_| next()).collect();
            let mut full = Vec::new();
            linear(
                &input,
                tokens,
                &weights,
                &mut full,
                Parallel::None,
                Weights::Full,
            );
            for parallel in [Parallel::None, Parallel::Rayon] {
                let mut half = Vec::new();
                linear(&input, tokens, &weights, &mut half, parallel, Weights::Half);
                assert_eq!(half.len(), full.len());
                for (h, f) in half.iter().zip(&full) {
                    assert!((h - f).abs() < 1e-5, "{tokens} tokens: {h} != {f}");
                }
            }
        }
    }

    #[test]
    fn transpose_swaps_rows_and_columns() {
        assert_eq!(
            transpose(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 3),
            vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
        );
    }
}
