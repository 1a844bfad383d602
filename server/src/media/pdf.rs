//! The page count of a PDF sent to a vision-capable model.
//!
//! Providers bound and bill PDFs by their pages (Anthropic documents 100
//! pages a request and counts each page as text plus an image; OpenAI's
//! file inputs are read page by page), so a PDF's pages are counted before
//! it is sent. The count comes from walking the page tree with `lopdf`, not
//! from the root's `/Count` (a number anyone can write: two billion in a
//! one-kilobyte file). What is bounded:
//! - only the given bytes are parsed, and `lopdf`'s nesting limit bounds
//!   its recursion;
//! - the walk visits each object at most once and keeps its own stack: a
//!   `/Kids` that refers back to an ancestor (a cycle) makes the file
//!   unreadable instead of looping, and a deep tree cannot overflow the
//!   thread's stack; `/Count` is never read, so never allocated for;
//! - the object streams `lopdf` inflates while loading are inflated first
//!   into nothing, counting (through `lopdf`'s load filter, so the
//!   dictionary is read by `lopdf` itself), and a file whose object
//!   streams inflate past [`MAX_INFLATED_BYTES`] is refused: a deflate
//!   bomb there would otherwise be allocated whole;
//! - encrypted files are refused before loading (providers do not read
//!   them: Anthropic's documentation asks for PDFs without passwords or
//!   encryption; and `lopdf`'s decryption is not run on hostile input).
//!
//! What is not: `lopdf` reads cross-reference streams (PDF 1.5) before any
//! hook runs, inflating them whole and allocating the field widths their
//! `/W` declares. A hostile file can make that allocation fail, which
//! aborts the process. For uploads from untrusted users, run this where
//! the text of PDFs is extracted (`extract::worker`, a memory-limited
//! process that parses with the same `lopdf`), or accept that risk.

use lopdf::{Document, LoadOptions, Object, ObjectId};
use std::cell::Cell;
use std::collections::HashSet;
use std::io::Read;

/// Most bytes the object streams of one file may inflate to. Real files
/// need a few megabytes at most (their objects without page contents); a
/// bomb needs gigabytes.
pub const MAX_INFLATED_BYTES: u64 = 64 << 20;

/// How far from the start the `%PDF-` header may be (readers accept some
/// bytes before it, as Acrobat does).
const HEADER_WINDOW: usize = 1024;

/// Why a PDF's pages cannot be counted.
#[derive(Debug, thiserror::Error)]
pub enum PdfError {
    /// No `%PDF-` header near the start.
    #[error("not a pdf")]
    NotPdf,
    /// Damaged, truncated, or past a bound; the reason is for the logs.
    #[error("unreadable pdf: {0}")]
    Unreadable(String),
    /// Encrypted (with or without a user password).
    #[error("encrypted pdf")]
    Encrypted,
}

impl PdfError {
    /// The stable error code clients match on.
    pub fn code(&self) -> &'static str {
        match self {
            PdfError::NotPdf | PdfError::Unreadable(_) => "pdf_unreadable",
            PdfError::Encrypted => "pdf_encrypted",
        }
    }

    /// A sentence for the person who sent the file.
    pub fn message(&self) -> String {
        match self {
            PdfError::NotPdf => "this file is not a pdf".to_string(),
            PdfError::Unreadable(_) => {
                "the pdf could not be read: the file is damaged or incomplete".to_string()
            }
            PdfError::Encrypted => {
                "the pdf is encrypted: send a copy without a password or encryption".to_string()
            }
        }
    }
}

/// The page count of a PDF, read from its page tree with `lopdf`, bounded
/// as the module's documentation says (no more than the given bytes
/// parsed, object streams' inflation capped, each page-tree node visited
/// at most once, `/Count` never trusted). Synchronous: callers run it in
/// `spawn_blocking`.
pub fn pdf_pages(bytes: &[u8]) -> Result<u32, PdfError> {
    pages_within(bytes, MAX_INFLATED_BYTES)
}

/// [`pdf_pages`] with `budget` bytes for the object streams' inflation.
fn pages_within(bytes: &[u8], budget: u64) -> Result<u32, PdfError> {
    let header = &bytes[..bytes.len().min(HEADER_WINDOW)];
    if !header.windows(5).any(|w| w == b"%PDF-") {
        return Err(PdfError::NotPdf);
    }
    if has_name(bytes, b"/Encrypt") {
        return Err(PdfError::Encrypted);
    }
    INFLATION.set(Some(Inflation {
        budget,
        refused: None,
    }));
    let options = LoadOptions::with_filter(bound_object_streams);
    // A parser bug met by a hostile file is an unreadable file.
    let loaded = std::panic::catch_unwind(|| Document::load_mem_with_options(bytes, options));
    let inflation = INFLATION.take();
    if let Some(why) = inflation.and_then(|i| i.refused) {
        return Err(PdfError::Unreadable(why.to_string()));
    }
    let document = loaded
        .map_err(|_| PdfError::Unreadable("the parser panicked".into()))?
        .map_err(|e| PdfError::Unreadable(e.to_string()))?;
    if document.is_encrypted() {
        return Err(PdfError::Encrypted);
    }
    count_pages(&document)
}

/// Whether the name `name` (`/Encrypt`) occurs as a whole name (not the
/// start of a longer one).
fn has_name(bytes: &[u8], name: &[u8]) -> bool {
    bytes
        .windows(name.len())
        .enumerate()
        .any(|(at, w)| w == name && bytes.get(at + name.len()).is_none_or(|&b| !is_regular(b)))
}

/// A byte that continues a name (PDF's "regular characters": neither
/// white space nor a delimiter).
fn is_regular(b: u8) -> bool {
    !b.is_ascii_whitespace() && !b"()<>[]{}/%\0".contains(&b)
}

/// What is left of one load's inflation budget, and why it refused, if it
/// did. Per thread: `lopdf` calls its load filter on the loading thread
/// (built without its `rayon` feature); were it called elsewhere, it finds
/// no budget and caps each stream at [`MAX_INFLATED_BYTES`] alone.
#[derive(Clone, Copy)]
struct Inflation {
    budget: u64,
    refused: Option<&'static str>,
}

thread_local! {
    static INFLATION: Cell<Option<Inflation>> = const { Cell::new(None) };
}

/// `lopdf`'s load filter: lets every object through, except an object
/// stream past the budget (or with filters whose output size cannot be
/// checked), which is dropped and recorded, so that `lopdf` never
/// inflates it.
fn bound_object_streams(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    let Object::Stream(stream) = object else {
        // Objects read out of an object stream are kept through this
        // return value (those at the top level, through `object`).
        return Some((id, object.clone()));
    };
    if !stream.dict.has_type(b"ObjStm") {
        // At the top level: `lopdf` keeps `object` and ignores this.
        return Some((id, Object::Null));
    }
    let size = match stream.filters() {
        Err(_) => Some(stream.content.len() as u64),
        Ok(filters) if filters == [&b"FlateDecode"[..]] => {
            Some(inflated_size(&stream.content, MAX_INFLATED_BYTES))
        }
        Ok(_) => None,
    };
    let mut state = INFLATION.get();
    let verdict = match (size, &mut state) {
        (None, _) => Err("an object stream uses filters whose size cannot be checked"),
        (Some(size), Some(inflation)) if size <= inflation.budget => {
            inflation.budget -= size;
            Ok(())
        }
        (Some(size), None) if size <= MAX_INFLATED_BYTES => Ok(()),
        (Some(_), _) => Err("its object streams inflate past the limit"),
    };
    match verdict {
        Ok(()) => Some((id, Object::Null)),
        Err(why) => {
            if let Some(inflation) = &mut state {
                inflation.refused.get_or_insert(why);
                INFLATION.set(state);
            }
            None
        }
    }
}

/// Bytes a FlateDecode stream inflates to, counted up to one past `limit`
/// without keeping them: with zlib framing, then as raw deflate after the
/// two header bytes when that gives nothing (as `lopdf` does).
fn inflated_size(data: &[u8], limit: u64) -> u64 {
    let count = |decoder: &mut dyn Read| {
        let mut counter = Counter(0);
        let _ = std::io::copy(&mut decoder.take(limit + 1), &mut counter);
        counter.0
    };
    let zlib = count(&mut flate2::read::ZlibDecoder::new(data));
    if zlib == 0 && data.len() > 2 {
        return count(&mut flate2::read::DeflateDecoder::new(&data[2..]));
    }
    zlib
}

/// A writer that only counts.
struct Counter(u64);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Counts the leaves of the page tree from the catalog's `/Pages`. Each
/// referenced node is visited once (a second visit means a cycle or a
/// shared node, which a tree has not); the walk keeps its own stack, so a
/// deep tree cannot overflow the thread's.
fn count_pages(document: &Document) -> Result<u32, PdfError> {
    let unreadable = |why: &str| PdfError::Unreadable(why.to_string());
    let root = document
        .catalog()
        .map_err(|_| unreadable("no document catalog"))?
        .get(b"Pages")
        .map_err(|_| unreadable("the catalog has no page tree"))?;
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut stack: Vec<&Object> = vec![root];
    let mut pages: u32 = 0;
    while let Some(mut node) = stack.pop() {
        if let Object::Reference(id) = node {
            if !seen.insert(*id) {
                return Err(unreadable("a page-tree node is reached twice (a cycle)"));
            }
            node = document
                .get_object(*id)
                .map_err(|_| unreadable("the page tree refers to a missing object"))?;
        }
        let Ok(dict) = node.as_dict() else {
            return Err(unreadable("a page-tree node is not a dictionary"));
        };
        let kind = dict.get(b"Type").and_then(Object::as_name).ok();
        // A node without `/Type` is an intermediate node when it has kids
        // (readers are as lenient).
        let kids = dict.get(b"Kids").ok();
        match (kind, kids) {
            (Some(b"Page"), _) | (None, None) => {
                pages = pages
                    .checked_add(1)
                    .ok_or_else(|| unreadable("too many pages"))?;
            }
            (_, Some(kids)) => {
                let kids = match kids {
                    Object::Reference(id) => document
                        .get_object(*id)
                        .map_err(|_| unreadable("the page tree refers to a missing object"))?,
                    direct => direct,
                };
                let kids = kids
                    .as_array()
                    .map_err(|_| unreadable("a page-tree node's kids are not a list"))?;
                // Reversed: the stack pops them in document order.
                stack.extend(kids.iter().rev());
            }
            (Some(_), None) => return Err(unreadable("a page-tree node has no kids")),
        }
    }
    if pages == 0 {
        return Err(unreadable("the document has no pages"));
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lopdf::dictionary;
    use std::io::Write;
    use std::time::{Duration, Instant};

    /// A PDF of `pages` pages made by `lopdf`, as a tree of nodes of at
    /// most `fanout` kids; `modern` writes object and cross-reference
    /// streams (PDF 1.5) instead of a classic table.
    fn pdf_with_pages(pages: u32, fanout: usize, modern: bool) -> Vec<u8> {
        let mut doc = Document::with_version("1.5");
        let root_id = doc.new_object_id();
        let mut level: Vec<ObjectId> = (0..pages)
            .map(|_| {
                doc.add_object(dictionary! {
                    "Type" => "Page",
                    "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
                })
            })
            .collect();
        // Intermediate nodes until one remains.
        while level.len() > fanout {
            level = level
                .chunks(fanout)
                .map(|kids| {
                    doc.add_object(dictionary! {
                        "Type" => "Pages",
                        "Kids" => kids.iter().map(|&k| Object::Reference(k)).collect::<Vec<_>>(),
                        "Count" => kids.len() as i64,
                    })
                })
                .collect();
        }
        doc.objects.insert(
            root_id,
            Object::Dictionary(dictionary! {
                "Type" => "Pages",
                "Kids" => level.iter().map(|&k| Object::Reference(k)).collect::<Vec<_>>(),
                "Count" => i64::from(pages),
            }),
        );
        let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => root_id });
        doc.trailer.set("Root", catalog);
        let mut out = Vec::new();
        if modern {
            doc.save_modern(&mut out).expect("writing a PDF");
        } else {
            doc.save_to(&mut out).expect("writing a PDF");
        }
        out
    }

    /// A classic PDF of the given objects (numbered from 1), with its
    /// cross-reference table and `trailer_extra` in the trailer.
    fn pdf_of_objects(objects: &[&[u8]], trailer_extra: &str) -> Vec<u8> {
        let mut out = b"%PDF-1.7\n".to_vec();
        let mut offsets = Vec::new();
        for (i, object) in objects.iter().enumerate() {
            offsets.push(out.len());
            writeln!(out, "{} 0 obj", i + 1).unwrap();
            out.extend_from_slice(object);
            out.extend_from_slice(b"\nendobj\n");
        }
        let xref = out.len();
        write!(out, "xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).unwrap();
        for offset in offsets {
            writeln!(out, "{offset:010} 00000 n ").unwrap();
        }
        write!(
            out,
            "trailer\n<< /Size {} /Root 1 0 R {trailer_extra} >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .unwrap();
        out
    }

    #[test]
    fn pages_are_counted_from_the_tree() {
        assert_eq!(pdf_pages(&pdf_with_pages(1, 10, false)).unwrap(), 1);
        assert_eq!(pdf_pages(&pdf_with_pages(3, 10, false)).unwrap(), 3);
        // Nested nodes, object streams and a cross-reference stream.
        let modern = pdf_with_pages(137, 4, true);
        assert!(
            modern.windows(7).any(|w| w == b"/ObjStm"),
            "object streams written"
        );
        assert_eq!(pdf_pages(&modern).unwrap(), 137);
        // A hand-written file, with bytes before its header.
        let mut file = b"junk before the header\n".to_vec();
        file.extend(pdf_of_objects(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
                b"<< /Type /Page /Parent 2 0 R >>",
                b"<< /Type /Page /Parent 2 0 R >>",
            ],
            "",
        ));
        assert_eq!(pdf_pages(&file).unwrap(), 2);
    }

    #[test]
    fn garbage_is_unreadable() {
        for garbage in [
            &b""[..],
            b"hello, world",
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
            b"%PDF-1.7\n%\xE2\xE3\xCF\xD3\n1 0 obj << /Type /Cat",
        ] {
            let error = pdf_pages(garbage).expect_err("refused");
            assert_eq!(error.code(), "pdf_unreadable", "{error:?}");
        }
        assert_eq!(
            pdf_pages(b"hello").unwrap_err().message(),
            "this file is not a pdf"
        );
        // A truncated real file.
        let file = pdf_with_pages(5, 10, false);
        let error = pdf_pages(&file[..file.len() / 2]).expect_err("refused");
        assert_eq!(error.code(), "pdf_unreadable", "{error:?}");
        assert_eq!(
            error.message(),
            "the pdf could not be read: the file is damaged or incomplete"
        );
    }

    #[test]
    fn a_cyclic_page_tree_with_an_absurd_count_ends_quickly() {
        let started = Instant::now();
        // The root lists itself among its kids and claims 2^31-1 pages.
        let file = pdf_of_objects(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R 2 0 R] /Count 2147483647 >>",
                b"<< /Type /Page /Parent 2 0 R >>",
            ],
            "",
        );
        let error = pdf_pages(&file).expect_err("refused");
        assert_eq!(error.code(), "pdf_unreadable");
        // A cycle lower down (a node whose kid is its parent), and a huge
        // count over a real single page: the count is not believed.
        let file = pdf_of_objects(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R] /Count 99999999999 >>",
                b"<< /Type /Pages /Kids [2 0 R] /Count 99999999999 >>",
            ],
            "",
        );
        assert_eq!(pdf_pages(&file).unwrap_err().code(), "pdf_unreadable");
        let file = pdf_of_objects(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R] /Count 2147483647 >>",
                b"<< /Type /Page /Parent 2 0 R >>",
            ],
            "",
        );
        assert_eq!(pdf_pages(&file).unwrap(), 1);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn encrypted_files_are_refused() {
        let file = pdf_of_objects(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                b"<< /Type /Page /Parent 2 0 R >>",
                b"<< /Filter /Standard /V 2 /R 3 /Length 128 /P -44 \
                   /O (0123456789abcdef0123456789abcdef) /U (0123456789abcdef0123456789abcdef) >>",
            ],
            "/Encrypt 4 0 R /ID [<00112233445566778899aabbccddeeff> <00112233445566778899aabbccddeeff>]",
        );
        let error = pdf_pages(&file).expect_err("refused");
        assert_eq!(error.code(), "pdf_encrypted");
        assert_eq!(
            error.message(),
            "the pdf is encrypted: send a copy without a password or encryption"
        );
        // A longer name that starts the same is not encryption.
        let file = pdf_of_objects(
            &[
                b"<< /Type /Catalog /Pages 2 0 R /EncryptedPayloadNote true >>",
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                b"<< /Type /Page /Parent 2 0 R >>",
            ],
            "",
        );
        assert_eq!(pdf_pages(&file).unwrap(), 1);
    }

    /// An object stream that inflates to `mib` MiB of spaces.
    fn object_stream_bomb(mib: usize, filter: &str) -> Vec<u8> {
        let mut deflate = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        let block = vec![b' '; 1 << 20];
        for _ in 0..mib {
            deflate.write_all(&block).unwrap();
        }
        let data = deflate.finish().unwrap();
        let mut stream = format!(
            "<< /Type /ObjStm /N 1 /First 4 /Length {} /Filter {filter} >>\nstream\n",
            data.len()
        )
        .into_bytes();
        stream.extend_from_slice(&data);
        stream.extend_from_slice(b"\nendstream");
        pdf_of_objects(
            &[
                b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                b"<< /Type /Page /Parent 2 0 R >>",
                &stream,
            ],
            "",
        )
    }

    #[test]
    fn object_streams_that_inflate_past_the_budget_are_never_inflated() {
        let bomb = object_stream_bomb(3, "/FlateDecode");
        assert!(bomb.len() < 64 << 10, "{} bytes", bomb.len());
        let error = pages_within(&bomb, 2 << 20).expect_err("refused");
        assert_eq!(error.code(), "pdf_unreadable");
        assert_eq!(
            error.to_string(),
            "unreadable pdf: its object streams inflate past the limit"
        );
        // Within the budget it is loaded (and, holding no object, changes
        // nothing).
        assert_eq!(pages_within(&bomb, 4 << 20).unwrap(), 1);
        // The budget is the file's, not the thread's: the next file has
        // its own.
        assert_eq!(pages_within(&bomb, 4 << 20).unwrap(), 1);
        // Two stages of deflate, or a filter whose output is not checked.
        for filter in ["[/FlateDecode /FlateDecode]", "/LZWDecode"] {
            let file = object_stream_bomb(0, filter);
            let error = pdf_pages(&file).expect_err("refused");
            assert_eq!(error.code(), "pdf_unreadable", "{filter}");
        }
    }
}
