//! Workspace patch: statements sent together, with one `Sync`.
//!
//! [`Client::query`](crate::Client::query) sends each statement with its
//! own `Sync`, so PostgreSQL ends an implicit transaction, writes
//! `ReadyForQuery` and flushes its socket once per statement, even when
//! several are pipelined. A [`Batch`] is several statements' `Bind` and
//! `Execute` messages followed by one `Sync`, sent as one request: one
//! implicit transaction, one flush, one answer routed back, as libpq's
//! pipeline mode (`pgbench`'s `\startpipeline` … `\endpipeline`).
//!
//! As in any pipeline, once a statement fails PostgreSQL skips the rest up
//! to the `Sync`: [`Client::query_batch`](crate::Client::query_batch)
//! says which statement failed, and the ones after it did not run.

use crate::client::{InnerClient, Responses};
use crate::codec::FrontendMessage;
use crate::connection::RequestMessages;
use crate::query::encode_bind;
use crate::types::BorrowToSql;
use crate::{Error, Row, Statement};
use bytes::BytesMut;
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

/// Statements, each with its parameters, to send together (see the
/// module's documentation). Encoded as they are added, so a batch holds
/// no borrow of their parameters.
#[derive(Default)]
pub struct Batch {
    buf: BytesMut,
    statements: Vec<Statement>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Adds `statement` with `params` (its `Bind` and `Execute`).
    pub fn push<P, I>(&mut self, statement: &Statement, params: I) -> Result<(), Error>
    where
        P: BorrowToSql,
        I: IntoIterator<Item = P>,
        I::IntoIter: ExactSizeIterator,
    {
        encode_bind(statement, params, "", &mut self.buf)?;
        frontend::execute("", 0, &mut self.buf).map_err(Error::encode)?;
        self.statements.push(statement.clone());
        Ok(())
    }

    /// Adds the statements of `other`, after this batch's.
    pub fn append(&mut self, other: Batch) {
        self.buf.extend_from_slice(&other.buf);
        self.statements.extend(other.statements);
    }

    /// How many statements the batch holds.
    pub fn len(&self) -> usize {
        self.statements.len()
    }

    /// Whether the batch holds no statement.
    pub fn is_empty(&self) -> bool {
        self.statements.is_empty()
    }
}

/// A batch that did not run to its end: the statement that failed (or
/// whose answer was being read when the connection failed), why, and the
/// rows of the statements before it. The ones after it did not run.
#[derive(Debug)]
pub struct BatchError {
    /// The index, in the batch, of the statement that failed.
    pub index: usize,
    /// Why it failed.
    pub error: Error,
    /// The rows of the statements before it, in order.
    pub done: Vec<Vec<Row>>,
}

pub async fn query_batch(
    client: &InnerClient,
    mut batch: Batch,
) -> Result<Vec<Vec<Row>>, BatchError> {
    frontend::sync(&mut batch.buf);
    let mut results = Vec::with_capacity(batch.statements.len());
    let mut responses = match client.send(RequestMessages::Single(FrontendMessage::Raw(
        batch.buf.freeze(),
    ))) {
        Ok(responses) => responses,
        Err(error) => {
            return Err(BatchError {
                index: 0,
                error,
                done: results,
            });
        }
    };
    for (index, statement) in batch.statements.into_iter().enumerate() {
        match statement_rows(&mut responses, statement).await {
            Ok(rows) => results.push(rows),
            Err(error) => {
                return Err(BatchError {
                    index,
                    error,
                    done: results,
                });
            }
        }
    }
    match responses.next().await {
        Ok(Message::ReadyForQuery(_)) => Ok(results),
        other => {
            let error = other.err().unwrap_or_else(Error::unexpected_message);
            let index = results.len().saturating_sub(1);
            results.pop();
            Err(BatchError {
                index,
                error,
                done: results,
            })
        }
    }
}

/// One statement's answer: `BindComplete`, its rows, then
/// `CommandComplete` (an `ErrorResponse` is an error of `next`).
async fn statement_rows(
    responses: &mut Responses,
    statement: Statement,
) -> Result<Vec<Row>, Error> {
    match responses.next().await? {
        Message::BindComplete => {}
        _ => return Err(Error::unexpected_message()),
    }
    let mut rows = Vec::new();
    loop {
        match responses.next().await? {
            Message::DataRow(body) => rows.push(Row::new(statement.clone(), body)?),
            Message::CommandComplete(_) | Message::EmptyQueryResponse => return Ok(rows),
            _ => return Err(Error::unexpected_message()),
        }
    }
}
