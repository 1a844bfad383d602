//! `send_message` and the answer it starts, resuming and stopping an
//! answer's stream, and prompt suggestions.

use crate::app::answer::{Answer, Area, Out, Outcome, Stored, ToolFinished};
use crate::authz::{Grant, OrgAccess, on, perm};
use crate::context::ServerContext;
use crate::db::datastore::chat::{
    FinishedAnswer, LIVE_CHANNEL, NewExchange, Placement, STOP_CHANNEL,
};
use crate::db::datastore::conversations::HistoryBound;
use crate::db::datastore::streams::StreamKind;
use crate::db::enums::{AgentStatus, ChatMessageStatus, ChatRole};
use crate::error::Error;
use crate::providers::{ChatMessage as ModelMessage, ChatRequest, ModelEntry, Role};
use crate::runtime::context::{
    HISTORY_MAX_MESSAGES, attachment_tokens, history_budget, message_tokens,
};
use crate::runtime::{RunLimits, RunSpec};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;
use uuid::Uuid;
use workspace_api::chat::{
    ChatSettings, ChatSource, ChatStreamEvent, DEFAULT_TITLE, EditMessageRequest, PromptRequest,
    RegenerateRequest, SendMessageRequest, StopResponse,
};

use super::attachments;
use super::live::{live_payload, message_notice};
use super::{
    KB_LIMIT, KB_SCORE_THRESHOLD, MESSAGE_MAX_CHARS, Numbered, check_message, check_settings,
    settings_of,
};

// ---- send_message ----

/// The user's message as the model sees it: the excerpts to cite and the
/// uploads' text, then the message.
fn prompt_text(content: &str, sources: &[ChatSource], files: &[(String, String)]) -> String {
    if sources.is_empty() && files.is_empty() {
        return content.to_string();
    }
    let mut out = String::new();
    if !sources.is_empty() {
        out.push_str(
            "Answer using these excerpts from the knowledge bases when they are relevant, \
             citing them as [n]:\n",
        );
        for s in sources {
            out.push_str(&format!("[{}] {}\n", s.index, s.content.trim()));
        }
        out.push('\n');
    }
    for (name, text) in files {
        out.push_str(&format!("Attached file {name}:\n{}\n\n", text.trim()));
    }
    out.push_str(content);
    out
}

/// The agent a message is sent to, if it may answer (`agent:execute` is part
/// of the handler's authorization).
async fn active_agent(
    cx: &ServerContext,
    access: &OrgAccess,
    id: Uuid,
) -> Result<crate::db::datastore::agents::AgentRow, Error> {
    let agent = cx.datastore.agent_get(access, id).await?;
    if !matches!(
        agent.status,
        AgentStatus::Ready | AgentStatus::Deployed | AgentStatus::Active
    ) {
        return Err(Error::conflict(
            "agent_not_active",
            format!(
                "the agent is {}; it must pass its test (ready) or be deployed first",
                agent.status
            ),
        ));
    }
    Ok(agent)
}

/// The excerpts of the knowledge bases for `content`, numbered from 1 in
/// the order found (`kb:read` is part of the handler's authorization).
async fn retrieve(
    cx: &ServerContext,
    access: &OrgAccess,
    kb_ids: &[Uuid],
    content: &str,
) -> Result<Vec<ChatSource>, Error> {
    let mut sources = Vec::new();
    if kb_ids.is_empty() {
        return Ok(sources);
    }
    let query: String = content.chars().take(2000).collect();
    for kb_id in kb_ids {
        let found = crate::app::kb::search(
            cx,
            access,
            *kb_id,
            workspace_api::kb::KbSearchRequest {
                query: query.clone(),
                limit: Some(KB_LIMIT),
                score_threshold: Some(KB_SCORE_THRESHOLD),
                filters: None,
            },
        )
        .await?;
        for r in found.results {
            sources.push(ChatSource {
                index: sources.len() as u32 + 1,
                knowledge_base_id: *kb_id,
                document_id: r.document_id,
                chunk_id: r.chunk_id,
                content: r.content,
                score: r.score,
                metadata: r.metadata,
            });
        }
    }
    Ok(sources)
}

/// The stored history as the model sees it (answers still empty left
/// out), each question with the kept images of its uploads.
fn model_history(
    history: Vec<crate::db::datastore::chat::ChatHistoryRow>,
    mut images: std::collections::HashMap<Uuid, Vec<crate::providers::Attachment>>,
) -> Vec<ModelMessage> {
    history
        .into_iter()
        .filter(|m| !(m.role == ChatRole::Model && m.content.is_empty()))
        .map(|m| {
            let mut message = ModelMessage::new(
                match m.role {
                    ChatRole::User => Role::User,
                    ChatRole::Model => Role::Assistant,
                },
                m.content,
            );
            if m.role == ChatRole::User {
                message.attachments = images.remove(&m.id).unwrap_or_default();
            }
            message
        })
        .collect()
}

/// The questions of a history with their uploads (oldest first).
fn history_uploads(
    history: &[crate::db::datastore::chat::ChatHistoryRow],
) -> Vec<(Uuid, Vec<Uuid>)> {
    history
        .iter()
        .filter(|m| m.role == ChatRole::User)
        .filter_map(|m| {
            let ids = m
                .upload_ids
                .as_ref()
                .map(|v| stored_upload_ids(&json!({ "upload_ids": v })))?;
            (!ids.is_empty()).then_some((m.id, ids))
        })
        .collect()
}

/// What an answer is asked for: `send_message`, `edit_message` and
/// `regenerate` differ only in where it goes and what they default to.
struct Ask {
    chat_id: Option<Uuid>,
    placement: Placement,
    /// The question (for a regenerated answer: the stored one).
    content: String,
    /// The requested model, else `inherited_model` if still offered, else
    /// the first offered.
    model_id: Option<Uuid>,
    inherited_model: Option<Uuid>,
    agent_id: Option<Uuid>,
    knowledge_base_ids: Vec<Uuid>,
    upload_ids: Vec<Uuid>,
    settings: Option<ChatSettings>,
    /// `edited_from` or `regenerated_from` and the message, kept in the
    /// new messages' metadata.
    origin: Option<(&'static str, Uuid)>,
}

fn check_ask_sizes(kb_ids: &[Uuid], upload_ids: &[Uuid]) -> Result<(), Error> {
    if kb_ids.len() > 10 || upload_ids.len() > 10 {
        return Err(Error::invalid(
            workspace_api::extract::INVALID_REQUEST,
            "at most 10 knowledge bases and 10 uploads",
        ));
    }
    Ok(())
}

/// The upload ids a stored question named (its `metadata.upload_ids`).
fn stored_upload_ids(metadata: &Value) -> Vec<Uuid> {
    metadata
        .get("upload_ids")
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(|v| v.as_str().and_then(|s| s.parse().ok()))
                .take(10)
                .collect()
        })
        .unwrap_or_default()
}

/// Starts an answer; the receiver yields its numbered events.
pub async fn send_message(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    body: SendMessageRequest,
) -> Result<mpsc::Receiver<Numbered>, Error> {
    ask(
        cx,
        grant,
        Ask {
            chat_id: body.chat_id,
            placement: Placement::Leaf,
            content: body.content,
            model_id: body.model_id,
            inherited_model: None,
            agent_id: body.agent_id,
            knowledge_base_ids: body.knowledge_base_ids.unwrap_or_default(),
            upload_ids: body.upload_ids.unwrap_or_default(),
            settings: body.settings,
            origin: None,
        },
    )
    .await
}

/// A new version of a question (its sibling), answered; the new
/// question and answer end the chat's active path.
pub async fn edit_message(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    body: EditMessageRequest,
) -> Result<mpsc::Receiver<Numbered>, Error> {
    let node = cx.datastore.chat_node(grant, body.message_id).await?;
    if node.role != ChatRole::User {
        return Err(Error::invalid(
            "not_a_question",
            "only a question (a USER message) can be edited",
        ));
    }
    ask(
        cx,
        grant,
        Ask {
            chat_id: Some(node.chat_id),
            placement: Placement::Edit(node.id),
            content: body.content,
            model_id: body.model_id,
            inherited_model: node.model_id,
            agent_id: body.agent_id,
            knowledge_base_ids: body.knowledge_base_ids.unwrap_or_default(),
            upload_ids: body
                .upload_ids
                .unwrap_or_else(|| stored_upload_ids(&node.metadata)),
            settings: body.settings,
            origin: Some(("edited_from", node.id)),
        },
    )
    .await
}

/// Another answer to an answer's question (its sibling); it ends the
/// chat's active path.
pub async fn regenerate(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    body: RegenerateRequest,
) -> Result<mpsc::Receiver<Numbered>, Error> {
    let answer = cx.datastore.chat_node(grant, body.message_id).await?;
    if answer.role != ChatRole::Model {
        return Err(Error::invalid(
            "not_an_answer",
            "only an answer (a MODEL message) can be regenerated",
        ));
    }
    let question_id = answer
        .parent_message_id
        .ok_or(Error::NotFound { what: "message" })?;
    let question = cx.datastore.chat_node(grant, question_id).await?;
    ask(
        cx,
        grant,
        Ask {
            chat_id: Some(answer.chat_id),
            placement: Placement::Regenerate(answer.id),
            content: question.content,
            model_id: body.model_id,
            inherited_model: answer.model_id,
            agent_id: body.agent_id,
            knowledge_base_ids: body.knowledge_base_ids.unwrap_or_default(),
            upload_ids: stored_upload_ids(&question.metadata),
            settings: body.settings,
            origin: Some(("regenerated_from", answer.id)),
        },
    )
    .await
}

/// The model an answer uses: the agent's, the requested one, the
/// inherited one while it is still offered, or the first offered.
fn ask_model(
    cx: &ServerContext,
    agent: Option<&crate::db::datastore::agents::AgentRow>,
    requested: Option<Uuid>,
    inherited: Option<Uuid>,
) -> Result<ModelEntry, Error> {
    match (agent, requested, inherited) {
        (Some(a), _, _) => crate::app::models::pick(cx, Some(a.model_id)),
        (None, Some(id), _) => crate::app::models::pick(cx, Some(id)),
        (None, None, Some(id)) => {
            crate::app::models::pick(cx, Some(id)).or_else(|_| crate::app::models::pick(cx, None))
        }
        (None, None, None) => crate::app::models::pick(cx, None),
    }
}

async fn ask(
    cx: &ServerContext,
    grant: &Grant<on::Org, perm::ChatsWrite>,
    body: Ask,
) -> Result<mpsc::Receiver<Numbered>, Error> {
    check_message(&body.content, MESSAGE_MAX_CHARS)?;
    if let Some(s) = &body.settings {
        check_settings(s)?;
    }
    let kb_ids = body.knowledge_base_ids.clone();
    let upload_ids = body.upload_ids.clone();
    check_ask_sizes(&kb_ids, &upload_ids)?;
    // The chat (checked again, atomically, when the message is stored).
    let chat = match body.chat_id {
        Some(id) => Some(cx.datastore.chat_get(grant, id).await?),
        None => None,
    };
    // An agent: its model, prompt, settings and tools.
    let agent = match body.agent_id {
        None => None,
        Some(id) => Some(active_agent(cx, grant, id).await?),
    };
    let model = ask_model(cx, agent.as_ref(), body.model_id, body.inherited_model)?;
    crate::app::models::check_available(&model).await?;
    // The uploads the model cannot take are refused before anything else.
    let uploads = match upload_ids.is_empty() {
        true => Vec::new(),
        false => {
            cx.datastore
                .chat_files_of_caller(grant, &upload_ids)
                .await?
        }
    };
    attachments::check_inputs(&model, &uploads)?;
    let sources = retrieve(cx, grant, &kb_ids, &body.content).await?;
    let attachments::Prepared {
        texts: files,
        attachments,
    } = attachments::prepare(cx, grant, &model, &uploads).await?;
    let settings = body
        .settings
        .clone()
        .or_else(|| chat.as_ref().and_then(|c| settings_of(&c.settings)));
    // The budgets, before anything is stored (the history is not read
    // yet: the estimate counts the new message with its sources), beside
    // the organization's quota.
    let mut prompt = ModelMessage::user(prompt_text(&body.content, &sources, &files));
    prompt.attachments = attachments;
    // Attachments count as the text of their tokens (3 bytes a token, the
    // estimate's rate).
    let prompt_chars = body.content.len()
        + sources.iter().map(|s| s.content.len()).sum::<usize>()
        + files.iter().map(|(_, text)| text.len()).sum::<usize>()
        + prompt
            .attachments
            .iter()
            .map(|a| attachment_tokens(a, &model.provider) as usize * 3)
            .sum::<usize>();
    let (features, metered) = tokio::try_join!(
        crate::app::orgs::features(cx, grant),
        crate::app::usage::admit(
            cx,
            crate::app::usage::member(grant),
            "chat",
            &model,
            prompt_chars,
            settings.as_ref().and_then(|s| s.max_tokens),
        ),
    )?;
    let daily_limit = features.daily_chat_limit;
    let user_message_id = Uuid::new_v4();
    let answer_id = Uuid::new_v4();
    // The new message as the model sees it (the sources and uploads in it)
    // is always sent; the history gets what is left of the model's context
    // (an agent's system prompt, tools and max_tokens are known later:
    // its history is read as if they took nothing, and cut once they are).
    let max_tokens = match &agent {
        Some(_) => Some(0),
        None => settings.as_ref().and_then(|s| s.max_tokens),
    };
    let history_bound = HistoryBound {
        rows: HISTORY_MAX_MESSAGES as i64,
        tokens: i64::from(history_budget(
            &model,
            max_tokens,
            message_tokens(&prompt, &model.provider),
        )),
    };
    let mut metadata = json!({"knowledge_base_ids": kb_ids, "upload_ids": upload_ids});
    if let Some((key, id)) = body.origin {
        metadata[key] = json!(id);
    }
    let (chat, created, question_id, history) = cx
        .datastore
        .chat_begin_exchange(
            grant,
            &NewExchange {
                chat_id: body.chat_id,
                placement: body.placement,
                new_title: DEFAULT_TITLE,
                new_settings: None,
                content: &body.content,
                model_id: model.id,
                agent_id: body.agent_id,
                metadata,
                upload_ids: &upload_ids,
                daily_limit,
                user_message_id,
                answer_id,
                history: history_bound,
            },
        )
        .await?;

    let images = attachments::history_images(
        cx,
        grant,
        &model,
        &history_uploads(&history),
        prompt.attachments.len(),
    )
    .await?;
    let mut messages = model_history(history, images);
    messages.push(prompt);
    let log = grant.log().new(slog::o!(
        "chat_id" => chat.id.to_string(), "message_id" => answer_id.to_string()));
    let mut spec = match &agent {
        Some(agent) => {
            let mut spec = crate::app::agents::run_spec(cx, grant, agent, messages, &log).await?;
            if let Some(s) = &body.settings {
                spec.temperature = s.temperature.map(|t| t as f32).or(spec.temperature);
                spec.max_tokens = s.max_tokens.or(spec.max_tokens);
                if s.reasoning_effort.is_some() || s.reasoning_budget_tokens.is_some() {
                    (spec.reasoning, spec.max_tokens) = crate::app::models::reasoning(
                        &spec.model,
                        s.reasoning_effort,
                        s.reasoning_budget_tokens,
                        spec.max_tokens,
                    );
                }
            }
            spec
        }
        None => {
            let (reasoning, max_tokens) = crate::app::models::reasoning(
                &model,
                settings.as_ref().and_then(|s| s.reasoning_effort),
                settings.as_ref().and_then(|s| s.reasoning_budget_tokens),
                settings.as_ref().and_then(|s| s.max_tokens),
            );
            RunSpec {
                model: model.clone(),
                retry: cx.models.retry.clone(),
                system_prompt: String::new(),
                temperature: settings
                    .as_ref()
                    .and_then(|s| s.temperature)
                    .map(|t| t as f32),
                max_tokens,
                reasoning,
                history: messages,
                tools: Vec::new(),
                limits: RunLimits::default(),
                log: log.clone(),
                whole: false,
                usage: None,
            }
        }
    };
    spec.fit_context();
    let title_charges = metered.charges();
    spec.usage = Some(Box::new(metered));
    let area = ChatAnswer {
        datastore: cx.datastore.clone(),
        usage: cx.usage.clone(),
        title_charges,
        retry: cx.models.retry.clone(),
        grant: grant.clone(),
        chat_id: chat.id,
        new_chat: created,
        first_message: body.content.clone(),
        model,
        answer_id,
        sources: sources.clone(),
        upload_ids,
        log: log.clone(),
    };
    let (mut answer, rx) = Answer::begin(cx, area, (StreamKind::Chat, answer_id), 256, grant, log);
    answer
        .emit(ChatStreamEvent::Start {
            chat_id: chat.id,
            user_message_id: question_id,
            message_id: answer_id,
        })
        .await;
    if !sources.is_empty() {
        answer.emit(ChatStreamEvent::Sources { sources }).await;
    }
    answer.spawn(spec);
    Ok(rx)
}

/// A chat's answer, as the answer pipeline sees it: stored in the chat's
/// messages with its usage, streamed as [`ChatStreamEvent`]s (tool calls
/// included), closed with the usage, a new chat's title and live notices.
struct ChatAnswer {
    datastore: crate::db::Datastore,
    /// Records the title's model call, and the budgets it is charged to.
    usage: crate::usage::UsageRecorder,
    title_charges: Vec<crate::usage::Reservation>,
    retry: crate::providers::RetryPolicy,
    grant: Grant<on::Org, perm::ChatsWrite>,
    chat_id: Uuid,
    new_chat: bool,
    first_message: String,
    model: ModelEntry,
    answer_id: Uuid,
    sources: Vec<ChatSource>,
    upload_ids: Vec<Uuid>,
    log: slog::Logger,
}

/// How a chat answer that ended this way is stored.
fn stored_status(outcome: &Outcome) -> ChatMessageStatus {
    match outcome {
        Outcome::Complete => ChatMessageStatus::Complete,
        Outcome::Stopped | Outcome::Gone => ChatMessageStatus::Stopped,
        Outcome::Failed { .. } | Outcome::Interrupted | Outcome::Lost => ChatMessageStatus::Failed,
    }
}

#[async_trait::async_trait]
impl Area for ChatAnswer {
    type Event = ChatStreamEvent;

    fn content(&self, piece: String) -> ChatStreamEvent {
        ChatStreamEvent::Content { content: piece }
    }

    fn route(&self, route: &crate::providers::router::Route) -> Option<Vec<ChatStreamEvent>> {
        Some(super::route_events(route))
    }

    fn reasoning(&self, piece: String) -> Option<ChatStreamEvent> {
        Some(ChatStreamEvent::Reasoning { content: piece })
    }

    fn tool_started(&self, id: String, name: String, input: Value) -> Option<ChatStreamEvent> {
        Some(ChatStreamEvent::ToolStarted { id, name, input })
    }

    fn tool_finished(&self, f: ToolFinished) -> Option<ChatStreamEvent> {
        Some(ChatStreamEvent::ToolFinished {
            id: f.id,
            name: f.name,
            input: f.input,
            output: f.output,
            error: f.error,
            successful: f.successful,
        })
    }

    fn status(&self, outcome: &Outcome) -> &'static str {
        stored_status(outcome).as_str()
    }

    async fn save_partial(&self, text: &str) -> Result<(), Error> {
        self.datastore
            .chat_answer_save_partial(&self.grant, self.answer_id, text)
            .await
    }

    async fn store(
        &self,
        text: &str,
        reasoning: &str,
        route: &[workspace_api::chat::AnswerRoute],
        usage: Option<crate::providers::Usage>,
        outcome: &Outcome,
    ) -> Result<(), Error> {
        let usage = usage.unwrap_or_default();
        let prompt_data = (!self.sources.is_empty() || !self.upload_ids.is_empty())
            .then(|| json!({"sources": self.sources, "upload_ids": self.upload_ids}));
        let finished = FinishedAnswer {
            chat_id: self.chat_id,
            id: self.answer_id,
            content: text,
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            route,
            status: stored_status(outcome),
            error_code: outcome.error_code(),
            input_tokens: i64::from(usage.input_tokens),
            output_tokens: i64::from(usage.output_tokens),
            cached_tokens: i64::from(usage.cached_tokens),
            reasoning_tokens: i64::from(usage.reasoning_tokens),
            prompt_data,
        };
        self.datastore
            .chat_answer_finish(&self.grant, &finished)
            .await
    }

    /// `usage`, then for a new chat that completed its title (also as a
    /// live notice), the live notice that the answer ended, and the last
    /// event: `end` (`stop` or `stopped`) or `error`.
    async fn close(
        &self,
        out: &mut Out<Self::Event>,
        outcome: Outcome,
        _stored: Stored,
        usage: Option<crate::providers::Usage>,
    ) {
        let usage = usage.unwrap_or_default();
        out.emit(ChatStreamEvent::Usage {
            input_tokens: i64::from(usage.input_tokens),
            output_tokens: i64::from(usage.output_tokens),
            total_tokens: i64::from(usage.total_tokens()),
            cached_tokens: i64::from(usage.cached_tokens),
            reasoning_tokens: i64::from(usage.reasoning_tokens),
        })
        .await;
        if self.new_chat && matches!(outcome, Outcome::Complete) {
            // Charged to the budgets the answer was checked against.
            let metered = crate::usage::Metered::new(
                self.usage.clone(),
                crate::app::usage::member(&self.grant),
                "title",
                &self.model,
                Vec::new(),
            )
            .charged_to(self.title_charges.clone());
            let title = generate_title(
                &self.model,
                &self.retry,
                &self.first_message,
                &self.log,
                metered,
            )
            .await;
            if let Err(e) = self
                .datastore
                .chat_set_title(&self.grant, self.chat_id, &title)
                .await
            {
                slog::warn!(self.log, "storing the title failed"; "error" => %e);
            }
            out.emit(ChatStreamEvent::Title {
                chat_id: self.chat_id,
                title: title.clone(),
            })
            .await;
            let notice = json!({"type": "title", "chat_id": self.chat_id, "title": title});
            let _ = self
                .datastore
                .notify(
                    LIVE_CHANNEL,
                    &live_payload(self.grant.org_id(), self.grant.user_id(), &notice),
                )
                .await;
        }
        let notice = message_notice(self.chat_id, self.answer_id, stored_status(&outcome));
        let sent = self
            .datastore
            .notify(
                LIVE_CHANNEL,
                &live_payload(self.grant.org_id(), self.grant.user_id(), &notice),
            )
            .await;
        if let Err(e) = sent {
            slog::warn!(self.log, "sending the live notice failed"; "error" => %e);
        }
        let last = match (&outcome, outcome.error()) {
            (_, Some((error_code, message))) => ChatStreamEvent::Error {
                error_code,
                message,
            },
            (Outcome::Stopped, None) => ChatStreamEvent::End {
                message: "DONE".into(),
                finish_reason: "stopped".into(),
            },
            (_, None) => ChatStreamEvent::End {
                message: "DONE".into(),
                finish_reason: "stop".into(),
            },
        };
        out.emit(last).await;
    }
}

/// The title of a new chat: the offline model's is the first words of the
/// message (deterministic); other models are asked for one (15 s at
/// most), falling back to those words.
async fn generate_title(
    model: &ModelEntry,
    retry: &crate::providers::RetryPolicy,
    message: &str,
    log: &slog::Logger,
    metered: crate::usage::Metered,
) -> String {
    let fallback = fallback_title(message);
    if model.provider == "offline" {
        return fallback;
    }
    let request = ChatRequest {
        messages: vec![
            ModelMessage::system(
                "Write a title of at most six words for a chat that starts with the \
                 user's message. Answer with the title only, without quotes.",
            ),
            ModelMessage::user(message.chars().take(2000).collect::<String>()),
        ],
        max_tokens: Some(24),
        ..Default::default()
    };
    match crate::providers::ask(
        model.chat.as_ref(),
        &request,
        retry,
        log,
        Duration::from_secs(15),
        metered.asking(&request),
    )
    .await
    {
        Some(t) => {
            let t = t.trim().trim_matches('"').trim();
            let t: String = t.chars().take(80).collect();
            if t.is_empty() { fallback } else { t }
        }
        None => fallback,
    }
}

/// The first six words of the message, at most 60 characters.
pub fn fallback_title(message: &str) -> String {
    let words: Vec<&str> = message.split_whitespace().take(6).collect();
    let mut title: String = words.join(" ").chars().take(60).collect();
    if title.is_empty() {
        title = DEFAULT_TITLE.to_string();
    }
    title
}

// ---- resume and stop ----

/// Replays the events of an answer after `after`, then follows it live.
pub async fn resume(
    cx: &ServerContext,
    access: &OrgAccess,
    message_id: Uuid,
    after: i32,
) -> Result<mpsc::Receiver<Numbered>, Error> {
    cx.datastore
        .chat_answer_of_caller(access, message_id)
        .await?;
    Ok(crate::app::streams::follow(
        cx.datastore.clone(),
        &cx.chat_hub,
        StreamKind::Chat,
        message_id,
        after,
        "GET /api/chat",
        access.log().clone(),
    ))
}

pub async fn stop(
    cx: &ServerContext,
    access: &OrgAccess,
    message_id: Uuid,
) -> Result<StopResponse, Error> {
    let (_, status) = cx
        .datastore
        .chat_answer_of_caller(access, message_id)
        .await?;
    let streaming = status == ChatMessageStatus::Streaming;
    if streaming {
        cx.datastore
            .notify(STOP_CHANNEL, &message_id.to_string())
            .await?;
    }
    Ok(StopResponse {
        message_id,
        stopped: streaming,
        message: if streaming {
            "the answer is being stopped".into()
        } else {
            "the answer had already ended".into()
        },
    })
}

// ---- prompt suggestions ----

/// Streams three prompt suggestions for the user's text (a direct answer:
/// not stored, ends when the client goes away).
pub async fn prompt(
    cx: &ServerContext,
    access: &OrgAccess,
    body: PromptRequest,
) -> Result<mpsc::Receiver<ChatStreamEvent>, Error> {
    check_message(&body.text, 10_000)?;
    let model = crate::app::models::pick(cx, body.model_id)?;
    crate::app::models::check_available(&model).await?;
    let mut spec = RunSpec {
        model,
        retry: cx.models.retry.clone(),
        system_prompt: "Suggest three prompts the user could send to an AI assistant, based \
                        on the user's text. Answer with the three prompts only, one per line."
            .into(),
        temperature: None,
        max_tokens: Some(300),
        reasoning: None,
        history: vec![ModelMessage::user(body.text)],
        tools: Vec::new(),
        limits: RunLimits {
            max_steps: 1,
            ..RunLimits::default()
        },
        log: access.log().clone(),
        whole: false,
        usage: None,
    };
    crate::app::usage::meter(cx, crate::app::usage::member(access), "prompt", &mut spec)
        .await
        .map_err(crate::app::usage::refused_as_forbidden)?;
    let (answer, rx) = Answer::direct(cx, PromptAnswer, 64, Some(access), access.log().clone());
    answer.spawn(spec);
    Ok(rx)
}

/// Prompt suggestions, as the answer pipeline sees them: `content`
/// events, then `end` or `error`.
struct PromptAnswer;

#[async_trait::async_trait]
impl Area for PromptAnswer {
    type Event = ChatStreamEvent;

    fn content(&self, piece: String) -> ChatStreamEvent {
        ChatStreamEvent::Content { content: piece }
    }

    fn route(&self, route: &crate::providers::router::Route) -> Option<Vec<ChatStreamEvent>> {
        Some(super::route_events(route))
    }

    async fn close(
        &self,
        out: &mut Out<ChatStreamEvent>,
        outcome: Outcome,
        _stored: Stored,
        _usage: Option<crate::providers::Usage>,
    ) {
        let last = match outcome.error() {
            None => ChatStreamEvent::End {
                message: "DONE".into(),
                finish_reason: "stop".into(),
            },
            Some((error_code, message)) => ChatStreamEvent::Error {
                error_code,
                message,
            },
        };
        if !matches!(outcome, Outcome::Gone) {
            out.emit(last).await;
        }
    }
}
