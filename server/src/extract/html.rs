//! Readable text of an HTML page: the main article (`dom_smoothie`, a
//! Readability port) when one is found, else the whole page as text
//! (`html2text`); scripts, styles and navigation dropped. Both parsers
//! build a tree and walk it recursively, and take minutes (and gigabytes)
//! on a crafted page of 100,000 nested elements. So a page is measured
//! first, in one linear pass ([`nesting_depth`]): one nested deeper than
//! [`MAX_TREE_DEPTH`] is read by [`strip_tags`] instead, a single pass
//! with no tree (its text, without the article detection). Pages are
//! parsed like uploads besides: in the extraction worker, under its
//! limits.

/// Deepest page given to the tree-building parsers (Chromium's parser
/// stops nesting at 512 as well).
pub const MAX_TREE_DEPTH: usize = 512;

/// A page's title and readable text.
pub fn html_to_text(html: &str, url: &str) -> (Option<String>, String) {
    if nesting_depth(html) > MAX_TREE_DEPTH {
        let (title, text) = strip_tags(html);
        return (title, squeeze(&text));
    }
    let base = reqwest::Url::parse(url).ok().map(|u| u.to_string());
    let article = dom_smoothie::Readability::new(html, base.as_deref(), None)
        .ok()
        .and_then(|mut r| r.parse().ok());
    let (title, text) = match article {
        Some(a) if a.text_content.trim().len() >= 80 => {
            (Some(a.title.clone()), squeeze(&a.text_content))
        }
        other => {
            let title = other.map(|a| a.title);
            let text = html2text::config::plain()
                .string_from_read(html.as_bytes(), 100)
                .unwrap_or_default();
            (title, squeeze(&text))
        }
    };
    (
        title
            .filter(|t| !t.trim().is_empty())
            .map(|t| t.trim().to_string()),
        text,
    )
}

/// Elements that never have content.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr",
];

/// Elements whose end tag may be left out (a sibling closes them): not
/// counted as nesting.
const IMPLIED_END: &[&str] = &[
    "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "thead", "tbody", "tfoot",
    "colgroup", "rt", "rp", "html", "head", "body",
];

/// Elements whose content is raw text, not markup.
const RAW_TEXT: &[&str] = &["script", "style", "textarea", "title", "xmp", "noscript"];

/// One tag of a page, as the linear scanner sees it.
enum Tag<'a> {
    /// `<name ...>` (`self_closing` for `<name/>`).
    Open {
        name: String,
        self_closing: bool,
    },
    Close {
        name: String,
    },
    /// A comment, doctype or processing instruction.
    Other,
    /// Not a tag: a `<` in text.
    Text(&'a str),
}

/// The tag at `html[at..]` (which starts with `<`) and the index after it.
fn tag(html: &str, at: usize) -> (Tag<'_>, usize) {
    let bytes = html.as_bytes();
    let rest = &html[at..];
    if let Some(comment) = rest.strip_prefix("<!--") {
        let end = comment.find("-->").map_or(html.len(), |e| at + 4 + e + 3);
        return (Tag::Other, end);
    }
    if rest.starts_with("<!") || rest.starts_with("<?") {
        let end = rest.find('>').map_or(html.len(), |e| at + e + 1);
        return (Tag::Other, end);
    }
    let (close, name_at) = match bytes.get(at + 1) {
        Some(b'/') => (true, at + 2),
        _ => (false, at + 1),
    };
    let name_len = bytes[name_at.min(bytes.len())..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-' || **b == b':')
        .count();
    if name_len == 0 || !bytes[name_at].is_ascii_alphabetic() {
        return (Tag::Text(&html[at..at + 1]), at + 1);
    }
    let name = html[name_at..name_at + name_len].to_ascii_lowercase();
    // The end of the tag: the first `>` outside a quoted attribute value.
    let mut i = name_at + name_len;
    let mut quote = None;
    while i < bytes.len() {
        match (quote, bytes[i]) {
            (None, b'>') => break,
            (None, q @ (b'"' | b'\'')) => quote = Some(q),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
        i += 1;
    }
    let self_closing = i > 0 && bytes.get(i - 1) == Some(&b'/');
    let end = (i + 1).min(html.len());
    if close {
        (Tag::Close { name }, end)
    } else {
        (Tag::Open { name, self_closing }, end)
    }
}

/// Where the raw text of a `name` element opened before `from` ends: the
/// index of its end tag (or the end of the page).
fn raw_text_end(html: &str, from: usize, name: &str) -> usize {
    let lower_end = format!("</{name}");
    let bytes = html.as_bytes();
    let mut i = from;
    while let Some(found) = html[i..].find("</") {
        let at = i + found;
        if bytes.len() >= at + lower_end.len()
            && bytes[at..at + lower_end.len()].eq_ignore_ascii_case(lower_end.as_bytes())
        {
            return at;
        }
        i = at + 2;
    }
    html.len()
}

/// The deepest nesting of elements in `html`, estimated in one linear pass
/// without building a tree: open tags count, end tags uncount (down to 0),
/// void elements and those whose end tag may be left out do not count.
pub fn nesting_depth(html: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut i = 0;
    while let Some(found) = html[i..].find('<') {
        let (tag, next) = tag(html, i + found);
        i = next;
        match tag {
            Tag::Open { name, self_closing } => {
                if RAW_TEXT.contains(&name.as_str()) && !self_closing {
                    i = raw_text_end(html, i, &name);
                } else if !self_closing
                    && !VOID.contains(&name.as_str())
                    && !IMPLIED_END.contains(&name.as_str())
                {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
            }
            Tag::Close { name } => {
                if !VOID.contains(&name.as_str()) && !IMPLIED_END.contains(&name.as_str()) {
                    depth = depth.saturating_sub(1);
                }
            }
            Tag::Other | Tag::Text(_) => {}
        }
    }
    deepest
}

/// Elements that end a line of text.
const BLOCK: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "tr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "article",
    "header",
    "footer",
    "blockquote",
    "pre",
    "table",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "hr",
];

/// A page's title and text in one pass without a tree: tags dropped (block
/// elements end lines), scripts and styles skipped, the common character
/// references decoded. Linear in the page whatever its nesting.
pub fn strip_tags(html: &str) -> (Option<String>, String) {
    let mut out = String::with_capacity(html.len() / 2);
    let mut title = None;
    let mut i = 0;
    while let Some(found) = html[i..].find('<') {
        decode_into(&mut out, &html[i..i + found]);
        let (tag, next) = tag(html, i + found);
        i = next;
        match tag {
            Tag::Open { name, self_closing } => {
                if RAW_TEXT.contains(&name.as_str()) && !self_closing {
                    let end = raw_text_end(html, i, &name);
                    if name == "title" && title.is_none() {
                        let mut t = String::new();
                        decode_into(&mut t, &html[i..end]);
                        title = Some(t.trim().to_string()).filter(|t| !t.is_empty());
                    } else if name == "textarea" {
                        decode_into(&mut out, &html[i..end]);
                    }
                    i = end;
                } else if BLOCK.contains(&name.as_str()) {
                    out.push('\n');
                }
            }
            Tag::Close { name } if BLOCK.contains(&name.as_str()) => out.push('\n'),
            Tag::Text(t) => out.push_str(t),
            Tag::Close { .. } | Tag::Other => {}
        }
    }
    decode_into(&mut out, &html[i..]);
    (title, out)
}

/// Appends `text` with its common character references decoded.
fn decode_into(out: &mut String, text: &str) {
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest.as_bytes()[..rest.len().min(12)]
            .iter()
            .position(|b| *b == b';');
        let decoded = end.and_then(|end| {
            let entity = &rest[1..end];
            let c = match entity {
                "amp" => '&',
                "lt" => '<',
                "gt" => '>',
                "quot" => '"',
                "apos" => '\'',
                "nbsp" => ' ',
                _ => {
                    let n = entity.strip_prefix('#')?;
                    let code = match n.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => n.parse().ok()?,
                    };
                    char::from_u32(code).unwrap_or('\u{fffd}')
                }
            };
            Some((c, end + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
}

/// Trims lines and collapses runs of blank lines.
fn squeeze(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn articles_keep_their_text_and_drop_the_rest() {
        let html = r#"<html><head><title>Lamps of the coast</title>
            <script>var tracking = "SECRET-SCRIPT";</script><style>.x{color:red}</style></head>
            <body><nav><a href="/">Home</a> <a href="/about">About us</a></nav>
            <article><h1>Lamps of the coast</h1>
            <p>The lighthouse on Carrow Point was built in 1868. Its keeper climbs the stairs
            every evening to light the lamp, so that ships find the harbour in fog.</p>
            <p>In 1921 the oil lamp was replaced by an electric one, and the keeper's cottage
            became a small museum about the history of the coast.</p></article>
            <footer>Copyright</footer></body></html>"#;
        let (title, text) = html_to_text(html, "http://example.com/lamps");
        assert_eq!(title.as_deref(), Some("Lamps of the coast"));
        assert!(text.contains("built in 1868"), "{text}");
        assert!(text.contains("small museum"), "{text}");
        assert!(!text.contains("SECRET-SCRIPT"), "{text}");
        assert!(!text.contains("color:red"), "{text}");
    }

    #[test]
    fn deep_pages_are_read_without_a_tree() {
        let depth = 100_000;
        let page = "<html><head><title>Deep &amp; dark</title></head><body>".to_string()
            + &"<div><span>".repeat(depth)
            + "at the bottom"
            + &"</span></div>".repeat(depth)
            + "<script>hidden()</script><p>after</body></html>";
        assert_eq!(nesting_depth(&page), 2 * depth);
        let started = std::time::Instant::now();
        let (title, text) = html_to_text(&page, "http://example.com/");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(title.as_deref(), Some("Deep & dark"));
        assert_eq!(text, "at the bottom\n\nafter");
        // Ordinary pages stay shallow: paragraphs and items close
        // themselves, void elements and raw text do not nest.
        let ordinary = "<ul>".to_string()
            + &"<li><p>item <br><img src='a>b'> x &lt; y".repeat(5000)
            + "</ul><script>if (a < b) { '<div>' }</script>";
        assert_eq!(nesting_depth(&ordinary), 1);
        assert_eq!(
            strip_tags("a &#233;&#x41;&bogus; &amp<b>b</b>").1,
            "a éA&bogus; &ampb"
        );
    }

    #[test]
    fn short_pages_fall_back_to_their_whole_text() {
        let (_, text) = html_to_text(
            "<html><body><p>Opening hours: 9 to 5.</p><script>x()</script></body></html>",
            "http://example.com/",
        );
        assert!(text.contains("Opening hours: 9 to 5."), "{text}");
        assert!(!text.contains("x()"), "{text}");
    }
}
