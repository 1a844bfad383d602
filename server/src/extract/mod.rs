//! Text extraction from uploaded and fetched documents: TXT, MD, CSV,
//! HTML, PDF, DOCX and XLSX.
//!
//! Every file is hostile until bounded: a 1.5 KB spreadsheet can declare
//! a sheet of 17 billion cells, a small PDF or DOCX can inflate a
//! compressed stream to gigabytes, and an allocation that fails aborts a
//! process (it is not a panic: `catch_unwind` cannot stop it). So parsing
//! runs in a **separate, memory-limited process** ([`worker`]): the server
//! binary re-executed as `workspace-server extract-worker`, with an
//! address-space limit (`files.extraction_memory_mib`), a CPU limit, no
//! file writes, an empty environment and the wall-clock budget; it is
//! killed when the budget runs out. Whatever a file makes the parser do,
//! the worker dies and the server goes on: the file gets a clear error.
//! (Chosen over bounding each parser in the server: the parsers we use do
//! not expose every allocation they make — shared strings, inflated PDF
//! streams, the XML of a DOCX — so only a process boundary bounds them
//! all.) The parsers are bounded as well, for the in-process fallback (a
//! server library embedded without its binary, `files.extraction_worker`
//! off) and to fail early and clearly: spreadsheets are read cell by cell
//! (only used cells, never a dense sheet), and every extractor stops once
//! it has produced `max_bytes` of text.
//!
//! A corrupt, encrypted or unsupported file gives an [`ExtractError`] with
//! a sentence meant for people; the caller records it against the one file
//! or document and carries on with the others.

use std::io::{Cursor, Read};
use std::path::PathBuf;
use std::time::Duration;

pub mod html;
pub mod json;
pub mod sniff;
pub mod worker;

/// Limits of one extraction.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Largest text kept (bytes of UTF-8); longer text is cut at a
    /// character boundary.
    pub max_bytes: usize,
    /// Wall clock for parsing.
    pub timeout: Duration,
    /// Where parsing runs.
    pub isolation: Isolation,
}

/// Where a file is parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// In a child process: `program extract-worker` (the server's own
    /// binary), its address space limited to `memory_mib`.
    Process { program: PathBuf, memory_mib: u64 },
    /// On the server's blocking pool (parsers bounded, but an allocation
    /// failure would end the server): only where no worker binary exists.
    InProcess,
}

/// Why a file's text could not be extracted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// The format has no text to extract (images, audio, video).
    #[error("text cannot be extracted from {0} files")]
    Unsupported(String),
    /// The file is damaged or not what its type says.
    #[error("the file is corrupt or unreadable: {0}")]
    Corrupt(String),
    /// The file is password-protected.
    #[error("the file is encrypted; upload an unprotected copy")]
    Encrypted,
    /// Parsing took longer than the budget.
    #[error("text extraction took longer than {0} s")]
    TimedOut(u64),
    /// Parsing needed more memory than extraction may use (a hostile or
    /// pathological file): final, like a corrupt file.
    #[error("the file needs more than {0} MiB of memory to read; it cannot be extracted")]
    TooLarge(u64),
}

/// Whether text can be extracted from this (sniffed) content type.
pub fn supports(content_type: &str) -> bool {
    matches!(
        content_type,
        "text/plain" | "text/markdown" | "text/csv" | JSON | HTML | PDF | DOCX | XLSX
    )
}

/// A document's extracted text, and its title when the format has one
/// (HTML).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Document {
    pub title: Option<String>,
    pub text: String,
}

const HTML: &str = "text/html";
const JSON: &str = "application/json";
const PDF: &str = "application/pdf";
const DOCX: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
const XLSX: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";

/// The worker's pseudo type for a PDF's page count (never an upload's
/// type): the count is read where a text would be, within the same limits.
const PDF_PAGE_COUNT: &str = "application/x-workspace-pdf-page-count";

/// The page count of a PDF, read by [`crate::media::pdf_pages`] within
/// `budget` where text is extracted (the memory-limited worker process):
/// the PDF parser reads cross-reference streams before any bound of ours
/// applies, and a crafted one could make an allocation fail, which would
/// abort the process that parses it.
pub async fn pdf_page_count(bytes: bytes::Bytes, budget: Budget) -> Result<u32, ExtractError> {
    let document = match &budget.isolation {
        Isolation::Process {
            program,
            memory_mib,
        } => {
            worker::run(
                program,
                *memory_mib,
                PDF_PAGE_COUNT,
                None,
                bytes,
                64,
                budget.timeout,
            )
            .await?
        }
        Isolation::InProcess => in_process(PDF_PAGE_COUNT, bytes, None, &budget).await?,
    };
    document
        .text
        .trim()
        .parse()
        .map_err(|_| ExtractError::Corrupt("the page count could not be read".to_string()))
}

/// Extracts the text of `bytes` (of the sniffed `content_type`) within
/// `budget`: in the worker process, or on the blocking pool.
pub async fn extract(
    content_type: &str,
    bytes: bytes::Bytes,
    budget: Budget,
) -> Result<String, ExtractError> {
    Ok(extract_document(content_type, bytes, None, budget)
        .await?
        .text)
}

/// [`extract`] with the document's title; `base_url` is where an HTML
/// page came from (its links are resolved against it).
pub async fn extract_document(
    content_type: &str,
    bytes: bytes::Bytes,
    base_url: Option<&str>,
    budget: Budget,
) -> Result<Document, ExtractError> {
    if !supports(content_type) {
        return Err(ExtractError::Unsupported(content_type.to_string()));
    }
    let document = match &budget.isolation {
        Isolation::Process {
            program,
            memory_mib,
        } => {
            worker::run(
                program,
                *memory_mib,
                content_type,
                base_url,
                bytes,
                budget.max_bytes,
                budget.timeout,
            )
            .await?
        }
        Isolation::InProcess => in_process(content_type, bytes, base_url, &budget).await?,
    };
    Ok(Document {
        title: document.title,
        text: truncate(normalize(&document.text), budget.max_bytes),
    })
}

async fn in_process(
    content_type: &str,
    bytes: bytes::Bytes,
    base_url: Option<&str>,
    budget: &Budget,
) -> Result<Document, ExtractError> {
    let content_type = content_type.to_string();
    let base_url = base_url.map(str::to_string);
    let max_bytes = budget.max_bytes;
    let task = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(|| {
            extract_parts(&content_type, &bytes, base_url.as_deref(), max_bytes)
        })
    });
    // On timeout the blocking thread finishes on its own; its result is
    // dropped (a parser cannot be interrupted from outside).
    match tokio::time::timeout(budget.timeout, task).await {
        Err(_) => Err(ExtractError::TimedOut(budget.timeout.as_secs())),
        Ok(Err(join)) => Err(ExtractError::Corrupt(format!("the parser failed: {join}"))),
        Ok(Ok(Err(_panic))) => Err(ExtractError::Corrupt(
            "the parser could not read the file".to_string(),
        )),
        Ok(Ok(Ok(result))) => result,
    }
}

/// The synchronous extraction of the text (call it on a blocking thread).
/// Extractors stop once they have about `max_bytes` of text (the caller
/// cuts it exactly).
pub fn extract_blocking(
    content_type: &str,
    bytes: &[u8],
    max_bytes: usize,
) -> Result<String, ExtractError> {
    Ok(extract_parts(content_type, bytes, None, max_bytes)?.text)
}

/// The synchronous extraction: on a blocking thread, or in the worker.
pub(crate) fn extract_parts(
    content_type: &str,
    bytes: &[u8],
    base_url: Option<&str>,
    max_bytes: usize,
) -> Result<Document, ExtractError> {
    let text = match content_type {
        // A text that is JSON nested deeper than people write (100,000
        // deep in a few hundred KB) becomes its values, read without
        // recursion; any other text stays as it is.
        "text/plain" | JSON => {
            // `{`, `[` or a byte-order mark first: maybe JSON.
            let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
            let deep = matches!(first, Some(b'{' | b'[' | 0xEF))
                .then(|| json::deep_json_text(&String::from_utf8_lossy(bytes), max_bytes))
                .flatten();
            deep.unwrap_or_else(|| {
                String::from_utf8_lossy(&bytes[..bytes.len().min(max_bytes.saturating_add(4))])
                    .into_owned()
            })
        }
        "text/markdown" => {
            String::from_utf8_lossy(&bytes[..bytes.len().min(max_bytes.saturating_add(4))])
                .into_owned()
        }
        HTML => {
            let (title, text) =
                html::html_to_text(&String::from_utf8_lossy(bytes), base_url.unwrap_or(""));
            return Ok(Document { title, text });
        }
        "text/csv" => csv_text(bytes, max_bytes)?,
        PDF => pdf_text(bytes, max_bytes)?,
        PDF_PAGE_COUNT => match crate::media::pdf_pages(bytes) {
            Ok(pages) => pages.to_string(),
            Err(crate::media::PdfError::Encrypted) => return Err(ExtractError::Encrypted),
            Err(e) => return Err(ExtractError::Corrupt(e.message())),
        },
        DOCX => docx_text(bytes, max_bytes)?,
        XLSX => xlsx_text(bytes, max_bytes)?,
        other => return Err(ExtractError::Unsupported(other.to_string())),
    };
    Ok(Document { title: None, text })
}

/// CSV rows as lines of tab-separated cells (headers included).
fn csv_text(bytes: &[u8], max_bytes: usize) -> Result<String, ExtractError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut out = String::new();
    for record in reader.byte_records() {
        let record = record.map_err(|e| ExtractError::Corrupt(e.to_string()))?;
        let cells: Vec<_> = record.iter().map(String::from_utf8_lossy).collect();
        out.push_str(&cells.join("\t"));
        out.push('\n');
        if out.len() > max_bytes {
            break;
        }
    }
    Ok(out)
}

/// A PDF's text, its pages separated by form feeds (`\u{c}`: ingestion
/// gives each chunk the page it starts on). Stops once the text passed
/// `max_bytes` (a hostile page cannot make more).
fn pdf_text(bytes: &[u8], max_bytes: usize) -> Result<String, ExtractError> {
    if !bytes.starts_with(b"%PDF") {
        return Err(ExtractError::Corrupt("not a PDF".to_string()));
    }
    // An /Encrypt entry in the trailer marks a protected document.
    if contains(bytes, b"/Encrypt") {
        return Err(ExtractError::Encrypted);
    }
    let failed = |e: pdf_extract::OutputError| {
        let message = e.to_string();
        if message.to_ascii_lowercase().contains("encrypt") {
            ExtractError::Encrypted
        } else {
            ExtractError::Corrupt(message)
        }
    };
    let document = pdf_extract::Document::load_mem(bytes)
        .map_err(|e| failed(pdf_extract::OutputError::PdfError(e)))?;
    // `extract_text_from_mem` writes nothing between pages; this writes a
    // form feed at the end of each (the crate's plain-text layout
    // otherwise, in one pass over the page tree).
    let text = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut sink = SharedText(text.clone());
    let mut output = PagedText {
        text: text.clone(),
        max_bytes,
        inner: pdf_extract::PlainTextOutput::new(&mut sink as &mut dyn std::io::Write),
    };
    match pdf_extract::output_doc(&document, &mut output) {
        Ok(()) => {}
        // The budget is spent: the text so far is the document's.
        Err(pdf_extract::OutputError::IoError(e)) if e.kind() == TEXT_BUDGET_SPENT => {}
        Err(e) => return Err(failed(e)),
    }
    drop(output);
    let text = text.take();
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// The error kind [`PagedText`] stops extraction with.
const TEXT_BUDGET_SPENT: std::io::ErrorKind = std::io::ErrorKind::FileTooLarge;

/// The text a PDF's pages are written to.
struct SharedText(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl std::io::Write for SharedText {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// pdf-extract's plain-text output with a form feed after every page,
/// stopping at the first character after the text passed `max_bytes`.
struct PagedText<'a> {
    text: std::rc::Rc<std::cell::RefCell<Vec<u8>>>,
    max_bytes: usize,
    inner: pdf_extract::PlainTextOutput<&'a mut dyn std::io::Write>,
}

impl pdf_extract::OutputDev for PagedText<'_> {
    fn begin_page(
        &mut self,
        page_num: u32,
        media_box: &pdf_extract::MediaBox,
        art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), pdf_extract::OutputError> {
        self.inner.begin_page(page_num, media_box, art_box)
    }
    fn end_page(&mut self) -> Result<(), pdf_extract::OutputError> {
        self.inner.end_page()?;
        self.text.borrow_mut().push(b'\x0c');
        Ok(())
    }
    fn output_character(
        &mut self,
        trm: &pdf_extract::Transform,
        width: f64,
        spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), pdf_extract::OutputError> {
        if self.text.borrow().len() > self.max_bytes {
            return Err(pdf_extract::OutputError::IoError(std::io::Error::new(
                TEXT_BUDGET_SPENT,
                "the text budget is spent",
            )));
        }
        // A form feed in the text itself would shift the page numbers.
        let char = if char.contains('\u{c}') { " " } else { char };
        self.inner
            .output_character(trm, width, spacing, font_size, char)
    }
    fn begin_word(&mut self) -> Result<(), pdf_extract::OutputError> {
        self.inner.begin_word()
    }
    fn end_word(&mut self) -> Result<(), pdf_extract::OutputError> {
        self.inner.end_word()
    }
    fn end_line(&mut self) -> Result<(), pdf_extract::OutputError> {
        self.inner.end_line()
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn open_zip(bytes: &[u8]) -> Result<zip::ZipArchive<Cursor<&[u8]>>, ExtractError> {
    // Office files protected by a password are OLE compound files, not zip.
    if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
        return Err(ExtractError::Encrypted);
    }
    zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| ExtractError::Corrupt(e.to_string()))
}

/// Largest `word/document.xml` read (a zip bomb stops here).
const MAX_DOCX_XML: u64 = 64 * 1024 * 1024;

/// The `w:t` runs of `word/document.xml`, one line per paragraph, tabs and
/// breaks kept.
fn docx_text(bytes: &[u8], max_bytes: usize) -> Result<String, ExtractError> {
    use quick_xml::events::Event;
    let mut archive = open_zip(bytes)?;
    // Streamed from the archive, not inflated whole first.
    let part = archive
        .by_name("word/document.xml")
        .map_err(|_| ExtractError::Corrupt("word/document.xml is missing".to_string()))?
        .take(MAX_DOCX_XML);
    let mut reader = quick_xml::Reader::from_reader(std::io::BufReader::new(part));
    let mut buf = Vec::new();
    let mut out = String::new();
    let mut in_text = false;
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(Event::Start(e)) if e.name().into_inner() == "w:t" => in_text = true,
            Ok(Event::End(e)) => match e.name().into_inner() {
                "w:t" => in_text = false,
                "w:p" => out.push('\n'),
                _ => {}
            },
            Ok(Event::Empty(e)) => match e.name().into_inner() {
                "w:tab" => out.push('\t'),
                "w:br" | "w:cr" => out.push('\n'),
                "w:p" => out.push('\n'),
                _ => {}
            },
            Ok(Event::Text(t)) if in_text => {
                // Entity references arrive as their own events.
                out.push_str(&t.xml10_content());
            }
            Ok(Event::GeneralRef(r)) if in_text => {
                let entity = format!("&{};", r.into_inner());
                out.push_str(
                    &quick_xml::escape::unescape(&entity)
                        .map_err(|e| ExtractError::Corrupt(e.to_string()))?,
                );
            }
            Ok(Event::Eof) => break,
            Err(e) => return Err(ExtractError::Corrupt(e.to_string())),
            _ => {}
        }
        buf.clear();
        if out.len() > max_bytes {
            // One text event may be the whole inflated part: keep no more
            // than the budget of it.
            return Ok(truncate(out, max_bytes));
        }
    }
    Ok(out)
}

/// Most empty columns written out between two used cells of a row; a
/// wider gap is one tab (a sheet may place cells 16,384 columns apart).
const MAX_COLUMN_GAP: u32 = 64;

/// Every sheet as `# Sheet: NAME` followed by its rows as tab-separated
/// lines. Cells are streamed in file order, used cells only: a sheet's
/// declared dimension (`A1:XFD1048576` fits in a 1.5 KB file) is never
/// allocated as a dense range. Reading stops at `max_bytes` of text.
fn xlsx_text(bytes: &[u8], max_bytes: usize) -> Result<String, ExtractError> {
    use calamine::{Data, Reader, Xlsx};
    if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
        return Err(ExtractError::Encrypted);
    }
    let corrupt = |e: calamine::XlsxError| ExtractError::Corrupt(e.to_string());
    let mut workbook: Xlsx<_> = Xlsx::new(Cursor::new(bytes)).map_err(|e| {
        let message = e.to_string();
        if message.to_ascii_lowercase().contains("password") {
            ExtractError::Encrypted
        } else {
            ExtractError::Corrupt(message)
        }
    })?;
    let mut out = String::new();
    for name in workbook.sheet_names() {
        let mut cells = workbook.worksheet_cells_reader(&name).map_err(corrupt)?;
        out.push_str("# Sheet: ");
        out.push_str(&name);
        out.push('\n');
        // The row being written and the column of its last cell.
        let mut at: Option<(u32, u32)> = None;
        while let Some(cell) = cells.next_cell().map_err(corrupt)? {
            let value = Data::from(cell.get_value().clone()).to_string();
            if value.is_empty() {
                continue;
            }
            let (row, column) = cell.get_position();
            match at {
                Some((r, c)) if r == row => {
                    let gap = column.saturating_sub(c).clamp(1, MAX_COLUMN_GAP);
                    out.extend(std::iter::repeat_n('\t', gap as usize));
                }
                Some(_) => out.push('\n'),
                None => {}
            }
            out.push_str(&value);
            at = Some((row, column));
            if out.len() > max_bytes {
                return Ok(out);
            }
        }
        if at.is_some() {
            out.push('\n');
        }
        out.push('\n');
    }
    Ok(out)
}

/// Drops NUL characters (PostgreSQL text cannot hold them) and trailing
/// blank space.
fn normalize(text: &str) -> String {
    text.replace('\0', "").trim_end().to_string()
}

fn truncate(mut text: String, max_bytes: usize) -> String {
    if text.len() > max_bytes {
        let mut end = max_bytes;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Small documents built in code, for tests (here and in the integration
/// tests).
#[doc(hidden)]
pub mod fixtures;

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> Budget {
        Budget {
            max_bytes: 1 << 20,
            timeout: Duration::from_secs(30),
            isolation: Isolation::InProcess,
        }
    }

    #[tokio::test]
    async fn extracts_plain_formats() {
        let text = extract("text/markdown", "# Title\nbody\0".into(), budget())
            .await
            .unwrap();
        assert_eq!(text, "# Title\nbody");
        let text = extract("text/csv", "a,b\n\"x, y\",2\n".into(), budget())
            .await
            .unwrap();
        assert_eq!(text, "a\tb\nx, y\t2");
    }

    #[tokio::test]
    async fn extracts_a_generated_pdf() {
        let pdf = fixtures::pdf("Quokkas live on Rottnest Island");
        let text = extract(PDF, pdf.into(), budget()).await.unwrap();
        assert!(text.contains("Quokkas live on Rottnest Island"), "{text:?}");
    }

    #[test]
    fn a_long_pdf_keeps_every_page_with_page_breaks() {
        let pages = fixtures::book(300);
        let pdf = fixtures::pdf_pages(&pages);
        let started = std::time::Instant::now();
        let text = normalize(&extract_blocking(PDF, &pdf, 10 << 20).unwrap());
        println!(
            "300 pages ({} KiB of PDF, {} KiB of text) extracted in {:?}",
            pdf.len() / 1024,
            text.len() / 1024,
            started.elapsed()
        );
        let extracted: Vec<&str> = text.split('\u{c}').collect();
        assert_eq!(extracted.len(), 300);
        for (n, page) in extracted.iter().enumerate() {
            // Each page has its own marker and no other.
            let marker = fixtures::book_marker(n + 1);
            assert!(page.contains(&marker), "page {}: {page:?}", n + 1);
            assert_eq!(page.matches("folio").count(), 1, "page {}: {page:?}", n + 1);
        }
        // Paragraphs stay paragraphs; words are not run together.
        assert!(extracted[0].contains("\n\n"), "{:?}", extracted[0]);
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(words(extracted[149]), words(&pages[149]));
    }

    #[test]
    fn a_long_pdf_stops_at_the_text_budget() {
        let pdf = fixtures::pdf_pages(&fixtures::book(300));
        let text = extract_blocking(PDF, &pdf, 16 * 1024).unwrap();
        // Stopped within a character of the budget, at the first pages.
        assert!(text.len() <= 16 * 1024 + 8, "{}", text.len());
        assert!(text.contains(&fixtures::book_marker(1)));
        assert!(!text.contains(&fixtures::book_marker(300)));
    }

    #[tokio::test]
    async fn extracts_a_generated_docx() {
        let docx = fixtures::docx(&["First paragraph & more", "Second one"]);
        let text = extract(DOCX, docx.into(), budget()).await.unwrap();
        assert_eq!(text, "First paragraph & more\nSecond one");
    }

    #[tokio::test]
    async fn extracts_a_generated_xlsx() {
        let xlsx = fixtures::xlsx("Prices", &[&["item", "cost"], &["widget", "42"]]);
        let text = extract(XLSX, xlsx.into(), budget()).await.unwrap();
        assert!(text.contains("# Sheet: Prices"), "{text:?}");
        assert!(text.contains("widget\t42"), "{text:?}");
    }

    #[tokio::test]
    async fn a_sheet_declaring_billions_of_cells_reads_only_its_used_cells() {
        // Read as a dense range, this 1.5 KB file allocated 512 GiB and
        // aborted the process.
        let xlsx = fixtures::hostile_xlsx_dimension();
        assert!(xlsx.len() < 4096, "{}", xlsx.len());
        let text = extract(XLSX, xlsx.into(), budget()).await.unwrap();
        assert_eq!(text, "# Sheet: Bomb\ntop left\nbottom right");
    }

    #[test]
    fn wide_gaps_between_cells_are_one_tab_not_thousands() {
        let text = extract_blocking(XLSX, &fixtures::hostile_xlsx_dimension(), 1 << 20).unwrap();
        assert!(!text.contains("\t\t"), "{text:?}");
    }

    #[test]
    fn extractors_stop_at_the_text_budget() {
        // 40 MiB of inflated XML; 64 KiB of text wanted.
        let text = extract_blocking(DOCX, &fixtures::hostile_docx(40), 64 * 1024).unwrap();
        assert!(text.len() < 64 * 1024 + 128 * 1024, "{}", text.len());
        let csv = "a,b\n".repeat(1 << 20);
        let text = extract_blocking("text/csv", csv.as_bytes(), 1024).unwrap();
        assert!(text.len() < 2048, "{}", text.len());
    }

    #[tokio::test]
    async fn corrupt_and_encrypted_files_give_clear_errors() {
        let err = extract(PDF, "%PDF-1.4 garbage".into(), budget())
            .await
            .unwrap_err();
        assert!(matches!(err, ExtractError::Corrupt(_)), "{err:?}");
        let mut encrypted = fixtures::pdf("secret");
        encrypted.extend_from_slice(b"\ntrailer << /Encrypt 9 0 R >>\n");
        let err = extract(PDF, encrypted.into(), budget()).await.unwrap_err();
        assert_eq!(err, ExtractError::Encrypted);
        let err = extract(DOCX, "PK\x03\x04 not a zip".into(), budget())
            .await
            .unwrap_err();
        assert!(matches!(err, ExtractError::Corrupt(_)), "{err:?}");
        let ole = bytes::Bytes::from_static(&[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1]);
        assert_eq!(
            extract(XLSX, ole.clone(), budget()).await.unwrap_err(),
            ExtractError::Encrypted
        );
        assert_eq!(
            extract(DOCX, ole, budget()).await.unwrap_err(),
            ExtractError::Encrypted
        );
        let err = extract("image/png", "x".into(), budget())
            .await
            .unwrap_err();
        assert!(matches!(err, ExtractError::Unsupported(_)));
    }

    #[test]
    fn deep_json_is_read_as_its_values_and_shallow_json_as_it_is() {
        let deep = "{\"a\":[".repeat(50_000) + "\"the lantern room\"" + &"]}".repeat(50_000);
        for content_type in ["text/plain", JSON] {
            let text = extract_blocking(content_type, deep.as_bytes(), 1 << 20).unwrap();
            assert_eq!(text, "a: the lantern room\n", "{content_type}");
        }
        let shallow = "{\"a\": [1, \"two\"]}";
        assert_eq!(
            extract_blocking("text/plain", shallow.as_bytes(), 1 << 20).unwrap(),
            shallow
        );
        assert_eq!(
            extract_blocking("text/plain", b"[1] Introduction", 1 << 20).unwrap(),
            "[1] Introduction"
        );
    }

    #[tokio::test]
    async fn output_is_cut_at_the_byte_budget() {
        let small = Budget {
            max_bytes: 5,
            timeout: Duration::from_secs(5),
            isolation: Isolation::InProcess,
        };
        let text = extract("text/plain", "ééé".into(), small).await.unwrap();
        assert_eq!(text, "éé");
    }
}

#[cfg(test)]
mod sniff_tests {
    /// The generated documents pass the upload's content sniffing.
    #[test]
    fn fixtures_sniff_as_their_types() {
        for (bytes, expected) in [
            (super::fixtures::pdf("x"), super::PDF),
            (super::fixtures::docx(&["x"]), super::DOCX),
            (super::fixtures::xlsx("S", &[&["x"]]), super::XLSX),
            // The hostile ones too: they must reach the parsers to be tested.
            (super::fixtures::hostile_xlsx_dimension(), super::XLSX),
            (super::fixtures::hostile_xlsx_shared_strings(2), super::XLSX),
            (super::fixtures::hostile_pdf_stream(2), super::PDF),
            (super::fixtures::hostile_docx(60), super::DOCX),
        ] {
            assert_eq!(super::sniff::sniff(&bytes, true, "f").unwrap(), expected);
        }
    }
}
