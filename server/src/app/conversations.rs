//! Conversations, sessions, messages and the streamed answer.

use crate::authz::OrgAccess;
use crate::context::ServerContext;
use crate::db::Datastore;
use crate::db::datastore::conversations::{ConversationRow, MessageRow, NewAnswer, SessionRow};
use crate::db::enums as db;
use crate::error::Error;
use crate::providers::{self, ChatEvent, ChatMessage, ChatRequest, ModelEntry, RetryPolicy, Role};
use futures::StreamExt;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use uuid::Uuid;
use workspace_api::conversations::{
    Conversation, ConversationCreate, ConversationMessage, ConversationMessagesPage,
    ConversationSession, ConversationSessionCreate, ConversationSessionStatus,
    ConversationSessionView, ConversationStreamEvent, ConversationWithSessions,
    MESSAGES_DEFAULT_LIMIT, MESSAGES_MAX_LIMIT, MessageRole, MessageStatus, MessagesQuery, Model,
    StreamChatRequest,
};

/// Longest title, in characters.
pub const TITLE_MAX_CHARS: usize = 200;
/// Longest user message, in characters.
pub const MESSAGE_MAX_CHARS: usize = 100_000;

fn conversation_view(row: ConversationRow) -> Conversation {
    Conversation {
        id: row.id,
        title: row.title,
        is_archived: row.is_archived,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

fn session_status(status: db::SessionStatus) -> ConversationSessionStatus {
    match status {
        db::SessionStatus::Active => ConversationSessionStatus::Active,
        db::SessionStatus::Completed => ConversationSessionStatus::Completed,
    }
}

fn message_view(row: MessageRow) -> ConversationMessage {
    ConversationMessage {
        id: row.id.to_string(),
        role: match row.role {
            db::MessageRole::Assistant => MessageRole::Assistant,
            db::MessageRole::User => MessageRole::User,
        },
        content: row.content,
        created_at: row.created_at,
        chat_session_id: row.session_id,
        status: match row.status {
            db::MessageStatus::Complete => MessageStatus::Complete,
            db::MessageStatus::Cancelled => MessageStatus::Cancelled,
            db::MessageStatus::Failed => MessageStatus::Failed,
            db::MessageStatus::Streaming => MessageStatus::Streaming,
        },
    }
}

pub async fn create(
    cx: &ServerContext,
    access: &OrgAccess,
    body: ConversationCreate,
) -> Result<Conversation, Error> {
    let title = body.title.trim();
    if title.is_empty() || title.chars().count() > TITLE_MAX_CHARS {
        return Err(Error::invalid(
            "invalid_title",
            format!("the title must be 1 to {TITLE_MAX_CHARS} characters"),
        ));
    }
    let row = cx
        .datastore
        .conversation_create(
            access,
            access.user_id(),
            title,
            body.is_archived.unwrap_or(false),
        )
        .await?;
    Ok(conversation_view(row))
}

pub async fn create_session(
    cx: &ServerContext,
    access: &OrgAccess,
    body: ConversationSessionCreate,
) -> Result<ConversationSession, Error> {
    // Only models this server offers; an unknown id is not found.
    if cx.models.get(body.model_id).is_none() {
        return Err(Error::NotFound { what: "model" });
    }
    let row = cx
        .datastore
        .session_create(
            access,
            body.conversation_id,
            body.model_id,
            access.user_id(),
        )
        .await?;
    Ok(ConversationSession {
        id: row.id,
        conversation_id: row.conversation_id,
        model_id: row.model_id,
        status: session_status(row.status),
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

pub async fn list(
    cx: &ServerContext,
    access: &OrgAccess,
    page: crate::db::datastore::Page,
) -> Result<Vec<Conversation>, Error> {
    let rows = cx.datastore.conversation_list(access, page).await?;
    Ok(rows.into_iter().map(conversation_view).collect())
}

pub async fn get_with_sessions(
    cx: &ServerContext,
    access: &OrgAccess,
    conversation_id: Uuid,
) -> Result<ConversationWithSessions, Error> {
    let conversation = cx
        .datastore
        .conversation_get(access, conversation_id)
        .await?;
    let sessions = cx.datastore.sessions_of(access, conversation_id).await?;
    Ok(ConversationWithSessions {
        conversation: conversation_view(conversation),
        sessions: sessions
            .into_iter()
            .map(|s| ConversationSessionView {
                id: s.id,
                conversation_id: s.conversation_id,
                model: Model {
                    id: s.model_id,
                    name: s.model_name,
                    provider: s.model_provider,
                },
                status: session_status(s.status),
                created_at: s.created_at,
            })
            .collect(),
    })
}

pub async fn messages(
    cx: &ServerContext,
    access: &OrgAccess,
    query: MessagesQuery,
) -> Result<ConversationMessagesPage, Error> {
    let limit = query.limit.unwrap_or(MESSAGES_DEFAULT_LIMIT);
    let offset = query.offset.unwrap_or(0);
    if !(1..=MESSAGES_MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid(
            "invalid_pagination",
            format!("limit must be 1 to {MESSAGES_MAX_LIMIT}"),
        ));
    }
    // 404 for a conversation of another organization.
    cx.datastore
        .conversation_get(access, query.conversation_id)
        .await?;
    let (rows, total) = cx
        .datastore
        .messages_page(
            access,
            query.conversation_id,
            i64::from(limit),
            i64::from(offset),
        )
        .await?;
    Ok(ConversationMessagesPage {
        messages: rows.into_iter().map(message_view).collect(),
        total: u64::try_from(total).unwrap_or(0),
        offset,
        limit,
    })
}

/// Validates the request, stores the user's message and starts the answer.
/// The returned channel yields the stream's events; the answer is relayed
/// and stored by a task of its own, which notices when the receiver is
/// dropped (the client went away).
pub async fn stream_chat(
    cx: &ServerContext,
    access: &OrgAccess,
    body: StreamChatRequest,
) -> Result<mpsc::Receiver<ConversationStreamEvent>, Error> {
    let length = body.message.chars().count();
    if body.message.trim().is_empty() || length > MESSAGE_MAX_CHARS {
        return Err(Error::invalid(
            "invalid_message",
            format!("the message must be 1 to {MESSAGE_MAX_CHARS} characters and not blank"),
        ));
    }
    let session = cx
        .datastore
        .session_get(access, body.chat_session_id)
        .await?;
    let model = cx.models.get(session.model_id).cloned().ok_or_else(|| {
        Error::invalid(
            "model_unavailable",
            format!(
                "the session's model {} is no longer offered by this server",
                session.model_name
            ),
        )
    })?;
    let daily_limit = crate::app::orgs::features(cx, access)
        .await?
        .daily_chat_limit;
    let message_id = Uuid::new_v4();
    let history = cx
        .datastore
        .message_append_user(
            access,
            &session,
            access.user_id(),
            &body.message,
            daily_limit,
            message_id,
        )
        .await?;
    let request = ChatRequest {
        messages: history
            .into_iter()
            .filter(|m| !(m.role == db::MessageRole::Assistant && m.content.is_empty()))
            .map(|m| {
                ChatMessage::new(
                    match m.role {
                        db::MessageRole::Assistant => Role::Assistant,
                        db::MessageRole::User => Role::User,
                    },
                    m.content,
                )
            })
            .collect(),
        max_tokens: model.max_tokens,
        ..Default::default()
    };
    let (tx, rx) = mpsc::channel(64);
    let relay = Relay {
        datastore: cx.datastore.clone(),
        access: access.clone(),
        session,
        model,
        retry: cx.models.retry.clone(),
        log: access
            .log()
            .new(slog::o!("session_id" => body.chat_session_id.to_string())),
        message_id,
        metrics: cx.metrics.clone(),
    };
    tokio::spawn(relay.run(request, tx));
    Ok(rx)
}

/// How an answer ended.
enum Outcome {
    Complete,
    /// The client went away.
    Cancelled,
    Failed(providers::ProviderError),
}

struct Relay {
    datastore: Datastore,
    access: OrgAccess,
    session: SessionRow,
    model: ModelEntry,
    retry: RetryPolicy,
    log: slog::Logger,
    message_id: Uuid,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
}

/// How often the text of a streaming answer is saved.
const SAVE_INTERVAL: Duration = Duration::from_secs(1);
/// How long the client waits for a finished answer to be stored before it
/// is told that storing goes on in the background.
const STORE_WAIT: Duration = Duration::from_secs(30);
/// The longest pause between two attempts to store an answer.
const STORE_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Stores the answer, retrying with backoff (100 ms doubling to 5 s) for
/// as long as the database is unavailable: an answer that reached the
/// client must reach the database. Other errors are logged and end the
/// attempts.
async fn store_until_stored(
    datastore: Datastore,
    access: OrgAccess,
    session: SessionRow,
    answer: NewAnswer<'static>,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    log: slog::Logger,
) -> Result<(), Error> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut backoff = Duration::from_millis(100);
    let mut pending = false;
    let result = loop {
        match datastore
            .message_store_answer(&access, &session, &answer)
            .await
        {
            Ok(()) => break Ok(()),
            Err(e @ Error::Unavailable { .. }) => {
                if !pending {
                    pending = true;
                    metrics.answers_pending_store.fetch_add(1, Relaxed);
                    slog::warn!(log, "storing the answer failed; retrying until the database is back";
                        "error" => %e);
                }
                metrics.answers_store_retries.fetch_add(1, Relaxed);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(STORE_BACKOFF_MAX);
            }
            Err(e) => {
                slog::error!(log, "storing the answer failed"; "error" => %e);
                break Err(e);
            }
        }
    };
    if pending {
        metrics.answers_pending_store.fetch_sub(1, Relaxed);
        if result.is_ok() {
            slog::info!(log, "answer stored after the database came back");
        }
    }
    result
}

impl Relay {
    /// Saves the text so far, at most once per [`SAVE_INTERVAL`] and one
    /// save at a time, without holding up the stream (a save that fails,
    /// e.g. while the database is down, is simply superseded).
    fn save_partial(
        &self,
        text: &str,
        saving: &mut Option<tokio::task::JoinHandle<()>>,
        saved_at: &mut Instant,
    ) {
        if saved_at.elapsed() < SAVE_INTERVAL || saving.as_ref().is_some_and(|s| !s.is_finished()) {
            return;
        }
        *saved_at = Instant::now();
        let datastore = self.datastore.clone();
        let access = self.access.clone();
        let id = self.message_id;
        let text = text.to_string();
        let log = self.log.clone();
        *saving = Some(tokio::spawn(async move {
            if let Err(e) = datastore.message_save_partial(&access, id, &text).await {
                slog::debug!(log, "saving the partial answer failed"; "error" => %e);
            }
        }));
    }

    async fn run(self, request: ChatRequest, tx: mpsc::Sender<ConversationStreamEvent>) {
        let log = self.log.new(slog::o!(
            "model" => self.model.name.clone(),
            "message_id" => self.message_id.to_string(),
        ));
        use std::sync::atomic::Ordering::Relaxed;
        self.metrics.streams_active.fetch_add(1, Relaxed);
        let mut text = String::new();
        let mut usage = None;
        let mut saving: Option<tokio::task::JoinHandle<()>> = None;
        let mut saved_at = Instant::now();
        let start = ConversationStreamEvent::Start {
            message_id: self.message_id.to_string(),
        };
        let outcome = if tx.send(start).await.is_err() {
            Outcome::Cancelled
        } else {
            let started = tokio::select! {
                _ = tx.closed() => None,
                r = providers::start(self.model.chat.as_ref(), &request, &self.retry, &log) => Some(r),
            };
            match started {
                None => Outcome::Cancelled,
                Some(Err(e)) => Outcome::Failed(e),
                Some(Ok(mut stream)) => loop {
                    let item = tokio::select! {
                        biased;
                        _ = tx.closed() => break Outcome::Cancelled,
                        item = stream.next() => item,
                    };
                    match item {
                        None => break Outcome::Complete,
                        Some(Ok(ChatEvent::Text(piece))) => {
                            text.push_str(&piece);
                            let event = ConversationStreamEvent::Content { content: piece };
                            if tx.send(event).await.is_err() {
                                break Outcome::Cancelled;
                            }
                            self.save_partial(&text, &mut saving, &mut saved_at);
                        }
                        Some(Ok(ChatEvent::Usage(u))) => usage = Some(u),
                        Some(Ok(ChatEvent::Finish(reason))) => {
                            slog::debug!(log, "answer finished"; "reason" => ?reason);
                        }
                        Some(Ok(ChatEvent::ToolCall(call))) => {
                            // No tools are offered in conversations.
                            slog::debug!(log, "ignoring a tool call"; "tool" => call.name);
                        }
                        Some(Err(e)) => {
                            slog::warn!(log, "model provider failed mid-answer"; "error" => %e);
                            break Outcome::Failed(e);
                        }
                    }
                },
            }
        };

        if let Some(saving) = saving {
            saving.abort();
        }
        let (status, error_code) = match &outcome {
            Outcome::Complete => (db::MessageStatus::Complete, None),
            Outcome::Cancelled => (db::MessageStatus::Cancelled, None),
            Outcome::Failed(e) => (db::MessageStatus::Failed, Some(e.error_code())),
        };
        self.metrics.streams_active.fetch_sub(1, Relaxed);
        self.metrics.stream_finished(status.as_str());
        let tokens = |n: u32| Some(i32::try_from(n).unwrap_or(i32::MAX));
        let chars = text.len();
        let answer = NewAnswer {
            id: self.message_id,
            content: std::borrow::Cow::Owned(text),
            status,
            error_code,
            input_tokens: usage.and_then(|u| tokens(u.input_tokens)),
            output_tokens: usage.and_then(|u| tokens(u.output_tokens)),
            cached_tokens: usage.and_then(|u| tokens(u.cached_tokens)),
        };
        // Stored by a task of its own, which outlives the client's wait.
        let mut store = tokio::spawn(store_until_stored(
            self.datastore.clone(),
            self.access.clone(),
            self.session,
            answer,
            self.metrics.clone(),
            log.clone(),
        ));
        let stored = match &outcome {
            Outcome::Cancelled => None,
            _ => Some(tokio::time::timeout(STORE_WAIT, &mut store).await),
        };
        slog::info!(log, "answer relayed"; "status" => status.as_str(), "chars" => chars,
            "stored" => matches!(stored, Some(Ok(Ok(Ok(()))))));
        let last = match (outcome, stored) {
            (Outcome::Cancelled, _) => return,
            (_, Some(Err(_elapsed))) => ConversationStreamEvent::Error {
                error_code: "database_unavailable".to_string(),
                message: "the answer was delivered but not yet stored; it will be stored \
                    when the database is back"
                    .to_string(),
            },
            (_, None | Some(Ok(Err(_))) | Some(Ok(Ok(Err(_))))) => ConversationStreamEvent::Error {
                error_code: "internal_error".to_string(),
                message: "the answer could not be stored".to_string(),
            },
            (Outcome::Complete, Some(Ok(Ok(Ok(()))))) => ConversationStreamEvent::End,
            (Outcome::Failed(e), Some(Ok(Ok(Ok(()))))) => ConversationStreamEvent::Error {
                error_code: e.error_code().to_string(),
                message: e.public_message().to_string(),
            },
        };
        let _ = tx.send(last).await;
    }
}
