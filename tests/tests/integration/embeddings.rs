//! The local embedder's vectors stay what they were: fixed sentences give
//! the recorded vectors (within float tolerance) through both paths, the
//! batch one ingestion uses and the single-query one searches use, and the
//! query cache hands back the same vector.

use workspace_server::embedder::{Embedder, LocalMiniLm, QueryCache};

/// Fixed sentences and the first eight components of their vectors,
/// recorded from the batch path (`Embedder::embed`).
const GOLDEN: &[(&str, [f32; 8])] = &[
    (
        "The keeper climbs the lighthouse stairs every evening to light the lamp.",
        [
            -0.023688626,
            0.034929615,
            0.018336186,
            0.062307168,
            -0.052789446,
            -0.0009940494,
            -0.016521694,
            0.044438507,
        ],
    ),
    (
        "Sourdough loaves sell out every Saturday morning.",
        [
            0.028925383,
            0.014851994,
            0.026064547,
            -0.02287154,
            -0.017540423,
            0.021289416,
            -0.06771714,
            0.034031987,
        ],
    ),
    (
        "who lights the lamp?",
        [
            -0.021495536,
            0.04691767,
            -0.0037691442,
            0.010738047,
            -0.02012245,
            -0.022837259,
            0.11574288,
            -0.07065982,
        ],
    ),
    (
        "Ünïcödé, emoji 🚀 and numbers 12345 in one line",
        [
            -0.08947142,
            -0.020076072,
            0.08028112,
            -0.052174896,
            -0.025852509,
            -0.025705256,
            0.0444028,
            -0.02993165,
        ],
    ),
];

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::test]
async fn query_and_batch_vectors_match_the_recorded_ones() {
    workspace_tests::ensure_local_model().await;
    let model = LocalMiniLm::new(
        workspace_tests::data_root()
            .join("models")
            .join("all-minilm-l6-v2"),
    );
    let sentences: Vec<String> = [
        "The keeper climbs the lighthouse stairs every evening to light the lamp.",
        "Sourdough loaves sell out every Saturday morning.",
        "who lights the lamp?",
        "Ünïcödé, emoji 🚀 and numbers 12345 in one line",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let batch = model.embed(&sentences).await.unwrap();
    let cache = QueryCache::new(16);
    for (text, batched) in sentences.iter().zip(&batch) {
        assert_eq!(batched.len(), 384);
        let norm: f32 = batched.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        let single = model.embed_query(text).await.unwrap();
        assert!(
            cosine(batched, &single) > 0.99999,
            "{text}: the query path differs from the batch path"
        );
        let max_diff = batched
            .iter()
            .zip(&single)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(max_diff < 1e-4, "{text}: {max_diff}");
        let cached = cache.embed(&model, text).await.unwrap();
        let again = cache.embed(&model, text).await.unwrap();
        assert!(
            std::sync::Arc::ptr_eq(&cached, &again),
            "the second is the cached one"
        );
        assert!(cosine(&cached, &single) > 0.99999);
    }
    for (text, head) in GOLDEN {
        let index = sentences.iter().position(|s| s == text).unwrap();
        for (got, want) in batch[index].iter().zip(head) {
            assert!((got - want).abs() < 1e-4, "{text}: {got} != {want}");
        }
    }
    assert_eq!(
        GOLDEN.len(),
        sentences.len(),
        "every sentence has recorded values"
    );
}
