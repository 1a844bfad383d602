//! Benchmark (not a test): the local embedder (all-MiniLM-L6-v2,
//! `workspace-minilm`) beside what this machine's CPU can do, measured side
//! by side in one run:
//!
//! - GEMM: the `gemm` crate's f32 matrix multiply (the kernels the model
//!   runs) at the model's shapes (tokens × 384 by 384 × 1536) on every
//!   core, in GFLOP/s: the arithmetic ceiling;
//! - query embeddings of distinct short questions, p50/p95: the
//!   single-query path searches use (`embed_query`), the batch path
//!   (`embed` of one text) beside it, and the query cache's hits;
//! - the model's forward pass for one query with its f32 weights and with
//!   the f16 copy the query path uses, alternating query by query, with
//!   the weights left in the caches by the previous query ("warm") and
//!   after 64 MB of other memory traffic evicted them ("after other
//!   work", as between requests on a server);
//! - a query while an ingestion batch runs: through `embed_query` (at
//!   once) and through `embed` (queued behind the batch);
//! - ingestion: chunks of about 200 tokens through `embed`, chunks/s and
//!   tokens/s, and the GFLOP/s that implies (MiniLM: about 21 MFLOP per
//!   token plus attention) as a fraction of the GEMM rate.
//!
//! Run with `cargo xtask bench embed` (release build).

use std::sync::Arc;
use std::time::{Duration, Instant};
use workspace_server::embedder::{Embedder, LocalMiniLm, QueryCache};

/// Multiply-adds per token of one forward pass, without attention: six
/// layers of Q, K, V and output projections (4 × 384²) and the
/// feed-forward (2 × 384 × 1536), two FLOPs each.
const FLOPS_PER_TOKEN: f64 = 6.0 * 2.0 * (4.0 * 384.0 * 384.0 + 2.0 * 384.0 * 1536.0);

/// One query's forward pass with the f32 and with the f16 weights,
/// alternating, warm and after 64 MB of other memory traffic.
fn f32_and_f16_weights(ids: &[Vec<u32>]) {
    use workspace_minilm::{Model, Parallel, Weights};
    let model = Model::load(
        &workspace_tests::data_root()
            .join("models")
            .join("all-minilm-l6-v2"),
    )
    .unwrap();
    if !model.has_half_weights() {
        println!("(this CPU has no f16 conversion: the query path uses the f32 weights)\n");
        return;
    }
    let mut other = vec![0u8; 64 << 20];
    let mut times = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    for (i, q) in ids.iter().cycle().take(4 * 100).enumerate() {
        let (weights, evict) = (i % 2, (i / 2) % 2);
        if evict == 1 {
            // Other work: write 64 MB (twice the L3 here).
            for page in other.chunks_mut(64) {
                page[0] = page[0].wrapping_add(1);
            }
        }
        let t = Instant::now();
        let w = [Weights::Full, Weights::Half][weights];
        std::hint::black_box(
            model
                .embed_with(&[q.as_slice()], Parallel::Rayon, w)
                .unwrap(),
        );
        times[evict][weights].push(t.elapsed());
    }
    std::hint::black_box(&other);
    println!("one query's forward pass, f32 and f16 weights alternating (100 each)");
    for (evict, label) in ["warm", "after other work"].iter().enumerate() {
        for v in &mut times[evict] {
            v.sort();
        }
        let [full, half] = &times[evict];
        println!(
            "  {label:<17} f32: p50 {}  p95 {}   f16: p50 {}  p95 {}   ({:.2}x at p50)",
            ms(percentile(full, 0.5)),
            ms(percentile(full, 0.95)),
            ms(percentile(half, 0.5)),
            ms(percentile(half, 0.95)),
            percentile(full, 0.5).as_secs_f64() / percentile(half, 0.5).as_secs_f64()
        );
    }
    println!();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Attention FLOPs per token at sequence length `n`: scores and the
/// weighted sum, 2 × 2 × n × 384, six layers.
fn attention_flops_per_token(n: f64) -> f64 {
    6.0 * 4.0 * n * 384.0
}

fn gemm_gflops(rows: usize, reps: usize) -> f64 {
    let (k, n) = (384, 1536);
    let mut rng = 1u32;
    let mut random = |len: usize| -> Vec<f32> {
        (0..len)
            .map(|_| {
                rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (rng >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect()
    };
    let a = random(rows * k);
    let b = random(k * n);
    let mut c = vec![0f32; rows * n];
    let mut multiply = || {
        // SAFETY: row-major rows × 384, 384 × 1536 and rows × 1536 buffers
        // of exactly those lengths.
        unsafe {
            gemm::gemm(
                rows,
                n,
                k,
                c.as_mut_ptr(),
                1,
                n as isize,
                false,
                a.as_ptr(),
                1,
                k as isize,
                b.as_ptr(),
                1,
                n as isize,
                0.0,
                1.0,
                false,
                false,
                false,
                gemm::Parallelism::Rayon(0),
            )
        }
    };
    for _ in 0..3 {
        multiply();
    }
    let started = Instant::now();
    for _ in 0..reps {
        multiply();
    }
    std::hint::black_box(&c);
    let flops = 2.0 * rows as f64 * 384.0 * 1536.0 * reps as f64;
    flops / started.elapsed().as_secs_f64() / 1e9
}

fn questions(n: usize) -> Vec<String> {
    let subjects = [
        "lighthouse keeper",
        "sourdough bread",
        "rope splicing",
        "tide tables",
        "ship's log",
        "harbour master",
        "fog horn",
        "brass lantern",
        "sea charts",
        "anchor chain",
    ];
    let asks = [
        "who maintains the",
        "when is the",
        "how do I check the",
        "where can I find the",
        "what is the price of the",
        "why does the",
        "how often is the",
        "who repairs the",
    ];
    (0..n)
        .map(|i| {
            format!(
                "{} {} on day {}?",
                asks[i % asks.len()],
                subjects[(i / asks.len()) % subjects.len()],
                i
            )
        })
        .collect()
}

fn chunk(i: usize) -> String {
    let sentence = "The keeper climbs the lighthouse stairs every evening, trims the wick, \
                    winds the clockwork and writes the weather in the log before the night \
                    watch begins. ";
    format!("Chunk {i}. {}", sentence.repeat(5))
}

#[tokio::main]
async fn main() {
    workspace_tests::ensure_local_model().await;
    let model = Arc::new(LocalMiniLm::new(
        workspace_tests::data_root()
            .join("models")
            .join("all-minilm-l6-v2"),
    ));
    model.warm_up().await.unwrap();
    let tokenizer = model.tokenizer().await.unwrap();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("local embedder benchmark ({threads} CPUs)\n");

    // The arithmetic ceiling.
    let gemm_query = gemm_gflops(16, 400);
    let gemm_batch = gemm_gflops(16 * 200, 20);
    println!("GEMM (gemm f32, [n x 384] x [384 x 1536], every core)");
    println!("  n = 16 (a query):         {gemm_query:7.1} GFLOP/s");
    println!("  n = 3200 (16 chunks):     {gemm_batch:7.1} GFLOP/s\n");

    // Queries, each distinct (nothing cached).
    let qs = questions(120);
    let query_tokens: f64 = qs
        .iter()
        .map(|q| tokenizer.encode(q.as_str(), true).unwrap().get_ids().len() as f64)
        .sum::<f64>()
        / qs.len() as f64;
    for q in qs.iter().take(5) {
        model.embed_query(q).await.unwrap();
    }
    let mut single = Vec::new();
    for q in &qs[..60] {
        let t = Instant::now();
        model.embed_query(q).await.unwrap();
        single.push(t.elapsed());
    }
    let mut batch_path = Vec::new();
    for q in &qs[60..] {
        let t = Instant::now();
        model.embed(std::slice::from_ref(q)).await.unwrap();
        batch_path.push(t.elapsed());
    }
    let cache = QueryCache::new(1024);
    for q in &qs[..60] {
        cache.embed(model.as_ref(), q).await.unwrap();
    }
    let mut cached = Vec::new();
    for q in &qs[..60] {
        let t = Instant::now();
        cache.embed(model.as_ref(), q).await.unwrap();
        cached.push(t.elapsed());
    }
    for v in [&mut single, &mut batch_path, &mut cached] {
        v.sort();
    }
    let query_flops = query_tokens * (FLOPS_PER_TOKEN + attention_flops_per_token(query_tokens));
    println!(
        "query embedding ({query_tokens:.1} tokens on average, {:.2} GFLOP each)",
        query_flops / 1e9
    );
    println!(
        "  embed_query (searches):   p50 {}  p95 {}  ({:.1} GFLOP/s at p50)",
        ms(percentile(&single, 0.5)),
        ms(percentile(&single, 0.95)),
        query_flops / percentile(&single, 0.5).as_secs_f64() / 1e9
    );
    println!(
        "  embed of one text:        p50 {}  p95 {}",
        ms(percentile(&batch_path, 0.5)),
        ms(percentile(&batch_path, 0.95))
    );
    println!(
        "  cached (repeated query):  p50 {:.1} µs  p95 {:.1} µs\n",
        percentile(&cached, 0.5).as_secs_f64() * 1e6,
        percentile(&cached, 0.95).as_secs_f64() * 1e6
    );

    let ids: Vec<Vec<u32>> = qs
        .iter()
        .map(|q| {
            tokenizer
                .encode(q.as_str(), true)
                .unwrap()
                .get_ids()
                .to_vec()
        })
        .collect();
    f32_and_f16_weights(&ids);

    // Ingestion throughput.
    let chunks: Vec<String> = (0..128).map(chunk).collect();
    let tokens: usize = chunks
        .iter()
        .map(|c| tokenizer.encode(c.as_str(), true).unwrap().get_ids().len())
        .sum();
    let per_chunk = tokens as f64 / chunks.len() as f64;
    model.embed(&chunks[..16]).await.unwrap();
    let started = Instant::now();
    model.embed(&chunks).await.unwrap();
    let secs = started.elapsed().as_secs_f64();
    let flops = tokens as f64 * (FLOPS_PER_TOKEN + attention_flops_per_token(per_chunk));
    let achieved = flops / secs / 1e9;
    println!(
        "ingestion ({} chunks of {per_chunk:.0} tokens, batches of 16)",
        chunks.len()
    );
    println!(
        "  {:.1} chunks/s, {:.0} tokens/s, {achieved:.1} GFLOP/s = {:.0} % of the GEMM rate\n",
        chunks.len() as f64 / secs,
        tokens as f64 / secs,
        100.0 * achieved / gemm_batch
    );

    // A query while ingestion runs.
    let mut during_single = Vec::new();
    let mut during_batch = Vec::new();
    for (round, q) in qs.iter().take(6).enumerate() {
        let busy = {
            let model = model.clone();
            let chunks = chunks[..48].to_vec();
            tokio::spawn(async move { model.embed(&chunks).await.unwrap() })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let t = Instant::now();
        if round % 2 == 0 {
            model.embed_query(q).await.unwrap();
            during_single.push(t.elapsed());
        } else {
            model.embed(std::slice::from_ref(q)).await.unwrap();
            during_batch.push(t.elapsed());
        }
        busy.await.unwrap();
    }
    during_single.sort();
    during_batch.sort();
    println!("a query while a 48-chunk ingestion batch runs");
    println!(
        "  embed_query:              p50 {}  max {}",
        ms(percentile(&during_single, 0.5)),
        ms(*during_single.last().unwrap())
    );
    println!(
        "  embed (queued):           p50 {}  max {}",
        ms(percentile(&during_batch, 0.5)),
        ms(*during_batch.last().unwrap())
    );
}
