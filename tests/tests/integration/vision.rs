//! The conversation with a current model: images and PDFs in, reasoning
//! out, each in its provider's own format. Two fake providers on
//! 127.0.0.1 (OpenAI chat completions and Anthropic Messages) record what
//! the server sends; every body is validated against the official SDKs'
//! request types (`openai` and `anthropic` on PyPI, through pydantic).

use serde_json::{Value, json};
use std::io::Cursor;
use uuid::Uuid;
use workspace_api::conversations::{ModelInput, ReasoningMode};
use workspace_server::config::{Config, ModelConfig, ProviderKind};
use workspace_server::extract::fixtures::pdf;
use workspace_server::media::testdata;
use workspace_tests::fake_provider::{FakeProvider, Recorded, Reply};
use workspace_tests::provider_types::validate_provider_bodies;
use workspace_tests::sse::NumberedReader as Sse;
use workspace_tests::{TestContext, TestUser, http};

/// An OpenAI-compatible model of `fake` that takes `input` and reasons as
/// `reasoning`.
fn openai_model(
    fake: &FakeProvider,
    name: &str,
    input: &[ModelInput],
    reasoning: ReasoningMode,
) -> ModelConfig {
    ModelConfig {
        input: Some(input.to_vec()),
        reasoning: Some(reasoning),
        ..fake.model_config(name)
    }
}

/// An Anthropic model of `fake`, its capabilities from the table of known
/// names (`claude-sonnet-4…`: images, PDFs, a thinking budget).
fn anthropic_model(fake: &FakeProvider, name: &str) -> ModelConfig {
    ModelConfig {
        provider: Some(ProviderKind::Anthropic),
        upstream_model: None,
        base_url: Some(fake.base_url()),
        ..fake.model_config(name)
    }
}

struct Setup {
    cx: TestContext,
    openai: FakeProvider,
    anthropic: FakeProvider,
    ada: TestUser,
    org: Uuid,
}

async fn setup(name: &str, adjust: impl FnOnce(&mut Config) + Send) -> Setup {
    let openai = FakeProvider::with_default(Reply::openai_text(&["I ", "see ", "it."])).await;
    let anthropic = FakeProvider::with_default(Reply::anthropic_text(&["A ", "photo."])).await;
    let models = vec![
        openai_model(
            &openai,
            "vision-gpt",
            &[ModelInput::Text, ModelInput::Image, ModelInput::Pdf],
            ReasoningMode::Effort,
        ),
        openai_model(
            &openai,
            "text-only",
            &[ModelInput::Text],
            ReasoningMode::None,
        ),
        openai_model(
            &openai,
            "reasoner",
            &[ModelInput::Text],
            ReasoningMode::Always,
        ),
        anthropic_model(&anthropic, "claude-sonnet-4-5"),
    ];
    let cx = TestContext::with_config(name, move |c| {
        c.providers.offline_chunk_delay_ms = 0;
        c.providers.retry_backoff_ms = 5;
        c.models.extend(models);
        adjust(c);
    })
    .await;
    let ada = cx.user("ada").await;
    let org = ada.personal_org().await;
    Setup {
        cx,
        openai,
        anthropic,
        ada,
        org,
    }
}

/// A photo-like JPEG of `w`×`h` with a phone's EXIF block (camera, GPS).
fn photo_jpeg(w: u32, h: u32) -> Vec<u8> {
    let rgb = testdata::photo_rgb(w, h, 4, 7);
    testdata::with_segments(
        &testdata::jpeg_of(&rgb, w, h, 90),
        &[testdata::exif_app1(1, 0)],
    )
}

fn png(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbaImage::from_fn(w, h, |x, _| image::Rgba([200, 10, 10, (x % 256) as u8]));
    let mut out = Vec::new();
    img.write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

/// A PNG of a few hundred bytes whose header claims 50,000 × 50,000 pixels.
fn png_bomb() -> Vec<u8> {
    testdata::png_claiming(50_000, 50_000)
}

impl Setup {
    async fn upload(&self, name: &str, bytes: Vec<u8>) -> Uuid {
        self.ada
            .client
            .chat_upload_file(self.org, None, name, bytes)
            .await
            .unwrap()
            .into_inner()
            .id
    }

    async fn model(&self, name: &str) -> Uuid {
        self.ada.model_id(self.org, name).await
    }

    async fn open(&self, body: Value) -> reqwest::Response {
        http()
            .post(format!("{}/api/chat/send_message", self.cx.base_url))
            .bearer_auth(&self.ada.token)
            .query(&[("org_id", self.org.to_string())])
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Sends `body`; the stream's events.
    async fn send(&self, body: Value) -> Vec<Value> {
        let response = self.open(body).await;
        assert_eq!(response.status(), 200, "{:?}", response.text().await);
        Sse::new(response)
            .collect()
            .await
            .into_iter()
            .map(|(_, e)| e)
            .collect()
    }

    /// Sends `body`, which must be refused: the status and the error.
    async fn refused(&self, body: Value) -> (u16, Value) {
        let response = self.open(body).await;
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    async fn chat(&self, chat: &str) -> Value {
        let (status, v) = workspace_tests::req(
            &self.cx.base_url,
            &self.ada.token,
            reqwest::Method::GET,
            "/api/chat",
            &[
                ("org_id", self.org.to_string()),
                ("chat_id", chat.to_string()),
            ],
            None,
        )
        .await;
        assert_eq!(status, 200);
        v
    }

    async fn chat_count(&self) -> usize {
        let (_, v) = workspace_tests::req(
            &self.cx.base_url,
            &self.ada.token,
            reqwest::Method::GET,
            "/api/chat/list",
            &[("org_id", self.org.to_string())],
            None,
        )
        .await;
        v.as_array().map_or(0, Vec::len)
    }
}

const METRICS_TOKEN: &str = "metrics-token-0123456789";

async fn metrics_of(addr: std::net::SocketAddr) -> String {
    http()
        .get(format!("http://{addr}/metrics"))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The last request of an answer `fake` received (a new chat's title is
/// asked for after its answer: not that one).
fn answer_request(fake: &FakeProvider) -> Recorded {
    fake.requests()
        .into_iter()
        .rev()
        .find(|r| !r.body.to_string().contains("Write a title"))
        .expect("an answer's request")
}

fn last_user_content(r: &Recorded) -> Value {
    r.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .clone()
}

fn decode_data_url(url: &str) -> (String, Vec<u8>) {
    use base64::Engine;
    let rest = url.strip_prefix("data:").unwrap();
    let (media, data) = rest.split_once(";base64,").unwrap();
    (
        media.to_string(),
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
    )
}

fn text_of(events: &[Value], kind: &str) -> String {
    events
        .iter()
        .filter(|e| e["type"] == kind)
        .map(|e| e["content"].as_str().unwrap())
        .collect()
}

/// An image and a PDF asked about reach each provider in its own format:
/// OpenAI `image_url` (a data URL with `detail`) and `file` (`file_data`),
/// Anthropic `image` and `document` blocks; the image downscaled to the
/// providers' maximum and stripped of its EXIF (GPS) block; every body
/// valid for the official SDKs' types. The models list says who takes
/// what.
#[tokio::test]
async fn images_and_pdfs_reach_each_provider_in_its_own_format() {
    let s = setup("vision_formats", |_| {}).await;
    let models: Vec<Value> = serde_json::from_value(
        workspace_tests::req(
            &s.cx.base_url,
            &s.ada.token,
            reqwest::Method::GET,
            "/api/models/list",
            &[("org_id", s.org.to_string())],
            None,
        )
        .await
        .1,
    )
    .unwrap();
    let of = |name: &str| models.iter().find(|m| m["name"] == name).unwrap().clone();
    assert_eq!(
        of("claude-sonnet-4-5")["input"],
        json!(["text", "image", "pdf"])
    );
    assert_eq!(of("claude-sonnet-4-5")["reasoning"], "budget");
    assert_eq!(of("claude-sonnet-4-5")["max_output_tokens"], 64_000);
    assert_eq!(of("text-only")["input"], json!(["text"]));
    assert_eq!(
        of("offline-dev-model")["input"],
        json!(["text", "image", "pdf"])
    );

    let original = photo_jpeg(4000, 3000);
    assert!(
        original.windows(4).any(|w| w == b"Exif"),
        "the upload has EXIF"
    );
    let photo = s.upload("photo.jpg", original).await;
    let report = s
        .upload("report.pdf", pdf("Quarterly revenue rose 12 percent"))
        .await;
    for model in ["vision-gpt", "claude-sonnet-4-5"] {
        let id = s.model(model).await;
        let events = s
            .send(json!({"content": "What is in these?", "model_id": id,
                "upload_ids": [photo, report]}))
            .await;
        assert_eq!(events.last().unwrap()["type"], "end", "{events:?}");
    }

    let parts = last_user_content(&answer_request(&s.openai));
    let parts = parts.as_array().unwrap();
    assert_eq!(parts.len(), 3, "{parts:?}");
    assert_eq!(parts[0]["type"], "image_url");
    assert_eq!(parts[0]["image_url"]["detail"], "auto");
    let (media, bytes) = decode_data_url(parts[0]["image_url"]["url"].as_str().unwrap());
    assert_eq!(media, "image/jpeg");
    let sent_image = image::load_from_memory(&bytes).unwrap();
    assert!(sent_image.width() <= 1568 && sent_image.height() <= 1568);
    assert!(u64::from(sent_image.width()) * u64::from(sent_image.height()) <= 1_150_000);
    assert!(!bytes.windows(4).any(|w| w == b"Exif"), "EXIF kept");
    assert_eq!(parts[1]["type"], "file");
    assert_eq!(parts[1]["file"]["filename"], "report.pdf");
    let (media, bytes) = decode_data_url(parts[1]["file"]["file_data"].as_str().unwrap());
    assert_eq!(media, "application/pdf");
    assert!(bytes.starts_with(b"%PDF"));
    assert_eq!(
        parts[2],
        json!({"type": "text", "text": "What is in these?"})
    );

    let blocks = last_user_content(&answer_request(&s.anthropic));
    let blocks = blocks.as_array().unwrap();
    assert_eq!(blocks[0]["type"], "image");
    assert_eq!(blocks[0]["source"]["type"], "base64");
    assert_eq!(blocks[0]["source"]["media_type"], "image/jpeg");
    assert_eq!(blocks[1]["type"], "document");
    assert_eq!(blocks[1]["source"]["media_type"], "application/pdf");
    assert_eq!(blocks[2]["type"], "text");

    validate_provider_bodies(
        "openai",
        &s.openai
            .requests()
            .iter()
            .map(|r| r.body.clone())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    validate_provider_bodies(
        "anthropic",
        &s.anthropic
            .requests()
            .iter()
            .map(|r| r.body.clone())
            .collect::<Vec<_>>(),
    )
    .unwrap();

    // A text-only model gets the PDF as its text, and no image.
    let text_only = s.model("text-only").await;
    let events = s
        .send(json!({"content": "Summarize", "model_id": text_only, "upload_ids": [report]}))
        .await;
    assert_eq!(events.last().unwrap()["type"], "end");
    let content = last_user_content(&answer_request(&s.openai));
    let content = content.as_str().unwrap();
    assert!(
        content.contains("Quarterly revenue rose 12 percent"),
        "{content}"
    );
    s.cx.teardown().await;
}

/// Refusals before anything is stored: an image to a text-only model
/// (`model_lacks_input`, naming the model and the file), a decompression
/// bomb, a truncated JPEG, an SVG, an HTML page named `.png`, more than 10
/// uploads. Neither a chat nor a message is created.
#[tokio::test]
async fn images_a_model_cannot_take_are_refused_before_anything_is_stored() {
    let s = setup("vision_refusals", |_| {}).await;
    let text_only = s.model("text-only").await;
    let vision = s.model("vision-gpt").await;
    let photo = s.upload("photo.jpg", photo_jpeg(64, 48)).await;
    let before = s.chat_count().await;

    let (status, e) = s
        .refused(json!({"content": "What is it?", "model_id": text_only, "upload_ids": [photo]}))
        .await;
    assert_eq!(
        (status, e["error_code"].as_str()),
        (400, Some("model_lacks_input"))
    );
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("text-only") && message.contains("photo.jpg"),
        "{message}"
    );

    let bomb = s.upload("bomb.png", png_bomb()).await;
    let mut jpeg = photo_jpeg(640, 480);
    jpeg.truncate(jpeg.len() / 3);
    let truncated = s.upload("cut.jpg", jpeg).await;
    let svg = s
        .upload(
            "logo.svg",
            b"<svg xmlns='http://www.w3.org/2000/svg'><circle r='4'/></svg>".to_vec(),
        )
        .await;
    for (upload, code) in [
        (bomb, "image_too_large"),
        (truncated, "image_unreadable"),
        (svg, "image_unsupported"),
    ] {
        let started = std::time::Instant::now();
        let (status, e) = s
            .refused(json!({"content": "What is it?", "model_id": vision, "upload_ids": [upload]}))
            .await;
        assert_eq!((status, e["error_code"].as_str()), (400, Some(code)), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // Refused again from the kept result, without decoding again.
        let (status, again) = s
            .refused(json!({"content": "And now?", "model_id": vision, "upload_ids": [upload]}))
            .await;
        assert_eq!((status, &again["error_code"]), (400, &e["error_code"]));
    }
    // A page of HTML named `.png` is neither an image nor an allowed
    // text: refused at upload, by its content.
    let refused = s
        .ada
        .client
        .chat_upload_file(
            s.org,
            None,
            "cat.png",
            b"<html><script>alert(1)</script></html>".to_vec(),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.status().map(|s| s.as_u16()), Some(415));

    // 20 images in one message: past the limit of 10 uploads.
    let mut many = Vec::new();
    for i in 0..20 {
        many.push(s.upload(&format!("p{i}.png"), png(8, 8)).await);
    }
    let (status, e) = s
        .refused(json!({"content": "All of them", "model_id": vision, "upload_ids": many}))
        .await;
    assert_eq!(status, 400, "{e}");
    assert!(e["message"].as_str().unwrap().contains("10 uploads"), "{e}");

    assert_eq!(s.chat_count().await, before, "nothing stored");
    s.cx.teardown().await;
}

/// The images of earlier turns are sent again from the kept renditions:
/// a chat with 20 images over its turns decodes each once, and the last
/// request carries all of them, on either of two instances.
#[tokio::test]
async fn earlier_images_are_resent_without_decoding_again() {
    let s = setup("vision_history", |c| {
        c.models.retain(|m| m.name != "claude-sonnet-4-5");
        c.metrics.bind_address = Some("127.0.0.1:0".parse().unwrap());
        c.metrics.token = Some(METRICS_TOKEN.to_string());
    })
    .await;
    let second = s.cx.second_instance(|c| {
        c.metrics.bind_address = Some("127.0.0.1:0".parse().unwrap());
        c.metrics.token = Some(METRICS_TOKEN.to_string());
        c.models.push(openai_model(
            &s.openai,
            "vision-gpt",
            &[ModelInput::Text, ModelInput::Image, ModelInput::Pdf],
            ReasoningMode::Effort,
        ));
    });
    let second = second.await;
    let vision = s.model("vision-gpt").await;
    let mut chat: Option<String> = None;
    for turn in 0..10 {
        let a = s
            .upload(&format!("a{turn}.png"), png(300 + turn, 200))
            .await;
        let b = s
            .upload(&format!("b{turn}.jpg"), photo_jpeg(800, 600 + turn))
            .await;
        let mut body = json!({"content": format!("turn {turn}"), "model_id": vision,
            "upload_ids": [a, b]});
        if let Some(c) = &chat {
            body["chat_id"] = json!(c);
        }
        let events = s.send(body).await;
        assert_eq!(events.last().unwrap()["type"], "end", "{events:?}");
        chat.get_or_insert(events[0]["chat_id"].as_str().unwrap().to_string());
    }
    let last = answer_request(&s.openai);
    let images = last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|p| p["type"] == "image_url")
        .count();
    assert_eq!(images, 20);
    let prepared = |metrics: String| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("workspace_images_prepared_total "))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let metrics = metrics_of(s.cx.server.metrics_addr().unwrap()).await;
    assert_eq!(prepared(metrics), 20, "each image decoded once");

    // The other instance sends the same images from the database, decoding
    // none.
    let events = {
        let response = http()
            .post(format!(
                "http://{}/api/chat/send_message",
                second.local_addr()
            ))
            .bearer_auth(&s.ada.token)
            .query(&[("org_id", s.org.to_string())])
            .json(&json!({"content": "and now?", "model_id": vision, "chat_id": chat}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        Sse::new(response).collect().await
    };
    assert_eq!(events.last().unwrap().1["type"], "end");
    let metrics = metrics_of(second.metrics_addr().unwrap()).await;
    assert_eq!(prepared(metrics), 0, "the second instance decoded none");
    let last = answer_request(&s.openai);
    let resent = last
        .body
        .to_string()
        .matches("\"type\":\"image_url\"")
        .count();
    assert_eq!(resent, 20);
    s.cx.teardown().await;
}

/// Reasoning streams as its own events before the content, is stored
/// apart from it, shows in `GET /api/chat`, and counts in usage: from
/// Anthropic's thinking blocks (asked for with a budget, without a
/// temperature) and from an OpenAI-compatible `reasoning_content`.
#[tokio::test]
async fn reasoning_streams_is_stored_and_counted() {
    let s = setup("vision_reasoning", |_| {}).await;
    s.anthropic.push(Reply::anthropic_thinking(
        &["Let me think. ", "Two plus two is four."],
        "sig-abc123",
        &["It is ", "4."],
    ));
    let claude = s.model("claude-sonnet-4-5").await;
    let events = s
        .send(json!({"content": "2+2?", "model_id": claude,
            "settings": {"reasoning_budget_tokens": 2048, "temperature": 0.5}}))
        .await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let first_content = kinds.iter().position(|k| *k == "content").unwrap();
    let last_reasoning = kinds.iter().rposition(|k| *k == "reasoning").unwrap();
    assert!(last_reasoning < first_content, "{kinds:?}");
    assert_eq!(
        text_of(&events, "reasoning"),
        "Let me think. Two plus two is four."
    );
    assert_eq!(text_of(&events, "content"), "It is 4.");
    let usage = events.iter().find(|e| e["type"] == "usage").unwrap();
    assert!(usage["reasoning_tokens"].as_i64().unwrap() > 0, "{usage}");
    let body = answer_request(&s.anthropic).body;
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert!(body["max_tokens"].as_u64().unwrap() > 2048);
    assert!(
        body.get("temperature").is_none(),
        "no temperature with thinking"
    );
    let chat = s.chat(events[0]["chat_id"].as_str().unwrap()).await;
    let answer = &chat["messages"][1];
    assert_eq!(answer["content"], "It is 4.");
    assert_eq!(answer["reasoning"], "Let me think. Two plus two is four.");
    assert_eq!(chat["messages"][0]["reasoning"], Value::Null);

    // The next turn does not send the reasoning back to the provider.
    let events = s
        .send(json!({"content": "and 3+3?", "model_id": claude,
            "chat_id": events[0]["chat_id"]}))
        .await;
    assert_eq!(events.last().unwrap()["type"], "end");
    let body = answer_request(&s.anthropic).body;
    assert!(!body.to_string().contains("Two plus two"), "{body}");
    assert!(body.get("thinking").is_none(), "no budget asked this time");

    // DeepSeek-style reasoning_content, with OpenAI's reasoning_tokens.
    s.openai
        .push(Reply::openai_reasoning(&["Hmm, ", "simple."], &["Four."]));
    let reasoner = s.model("reasoner").await;
    let events = s
        .send(json!({"content": "2+2?", "model_id": reasoner}))
        .await;
    assert_eq!(text_of(&events, "reasoning"), "Hmm, simple.");
    assert_eq!(text_of(&events, "content"), "Four.");
    let usage = events.iter().find(|e| e["type"] == "usage").unwrap();
    assert!(usage["reasoning_tokens"].as_i64().unwrap() > 0, "{usage}");
    let chat = s.chat(events[0]["chat_id"].as_str().unwrap()).await;
    assert_eq!(chat["messages"][1]["reasoning"], "Hmm, simple.");

    // An effort goes as `reasoning_effort`, without a temperature.
    let vision = s.model("vision-gpt").await;
    let events = s
        .send(json!({"content": "think", "model_id": vision,
            "settings": {"reasoning_effort": "high", "temperature": 0.3}}))
        .await;
    assert_eq!(events.last().unwrap()["type"], "end");
    let body = answer_request(&s.openai).body;
    assert_eq!(body["reasoning_effort"], "high");
    assert!(body.get("temperature").is_none());
    // A budget means nothing to an effort model: ignored, not refused.
    let events = s
        .send(json!({"content": "think", "model_id": vision,
            "settings": {"reasoning_budget_tokens": 4096}}))
        .await;
    assert_eq!(events.last().unwrap()["type"], "end");
    assert!(
        answer_request(&s.openai)
            .body
            .get("reasoning_effort")
            .is_none()
    );

    validate_provider_bodies(
        "anthropic",
        &s.anthropic
            .requests()
            .iter()
            .map(|r| r.body.clone())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    validate_provider_bodies(
        "openai",
        &s.openai
            .requests()
            .iter()
            .map(|r| r.body.clone())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    s.cx.teardown().await;
}

/// Hostile reasoning: 1 MB of it is cut at 256 KiB (streamed and stored),
/// and the answer completes; a thinking block without a signature (it
/// could not be sent back) fails the answer as a broken stream.
#[tokio::test]
async fn hostile_reasoning_is_bounded() {
    let s = setup("vision_hostile_reasoning", |_| {}).await;
    let piece = "x".repeat(16 * 1024);
    let pieces: Vec<&str> = (0..64).map(|_| piece.as_str()).collect();
    s.openai.push(Reply::openai_reasoning(&pieces, &["Done."]));
    let reasoner = s.model("reasoner").await;
    let events = s.send(json!({"content": "go", "model_id": reasoner})).await;
    assert_eq!(events.last().unwrap()["type"], "end");
    let streamed = text_of(&events, "reasoning");
    assert!(
        streamed.len() <= 256 * 1024 && streamed.len() >= 200 * 1024,
        "{}",
        streamed.len()
    );
    assert_eq!(text_of(&events, "content"), "Done.");
    let chat = s.chat(events[0]["chat_id"].as_str().unwrap()).await;
    assert_eq!(
        chat["messages"][1]["reasoning"].as_str().unwrap().len(),
        streamed.len()
    );

    s.anthropic.push(Reply::anthropic_thinking_unsigned(
        &["secret plan"],
        &["Hi"],
    ));
    let claude = s.model("claude-sonnet-4-5").await;
    let events = s
        .send(json!({"content": "go", "model_id": claude,
            "settings": {"reasoning_budget_tokens": 1024}}))
        .await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "error", "{events:?}");
    assert_eq!(last["error_code"], "provider_stream_interrupted");
    s.cx.teardown().await;
}

/// The offline model takes images and reasons when asked, so the whole
/// loop runs with zero configuration (the README's example).
#[tokio::test]
async fn the_offline_model_sees_images_and_reasons() {
    let s = setup("vision_offline", |_| {}).await;
    let offline = s.model("offline-dev-model").await;
    let photo = s.upload("photo.jpg", photo_jpeg(2000, 1000)).await;
    let events = s
        .send(
            json!({"content": "What is in the picture?", "model_id": offline,
            "upload_ids": [photo], "settings": {"reasoning_effort": "low"}}),
        )
        .await;
    assert_eq!(events.last().unwrap()["type"], "end");
    assert!(text_of(&events, "reasoning").contains("low effort"));
    let answer = text_of(&events, "content");
    // Downscaled within 1568 pixels on the long edge and 1.15 megapixels.
    let size = answer
        .split("an image (image/jpeg, ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("{answer}"));
    let (w, h) = size.split_once('x').unwrap();
    let (w, h): (u32, u32) = (w.parse().unwrap(), h.parse().unwrap());
    assert!(
        w <= 1568 && w * h <= 1_150_000 && w.abs_diff(2 * h) <= 1,
        "{size}"
    );
    s.cx.teardown().await;
}

/// A PDF crafted against its parser (a cross-reference stream declaring
/// fields of 2 GB each, for a billion objects) is counted in the
/// memory-limited extraction worker: the worker dies, the server does not;
/// the PDF goes as (no) text and the answer completes.
#[tokio::test]
async fn a_crafted_pdf_does_not_take_the_server_down() {
    let s = setup("vision_crafted_pdf", |_| {}).await;
    let stream = vec![0u8; 64];
    let mut bytes = b"%PDF-1.5\n".to_vec();
    let xref_at = bytes.len();
    bytes.extend_from_slice(
        format!(
            "1 0 obj\n<< /Type /XRef /Size 1000000000 /W [1 2000000000 1] /Root 2 0 R \
             /Length {} >>\nstream\n",
            stream.len()
        )
        .as_bytes(),
    );
    bytes.extend_from_slice(&stream);
    bytes.extend_from_slice(b"\nendstream\nendobj\n");
    bytes.extend_from_slice(format!("startxref\n{xref_at}\n%%EOF\n").as_bytes());
    let upload = s.upload("crafted.pdf", bytes).await;
    let offline = s.model("offline-dev-model").await;
    let events = s
        .send(json!({"content": "Read it", "model_id": offline, "upload_ids": [upload]}))
        .await;
    assert_eq!(events.last().unwrap()["type"], "end", "{events:?}");
    assert!(
        !text_of(&events, "content").contains("a PDF"),
        "not sent whole"
    );
    let ready = http()
        .get(format!("{}/readyz", s.cx.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    s.cx.teardown().await;
}
