//! Hand-written methods for the operations progenitor cannot generate:
//! `chat_upload_file` (a `multipart/form-data` body, progenitor#402) and
//! `kb_query` (JSON or, with `stream`, Server-Sent Events), and the chat
//! exports (JSON or Markdown, read as bytes).

use crate::{ByteStream, Client, ClientInfo, Error, ResponseValue, types};

impl Client {
    /// `POST /api/chat/upload_file`: uploads `bytes` as the form part
    /// `file` named `filename`.
    pub async fn chat_upload_file(
        &self,
        org_id: uuid::Uuid,
        chat_id: Option<uuid::Uuid>,
        filename: &str,
        bytes: Vec<u8>,
    ) -> Result<ResponseValue<types::Upload>, Error<types::Error>> {
        let boundary = format!("workspace-{}", uuid::Uuid::new_v4().simple());
        let safe_name = filename.replace(['"', '\r', '\n'], "_");
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"{safe_name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .into_bytes();
        body.extend_from_slice(&bytes);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let mut query = vec![("org_id", org_id.to_string())];
        if let Some(chat_id) = chat_id {
            query.push(("chat_id", chat_id.to_string()));
        }
        let request = self
            .client()
            .post(format!("{}/api/chat/upload_file", self.baseurl()))
            .query(&query)
            .header(
                reqwest::header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={boundary}"),
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body)
            .build()?;
        let response = self.client().execute(request).await?;
        match response.status().as_u16() {
            201 => ResponseValue::from_response(response).await,
            400..=599 => Err(Error::ErrorResponse(
                ResponseValue::from_response(response).await?,
            )),
            _ => Err(Error::UnexpectedResponse(response)),
        }
    }

    /// `POST /api/kb/query` without streaming: the answer as JSON.
    pub async fn kb_query(
        &self,
        kb_id: uuid::Uuid,
        body: &types::KbQueryRequest,
    ) -> Result<ResponseValue<types::KbQueryResponse>, Error<types::Error>> {
        let request = self
            .client()
            .post(format!("{}/api/kb/query", self.baseurl()))
            .query(&[("kb_id", kb_id.to_string())])
            .header(reqwest::header::ACCEPT, "application/json")
            .json(body)
            .build()?;
        let response = self.client().execute(request).await?;
        match response.status().as_u16() {
            200 => ResponseValue::from_response(response).await,
            400..=599 => Err(Error::ErrorResponse(
                ResponseValue::from_response(response).await?,
            )),
            _ => Err(Error::UnexpectedResponse(response)),
        }
    }

    /// `GET /api/chat/export`: one chat as `format` (`json`, a
    /// `types::ChatExportDocument`, or `markdown`), as the bytes arrive.
    pub async fn chat_export(
        &self,
        org_id: uuid::Uuid,
        chat_id: uuid::Uuid,
        format: types::ChatExportFormat,
    ) -> Result<ResponseValue<ByteStream>, Error<types::Error>> {
        self.export_bytes(
            "/api/chat/export",
            vec![
                ("org_id", org_id.to_string()),
                ("chat_id", chat_id.to_string()),
                ("format", format.to_string()),
            ],
        )
        .await
    }

    /// `GET /api/chat/export_all`: all of the caller's chats in the
    /// organization as `format`, as the bytes arrive.
    pub async fn chat_export_all(
        &self,
        org_id: uuid::Uuid,
        format: types::ChatExportFormat,
    ) -> Result<ResponseValue<ByteStream>, Error<types::Error>> {
        self.export_bytes(
            "/api/chat/export_all",
            vec![
                ("org_id", org_id.to_string()),
                ("format", format.to_string()),
            ],
        )
        .await
    }

    async fn export_bytes(
        &self,
        path: &str,
        query: Vec<(&str, String)>,
    ) -> Result<ResponseValue<ByteStream>, Error<types::Error>> {
        let request = self
            .client()
            .get(format!("{}{path}", self.baseurl()))
            .query(&query)
            .build()?;
        let response = self.client().execute(request).await?;
        match response.status().as_u16() {
            200 => Ok(ResponseValue::stream(response)),
            400..=599 => Err(Error::ErrorResponse(
                ResponseValue::from_response(response).await?,
            )),
            _ => Err(Error::UnexpectedResponse(response)),
        }
    }
}
