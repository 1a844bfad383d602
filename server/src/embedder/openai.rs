//! OpenAI-compatible `POST {base_url}/embeddings` (OpenAI, Ollama, vLLM,
//! TEI): one request per batch, vectors put back in input order by their
//! `index` and scaled to unit length (cosine search assumes it).

use super::{EmbedError, Embedder};
use std::time::Duration;

pub struct OpenAiEmbedder {
    name: String,
    upstream_model: String,
    /// Up to and including `/v1`, without a trailing slash.
    base_url: String,
    api_key: Option<String>,
    dimensions: usize,
    http: reqwest::Client,
}

impl OpenAiEmbedder {
    pub fn new(
        config: &crate::kb_config::EmbedderConfig,
        api_key: Option<String>,
    ) -> anyhow::Result<OpenAiEmbedder> {
        Ok(OpenAiEmbedder {
            name: config.name.clone(),
            upstream_model: config
                .upstream_model
                .clone()
                .unwrap_or_else(|| config.name.clone()),
            base_url: config
                .base_url
                .clone()
                .unwrap_or_else(|| "https://api.openai.com/v1".to_string())
                .trim_end_matches('/')
                .to_string(),
            api_key,
            dimensions: config.dimensions as usize,
            http: crate::fetch::operator_client()
                .connect_timeout(Duration::from_secs(10))
                .timeout(Duration::from_secs(120))
                .build()?,
        })
    }
}

#[derive(serde::Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
    #[serde(default)]
    usage: Option<EmbeddingsUsage>,
}

#[derive(serde::Deserialize)]
struct EmbeddingsUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
}

#[derive(serde::Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        &self.name
    }
    fn dimensions(&self) -> usize {
        self.dimensions
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut span = crate::telemetry::embeddings("openai", &self.upstream_model, texts.len());
        let result = self.embed_http(texts, span.as_mut()).await;
        if let (Some(span), Err(e)) = (span.as_mut(), &result) {
            span.fail(e.to_string());
        }
        result
    }
}

impl OpenAiEmbedder {
    /// One request for `texts`, under `span` (its `traceparent` sent).
    async fn embed_http(
        &self,
        texts: &[String],
        span: Option<&mut crate::telemetry::ChildSpan>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut request = self
            .http
            .post(format!("{}/embeddings", self.base_url))
            .headers(span.as_ref().map(|s| s.headers()).unwrap_or_default())
            .json(&serde_json::json!({
                "model": self.upstream_model,
                "input": texts,
                "encoding_format": "float",
            }));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| {
            EmbedError::Transient(format!(
                "embedding service unreachable: {}",
                e.without_url()
            ))
        })?;
        let status = response.status();
        if !status.is_success() {
            let message = format!("embedding service answered {status}");
            return Err(if status.as_u16() == 429 || status.is_server_error() {
                EmbedError::Transient(message)
            } else {
                EmbedError::Permanent(message)
            });
        }
        // Bounded: 64 MiB holds thousands of vectors of 3,072 floats.
        let bytes = crate::fetch::read_limited(response, 64 << 20)
            .await
            .map_err(|e| EmbedError::Transient(format!("unreadable embedding response: {e}")))?;
        let body: EmbeddingsResponse = serde_json::from_slice(&bytes)
            .map_err(|e| EmbedError::Transient(format!("unreadable embedding response: {e}")))?;
        if let (Some(span), Some(tokens)) = (span, body.usage.and_then(|u| u.prompt_tokens)) {
            span.set(opentelemetry::KeyValue::new(
                "gen_ai.usage.input_tokens",
                i64::try_from(tokens).unwrap_or(i64::MAX),
            ));
        }
        if body.data.len() != texts.len() {
            return Err(EmbedError::Permanent(format!(
                "the embedding service returned {} vectors for {} texts",
                body.data.len(),
                texts.len()
            )));
        }
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for (position, item) in body.data.into_iter().enumerate() {
            let index = item.index.unwrap_or(position);
            if item.embedding.len() != self.dimensions {
                return Err(EmbedError::Permanent(format!(
                    "the embedding service returned {} dimensions, {} configured",
                    item.embedding.len(),
                    self.dimensions
                )));
            }
            match out.get_mut(index) {
                Some(slot @ None) => *slot = Some(normalize(item.embedding)),
                _ => {
                    return Err(EmbedError::Permanent(
                        "the embedding service returned a bad index".to_string(),
                    ));
                }
            }
        }
        Ok(out.into_iter().map(|v| v.unwrap_or_default()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kb_config::{EmbedderConfig, EmbedderKind};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A local OpenAI-compatible embeddings server: checks the bearer
    /// token and the request shape, answers vectors out of order (with
    /// `index`), each text's vector `[len, 1, 0, 0]`; the text "fail"
    /// gives a 503.
    async fn fake_server() -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut data = Vec::new();
                    let mut buf = [0u8; 4096];
                    let (head_end, length) = loop {
                        let n = socket.read(&mut buf).await.unwrap();
                        if n == 0 {
                            return;
                        }
                        data.extend_from_slice(&buf[..n]);
                        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&data[..i]).to_lowercase();
                            let length = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .map(|v| v.trim().parse::<usize>().unwrap())
                                .unwrap_or(0);
                            break (i + 4, length);
                        }
                    };
                    while data.len() < head_end + length {
                        let n = socket.read(&mut buf).await.unwrap();
                        data.extend_from_slice(&buf[..n]);
                    }
                    let head = String::from_utf8_lossy(&data[..head_end]).to_lowercase();
                    let body: serde_json::Value =
                        serde_json::from_slice(&data[head_end..head_end + length]).unwrap();
                    let (status, answer) = if !head.starts_with("post /v1/embeddings ")
                        || !head.contains("authorization: bearer sk-test")
                    {
                        (
                            "401 Unauthorized",
                            serde_json::json!({"error": {"message": "no"}}),
                        )
                    } else if body["input"][0] == "fail" {
                        ("503 Service Unavailable", serde_json::json!({}))
                    } else {
                        assert_eq!(body["model"], "text-embedding-test");
                        let inputs = body["input"].as_array().unwrap();
                        let mut data: Vec<_> = inputs
                            .iter()
                            .enumerate()
                            .map(|(i, t)| {
                                let len = t.as_str().unwrap().len() as f32;
                                serde_json::json!({"object": "embedding", "index": i,
                                    "embedding": [len, 1.0, 0.0, 0.0]})
                            })
                            .collect();
                        data.reverse();
                        (
                            "200 OK",
                            serde_json::json!({"object": "list", "data": data,
                            "model": "text-embedding-test",
                            "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
                        )
                    };
                    let payload = answer.to_string();
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
                        payload.len()
                    );
                    socket.write_all(response.as_bytes()).await.unwrap();
                    let _ = socket.shutdown().await;
                });
            }
        });
        addr
    }

    fn config(addr: std::net::SocketAddr) -> EmbedderConfig {
        EmbedderConfig {
            name: "remote".to_string(),
            kind: EmbedderKind::Openai,
            upstream_model: Some("text-embedding-test".to_string()),
            base_url: Some(format!("http://{addr}/v1/")),
            api_key_env: None,
            dimensions: 4,
        }
    }

    #[tokio::test]
    async fn embeds_through_the_openai_protocol() {
        let addr = fake_server().await;
        let embedder = OpenAiEmbedder::new(&config(addr), Some("sk-test".into())).unwrap();
        let vectors = embedder
            .embed(&["abc".to_string(), "".to_string()])
            .await
            .unwrap();
        // In input order despite the reversed answer, and unit length.
        let expected = 1.0 / 10f32.sqrt();
        assert!((vectors[0][0] - 3.0 * expected).abs() < 1e-6, "{vectors:?}");
        assert!((vectors[0][1] - expected).abs() < 1e-6);
        assert_eq!(vectors[1], vec![0.0, 1.0, 0.0, 0.0]);

        // 5xx is transient, 401 permanent.
        let err = embedder.embed(&["fail".to_string()]).await.unwrap_err();
        assert!(matches!(err, EmbedError::Transient(_)), "{err:?}");
        let anonymous = OpenAiEmbedder::new(&config(addr), None).unwrap();
        let err = anonymous.embed(&["x".to_string()]).await.unwrap_err();
        assert!(matches!(err, EmbedError::Permanent(_)), "{err:?}");

        // A configured dimension that does not match is permanent.
        let mut wrong = config(addr);
        wrong.dimensions = 8;
        let wrong = OpenAiEmbedder::new(&wrong, Some("sk-test".into())).unwrap();
        let err = wrong.embed(&["x".to_string()]).await.unwrap_err();
        assert!(matches!(err, EmbedError::Permanent(_)), "{err:?}");
    }
}
