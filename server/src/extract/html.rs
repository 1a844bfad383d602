//! Readable text of an HTML page: the main article (`dom_smoothie`, a
//! Readability port) when one is found, else the whole page as text
//! (`html2text`); scripts, styles and navigation dropped. Both parsers can
//! take minutes on a crafted page (200,000 nested elements), so pages are
//! parsed like uploads: in the extraction worker, under its limits.

/// A page's title and readable text.
pub fn html_to_text(html: &str, url: &str) -> (Option<String>, String) {
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
    fn short_pages_fall_back_to_their_whole_text() {
        let (_, text) = html_to_text(
            "<html><body><p>Opening hours: 9 to 5.</p><script>x()</script></body></html>",
            "http://example.com/",
        );
        assert!(text.contains("Opening hours: 9 to 5."), "{text}");
        assert!(!text.contains("x()"), "{text}");
    }
}
