//! Minimal but valid PDF, DOCX and XLSX documents, generated so tests need
//! no binary files.

use std::io::Write;

/// A one-page PDF (Helvetica) showing `text` on one line.
pub fn pdf(text: &str) -> Vec<u8> {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('(', "\\(")
        .replace(')', "\\)");
    let content = format!("BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
         /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>"
            .to_string(),
        format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica \
         /Encoding /WinAnsiEncoding >>"
            .to_string(),
    ];
    pdf_of_objects(&objects.map(String::into_bytes))
}

/// A PDF of one page per string (Helvetica, 11 points on 14): each page's
/// paragraphs (separated by blank lines) wrapped at about 90 characters,
/// a blank line between paragraphs. Pages share one font object; every
/// page has its own content stream, as in a real long document.
pub fn pdf_pages(pages: &[String]) -> Vec<u8> {
    let n = pages.len();
    // Objects: 1 catalog, 2 page tree, 3 font, then a page and its
    // content stream per page (4 + 2i and 5 + 2i).
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")).into_bytes(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica \
          /Encoding /WinAnsiEncoding >>"
            .to_vec(),
    ];
    for (i, page) in pages.iter().enumerate() {
        let mut content = String::from("BT /F1 11 Tf 14 TL 72 740 Td");
        for (p, paragraph) in page.split("\n\n").enumerate() {
            if p > 0 {
                content.push_str(" T*");
            }
            for line in wrap(paragraph, 90) {
                let escaped = line
                    .replace('\\', "\\\\")
                    .replace('(', "\\(")
                    .replace(')', "\\)");
                content.push_str(&format!(" ({escaped}) Tj T*"));
            }
        }
        content.push_str(" ET");
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
                 /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
                5 + 2 * i
            )
            .into_bytes(),
        );
        objects.push(
            format!(
                "<< /Length {} >>\nstream\n{content}\nendstream",
                content.len()
            )
            .into_bytes(),
        );
    }
    pdf_of_objects(&objects)
}

/// The text of a book of `pages` pages, for [`pdf_pages`]: three
/// paragraphs of about 80 words a page (about 1.6 KB of text), the first
/// starting with the page's [`book_marker`], varied enough that pages do
/// not repeat one another.
pub fn book(pages: usize) -> Vec<String> {
    const WORDS: &[&str] = &[
        "harbour", "lantern", "granite", "orchard", "ledger", "copper", "meadow", "signal",
        "timber", "river", "compass", "archive", "window", "garden", "pigment", "quarry", "thread",
        "furnace", "canal", "beacon", "saddle", "pepper", "glacier", "cellar", "marble", "violin",
        "harvest", "bridge", "kettle", "market", "falcon", "chapel",
    ];
    const LINKS: &[&str] = &[
        "beside the",
        "under a",
        "near the old",
        "after the",
        "with a",
        "behind the",
        "across the",
        "before a",
    ];
    (1..=pages)
        .map(|page| {
            let mut seed = (page as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut next = move |n: usize| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % n as u64) as usize
            };
            let paragraphs: Vec<String> = (0..3)
                .map(|p| {
                    let mut sentences = Vec::new();
                    if p == 0 {
                        sentences.push(format!(
                            "This page records entry {} of the survey.",
                            book_marker(page)
                        ));
                    }
                    while sentences.iter().map(|s: &String| s.len()).sum::<usize>() < 480 {
                        sentences.push(format!(
                            "The {} stood {} {} while the {} kept its {}.",
                            WORDS[next(WORDS.len())],
                            LINKS[next(LINKS.len())],
                            WORDS[next(WORDS.len())],
                            WORDS[next(WORDS.len())],
                            WORDS[next(WORDS.len())],
                        ));
                    }
                    sentences.join(" ")
                })
                .collect();
            paragraphs.join("\n\n")
        })
        .collect()
}

/// The word only page `page` (from 1) of [`book`] contains.
pub fn book_marker(page: usize) -> String {
    format!("folio{page:03}")
}

/// `text`'s words in lines of at most about `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A PDF of these numbered objects (1 the catalog), with its cross-reference
/// table and trailer.
fn pdf_of_objects(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n", objects.len() + 1).as_bytes());
    out.extend_from_slice(b"0000000000 65535 f \n");
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn zip_of(files: &[(&str, String)]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, body) in files {
        writer.start_file(*name, options).expect("zip entry");
        writer.write_all(body.as_bytes()).expect("zip write");
    }
    writer.finish().expect("zip finish").into_inner()
}

/// A DOCX with one paragraph per string.
pub fn docx(paragraphs: &[&str]) -> Vec<u8> {
    let body: String = paragraphs
        .iter()
        .map(|p| {
            format!(
                "<w:p><w:r><w:t xml:space=\"preserve\">{}</w:t></w:r></w:p>",
                xml_escape(p)
            )
        })
        .collect();
    zip_of(&[
        (
            "[Content_Types].xml",
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#
                .to_string(),
        ),
        (
            "_rels/.rels",
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#
                .to_string(),
        ),
        (
            "word/document.xml",
            format!(
                r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>"#
            ),
        ),
        // Sniffers (like Office itself) expect more than three parts.
        (
            "word/_rels/document.xml.rels",
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"></Relationships>"#
                .to_string(),
        ),
    ])
}

/// An XLSX with one sheet of inline-string cells.
pub fn xlsx(sheet: &str, rows: &[&[&str]]) -> Vec<u8> {
    let mut data = String::new();
    for (r, row) in rows.iter().enumerate() {
        data.push_str(&format!("<row r=\"{}\">", r + 1));
        for (c, cell) in row.iter().enumerate() {
            let col = (b'A' + c as u8) as char;
            data.push_str(&format!(
                "<c r=\"{col}{}\" t=\"inlineStr\"><is><t>{}</t></is></c>",
                r + 1,
                xml_escape(cell)
            ));
        }
        data.push_str("</row>");
    }
    xlsx_of_sheet(sheet, &format!("<sheetData>{data}</sheetData>"), None)
}

/// An XLSX whose one sheet's XML (inside `<worksheet>`) is `sheet_xml`,
/// with an optional `xl/sharedStrings.xml` part written by `shared`
/// (streamed into the archive, so a fixture can inflate to far more than
/// it is).
/// Writes a part of an archive being built.
type PartWriter<'a> = &'a dyn Fn(&mut dyn Write);

fn xlsx_of_sheet(sheet: &str, sheet_xml: &str, shared: Option<PartWriter>) -> Vec<u8> {
    let shared_type = if shared.is_some() {
        r#"<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>"#
    } else {
        ""
    };
    let shared_rel = if shared.is_some() {
        r#"<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/>"#
    } else {
        ""
    };
    let files = [
        (
            "[Content_Types].xml",
            format!(
                r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>{shared_type}</Types>"#
            ),
        ),
        (
            "_rels/.rels",
            r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#
                .to_string(),
        ),
        (
            "xl/workbook.xml",
            format!(
                r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="{}" sheetId="1" r:id="rId1"/></sheets></workbook>"#,
                xml_escape(sheet)
            ),
        ),
        (
            "xl/_rels/workbook.xml.rels",
            format!(
                r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/>{shared_rel}</Relationships>"#
            ),
        ),
        (
            "xl/worksheets/sheet1.xml",
            format!(
                r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">{sheet_xml}</worksheet>"#
            ),
        ),
    ];
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, body) in &files {
        writer.start_file(*name, options).expect("zip entry");
        writer.write_all(body.as_bytes()).expect("zip write");
    }
    if let Some(shared) = shared {
        writer
            .start_file("xl/sharedStrings.xml", options)
            .expect("zip entry");
        shared(&mut writer);
    }
    writer.finish().expect("zip finish").into_inner()
}

// ---- hostile files: small on disk, ruinous when parsed naively ----

/// The spreadsheet that aborted the server: 1.5 KB, a declared dimension
/// of `A1:XFD1048576` (17 billion cells) and two used cells at its corners.
/// A dense read allocates rows × columns; a streamed one reads two cells.
pub fn hostile_xlsx_dimension() -> Vec<u8> {
    xlsx_of_sheet(
        "Bomb",
        r#"<dimension ref="A1:XFD1048576"/><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>top left</t></is></c></row><row r="1048576"><c r="XFD1048576" t="inlineStr"><is><t>bottom right</t></is></c></row></sheetData>"#,
        None,
    )
}

/// A spreadsheet whose shared strings inflate to `mib` MiB of text (a
/// deflate bomb: about a thousandth of that on disk), all read into memory
/// by the parser before the first cell.
pub fn hostile_xlsx_shared_strings(mib: usize) -> Vec<u8> {
    let write = move |w: &mut dyn Write| {
        w.write_all(br#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="1" uniqueCount="1"><si><t>"#)
            .expect("zip write");
        let block = vec![b'a'; 1 << 20];
        for _ in 0..mib {
            w.write_all(&block).expect("zip write");
        }
        w.write_all(b"</t></si></sst>").expect("zip write");
    };
    xlsx_of_sheet(
        "Strings",
        r#"<sheetData><row r="1"><c r="A1" t="s"><v>0</v></c></row></sheetData>"#,
        Some(&write),
    )
}

/// A PDF whose one page's content stream (FlateDecode) inflates to `mib`
/// MiB of spaces.
pub fn hostile_pdf_stream(mib: usize) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder
        .write_all(b"BT /F1 12 Tf 72 720 Td (deflated) Tj ET\n")
        .expect("deflate");
    let block = vec![b' '; 1 << 20];
    for _ in 0..mib {
        encoder.write_all(&block).expect("deflate");
    }
    let stream = encoder.finish().expect("deflate");
    let mut content = format!(
        "<< /Length {} /Filter /FlateDecode >>\nstream\n",
        stream.len()
    )
    .into_bytes();
    content.extend_from_slice(&stream);
    content.extend_from_slice(b"\nendstream");
    let objects: [Vec<u8>; 5] = [
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
          /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>"
            .to_vec(),
        content,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec(),
    ];
    pdf_of_objects(&objects)
}

/// A DOCX whose `word/document.xml` inflates to `mib` MiB: one run of
/// text, then the rest of the XML.
pub fn hostile_docx(mib: usize) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let small = docx(&["x"]);
    let mut template = zip::ZipArchive::new(std::io::Cursor::new(small)).expect("docx");
    // The large part goes last: type sniffers read the first entries.
    let mut order: Vec<usize> = (0..template.len()).collect();
    order.sort_by_key(|&i| {
        template
            .by_index(i)
            .is_ok_and(|e| e.name().is_ok_and(|n| n == "word/document.xml"))
    });
    for i in order {
        let mut entry = template.by_index(i).expect("entry");
        let name = entry.name().expect("entry name").to_string();
        writer
            .start_file(name.as_str(), options)
            .expect("zip entry");
        if name == "word/document.xml" {
            writer
                .write_all(br#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>"#)
                .expect("zip write");
            let block = vec![b'a'; 1 << 20];
            for _ in 0..mib {
                writer.write_all(&block).expect("zip write");
            }
            writer
                .write_all(b"</w:t></w:r></w:p></w:body></w:document>")
                .expect("zip write");
        } else {
            std::io::copy(&mut entry, &mut writer).expect("zip copy");
        }
    }
    writer.finish().expect("zip finish").into_inner()
}
