//! SCIM filters (RFC 7644 §3.4.2.2): parsing, compilation to a PostgreSQL
//! `jsonpath` predicate, and in-memory evaluation.
//!
//! Semantics shared by [`to_jsonpath`] and [`matches`]:
//! * a comparison on a multi-valued attribute is true when ANY value matches;
//! * strings of a `caseExact: false` attribute compare case-insensitively
//!   (except `gt`/`ge`/`lt`/`le`, which compare exactly, by code point);
//! * `pr` is true when the attribute has a value that is not `""` (stored
//!   documents contain no null and no empty array/object);
//! * `ne` is the negation of `eq`: true when the attribute is absent, and for
//!   a multi-valued attribute true when NO value equals;
//! * `eq null` is `not pr`, `ne null` is `pr`;
//! * a complex multi-valued attribute compared directly compares its `value`.

use serde_json::Value;

use crate::error::ScimError;
use crate::schema::{AttrPath, AttrType, Kind, Resolved, resolve};

/// Maximum filter length in bytes.
pub const MAX_FILTER_BYTES: usize = 4096;
/// Maximum nesting depth (parentheses, `not`, value paths).
pub const MAX_DEPTH: usize = 32;
/// Maximum number of comparisons (including `pr`).
pub const MAX_COMPARISONS: usize = 64;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `eq`.
    Eq,
    /// `ne`.
    Ne,
    /// `co` (contains).
    Co,
    /// `sw` (starts with).
    Sw,
    /// `ew` (ends with).
    Ew,
    /// `gt`.
    Gt,
    /// `ge`.
    Ge,
    /// `lt`.
    Lt,
    /// `le`.
    Le,
}

impl CompareOp {
    fn parse(s: &str) -> Option<CompareOp> {
        Some(match s.to_ascii_lowercase().as_str() {
            "eq" => CompareOp::Eq,
            "ne" => CompareOp::Ne,
            "co" => CompareOp::Co,
            "sw" => CompareOp::Sw,
            "ew" => CompareOp::Ew,
            "gt" => CompareOp::Gt,
            "ge" => CompareOp::Ge,
            "lt" => CompareOp::Lt,
            "le" => CompareOp::Le,
            _ => return None,
        })
    }

    fn is_ordering(self) -> bool {
        matches!(
            self,
            CompareOp::Gt | CompareOp::Ge | CompareOp::Lt | CompareOp::Le
        )
    }
}

/// A parsed filter. Inside a [`Filter::ValuePath`], the paths of the inner
/// filter name the outer attribute with one of its sub-attributes and are
/// evaluated relative to each value of the outer attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `attrPath op value`.
    Compare {
        /// The attribute compared.
        path: AttrPath,
        /// The operator.
        op: CompareOp,
        /// A string, number, boolean or null.
        value: Value,
    },
    /// `attrPath pr`.
    Present(AttrPath),
    /// `a and b`.
    And(Box<Filter>, Box<Filter>),
    /// `a or b`.
    Or(Box<Filter>, Box<Filter>),
    /// `not (a)`.
    Not(Box<Filter>),
    /// `attr[filter]`: some value of the multi-valued complex `attr` matches.
    ValuePath {
        /// The multi-valued (or complex) attribute, without sub-attribute.
        path: AttrPath,
        /// The filter applied to each value.
        filter: Box<Filter>,
    },
}

fn err(detail: impl Into<String>) -> ScimError {
    ScimError::invalid_filter(detail)
}

struct Parser<'a> {
    kind: Kind,
    s: &'a str,
    pos: usize,
    depth: usize,
    comparisons: usize,
    /// The outer attribute inside a value path.
    ctx: Option<AttrPath>,
}

fn is_ws(c: u8) -> bool {
    c == b' ' || c == b'\t' || c == b'\n' || c == b'\r'
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    fn skip_ws(&mut self) -> bool {
        let start = self.pos;
        while self.peek().is_some_and(is_ws) {
            self.pos += 1;
        }
        self.pos > start
    }

    /// Consumes `word` (case-insensitive) if it is followed by a space or `(`.
    fn keyword(&mut self, word: &str) -> bool {
        let end = self.pos + word.len();
        let matched = self
            .s
            .get(self.pos..end)
            .is_some_and(|w| w.eq_ignore_ascii_case(word));
        let next = self.s.as_bytes().get(end).copied();
        if matched && next.is_some_and(|c| is_ws(c) || c == b'(') {
            self.pos = end;
            true
        } else {
            false
        }
    }

    fn enter(&mut self) -> Result<(), ScimError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(err(format!(
                "filter is nested more than {MAX_DEPTH} levels deep"
            )));
        }
        Ok(())
    }

    fn parse_or(&mut self) -> Result<Filter, ScimError> {
        let mut left = self.parse_and()?;
        loop {
            let save = self.pos;
            if self.skip_ws() && self.keyword("or") {
                let right = self.parse_and()?;
                left = Filter::Or(Box::new(left), Box::new(right));
            } else {
                self.pos = save;
                return Ok(left);
            }
        }
    }

    fn parse_and(&mut self) -> Result<Filter, ScimError> {
        let mut left = self.parse_unary()?;
        loop {
            let save = self.pos;
            if self.skip_ws() && self.keyword("and") {
                let right = self.parse_unary()?;
                left = Filter::And(Box::new(left), Box::new(right));
            } else {
                self.pos = save;
                return Ok(left);
            }
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), ScimError> {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(err(format!(
                "expected '{}' at position {}",
                c as char, self.pos
            )))
        }
    }

    fn parse_unary(&mut self) -> Result<Filter, ScimError> {
        self.skip_ws();
        if self.peek() == Some(b'(') {
            self.pos += 1;
            self.enter()?;
            let f = self.parse_or()?;
            self.expect(b')')?;
            self.depth -= 1;
            return Ok(f);
        }
        if self.keyword("not") {
            self.enter()?;
            let f = self.parse_unary()?;
            self.depth -= 1;
            return Ok(Filter::Not(Box::new(f)));
        }
        self.parse_attr_expr()
    }

    fn read_token(&mut self) -> &str {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| !is_ws(c) && !matches!(c, b'[' | b']' | b'(' | b')' | b'"'))
        {
            self.pos += 1;
        }
        self.s.get(start..self.pos).unwrap_or("")
    }

    fn resolve_path(&self, name: &str) -> Result<AttrPath, ScimError> {
        if name.is_empty() {
            return Err(err(format!(
                "expected an attribute at position {}",
                self.pos
            )));
        }
        let unknown = || err(format!("unknown attribute '{name}'"));
        let path = if let Some(outer) = self.ctx {
            let sub = outer.attr.sub_attr(name).ok_or_else(unknown)?;
            AttrPath {
                sub: Some(sub),
                ..outer
            }
        } else {
            match resolve(self.kind, name) {
                Some(Resolved::Attr(p)) => p,
                _ => return Err(unknown()),
            }
        };
        if self.kind == Kind::User && path.attr.name == "groups" && !path.schema.extension {
            return Err(err("filtering on groups is not supported"));
        }
        Ok(path)
    }

    fn parse_attr_expr(&mut self) -> Result<Filter, ScimError> {
        let name = self.read_token().to_owned();
        let path = self.resolve_path(&name)?;
        if self.peek() == Some(b'[') {
            if self.ctx.is_some() || path.sub.is_some() || !path.attr.is_complex() {
                return Err(err(format!("invalid value path on '{name}'")));
            }
            self.pos += 1;
            self.enter()?;
            self.ctx = Some(path);
            let inner = self.parse_or()?;
            self.ctx = None;
            self.expect(b']')?;
            self.depth -= 1;
            return Ok(Filter::ValuePath {
                path,
                filter: Box::new(inner),
            });
        }
        if !self.skip_ws() {
            return Err(err(format!("expected an operator after '{name}'")));
        }
        let op_start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.pos += 1;
        }
        let op = self.s.get(op_start..self.pos).unwrap_or("");
        self.comparisons += 1;
        if self.comparisons > MAX_COMPARISONS {
            return Err(err(format!(
                "filter has more than {MAX_COMPARISONS} comparisons"
            )));
        }
        if op.eq_ignore_ascii_case("pr") {
            return Ok(Filter::Present(path));
        }
        let op = CompareOp::parse(op).ok_or_else(|| err(format!("unknown operator '{op}'")))?;
        if !self.skip_ws() {
            return Err(err("expected a value after the operator"));
        }
        let value = self.parse_value()?;
        let path = comparable(path, &name)?;
        check_comparison(&path, op, &value, &name)?;
        let value = match value {
            Value::String(s) if path.leaf().ty == AttrType::DateTime => {
                Value::String(normalize_datetime(&s).unwrap_or(s))
            }
            v => v,
        };
        Ok(Filter::Compare { path, op, value })
    }

    fn parse_value(&mut self) -> Result<Value, ScimError> {
        let start = self.pos;
        if self.peek() == Some(b'"') {
            let bytes = self.s.as_bytes();
            let mut i = start + 1;
            loop {
                match bytes.get(i) {
                    None => return Err(err("unterminated string")),
                    Some(b'\\') => i += 2,
                    Some(b'"') => break,
                    Some(_) => i += 1,
                }
            }
            self.pos = i + 1;
            let lit = self.s.get(start..=i).ok_or_else(|| err("invalid string"))?;
            let s: String =
                serde_json::from_str(lit).map_err(|_| err(format!("invalid string {lit}")))?;
            return Ok(Value::String(s));
        }
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'+' | b'-'))
        {
            self.pos += 1;
        }
        let word = self.s.get(start..self.pos).unwrap_or("");
        match word.to_ascii_lowercase().as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            "null" => Ok(Value::Null),
            _ => match serde_json::from_str::<Value>(word) {
                Ok(v @ Value::Number(_)) => Ok(v),
                _ => Err(err(format!("invalid value '{word}'"))),
            },
        }
    }
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Rewrites an RFC 3339 date-time to the stored form
/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC, 6 fraction digits) so that string
/// comparisons order date-times correctly.
pub(crate) fn normalize_datetime(s: &str) -> Option<String> {
    if !crate::schema::is_rfc3339(s) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(|x| x.parse::<i64>().ok());
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let rest = s.get(19..)?;
    let (frac, zone) = match rest.strip_prefix('.') {
        Some(r) => {
            let n = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            (r.get(..n)?, r.get(n..)?)
        }
        None => ("", rest),
    };
    let mut frac6: String = frac.chars().take(6).collect();
    while frac6.len() < 6 {
        frac6.push('0');
    }
    let offset_min = match zone.as_bytes().first() {
        Some(b'+' | b'-') => {
            let oh = zone.get(1..3)?.parse::<i64>().ok()?;
            let om = zone.get(4..6)?.parse::<i64>().ok()?;
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            sign * (oh * 60 + om)
        }
        _ => 0,
    };
    let total = (days_from_civil(y, mo, d) * 1440 + h * 60 + mi - offset_min) * 60 + sec;
    let (days, secs) = (total.div_euclid(86400), total.rem_euclid(86400));
    let (y, mo, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return None;
    }
    Some(format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{frac6}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    ))
}

/// A complex attribute compared directly compares its `value` sub-attribute.
fn comparable(path: AttrPath, name: &str) -> Result<AttrPath, ScimError> {
    if path.leaf().is_complex() {
        let value = path
            .attr
            .sub_attr("value")
            .filter(|_| path.sub.is_none())
            .ok_or_else(|| err(format!("cannot compare the complex attribute '{name}'")))?;
        return Ok(AttrPath {
            sub: Some(value),
            ..path
        });
    }
    Ok(path)
}

fn check_comparison(
    path: &AttrPath,
    op: CompareOp,
    value: &Value,
    name: &str,
) -> Result<(), ScimError> {
    let leaf = path.leaf();
    match op {
        CompareOp::Co | CompareOp::Sw | CompareOp::Ew if !value.is_string() => {
            Err(err(format!("'{name}': co, sw and ew need a string value")))
        }
        _ if op.is_ordering()
            && (value.is_null() || value.is_boolean() || leaf.ty == AttrType::Boolean) =>
        {
            Err(err(format!(
                "'{name}': gt, ge, lt and le do not apply to booleans or null"
            )))
        }
        _ => Ok(()),
    }
}

fn parse_with(kind: Kind, input: &str, ctx: Option<AttrPath>) -> Result<Filter, ScimError> {
    if input.len() > MAX_FILTER_BYTES {
        return Err(err(format!(
            "filter is longer than {MAX_FILTER_BYTES} bytes"
        )));
    }
    let mut p = Parser {
        kind,
        s: input,
        pos: 0,
        depth: 0,
        comparisons: 0,
        ctx,
    };
    let f = p.parse_or()?;
    p.skip_ws();
    if p.pos != input.len() {
        return Err(err(format!("unexpected input at position {}", p.pos)));
    }
    Ok(f)
}

/// Parses a filter for resources of `kind`.
pub fn parse(kind: Kind, input: &str) -> Result<Filter, ScimError> {
    parse_with(kind, input, None)
}

/// Parses the filter of a value path (`emails[<filter>]`) relative to `outer`.
pub(crate) fn parse_value_filter(
    kind: Kind,
    outer: AttrPath,
    input: &str,
) -> Result<Filter, ScimError> {
    parse_with(kind, input, Some(outer))
}

/// A jsonpath string literal (always double-quoted and escaped).
fn jp_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Escapes every non-alphanumeric ASCII character for a regular expression.
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for c in s.chars() {
        if c.is_ascii() && !c.is_ascii_alphanumeric() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn accessor(p: &AttrPath, rel: bool) -> String {
    if rel {
        return match p.sub {
            Some(sub) => format!("@.{}", jp_string(sub.name)),
            None => "@".to_owned(),
        };
    }
    let mut s = String::from("$");
    if p.schema.extension {
        s.push('.');
        s.push_str(&jp_string(p.schema.urn));
    }
    s.push('.');
    s.push_str(&jp_string(p.attr.name));
    if p.attr.multi {
        s.push_str("[*]");
    }
    if let Some(sub) = p.sub {
        s.push('.');
        s.push_str(&jp_string(sub.name));
    }
    s
}

fn literal(v: &Value) -> String {
    match v {
        Value::String(s) => jp_string(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => "null".to_owned(),
    }
}

fn regex(pattern: String, case_exact: bool) -> String {
    if case_exact {
        format!("@ like_regex {}", jp_string(&pattern))
    } else {
        format!("@ like_regex {} flag \"i\"", jp_string(&pattern))
    }
}

/// The condition on `@` (one value) for a comparison other than `ne`.
fn condition(path: &AttrPath, op: CompareOp, value: &Value) -> String {
    let exact = path.leaf().case_exact;
    let s = match value {
        Value::String(s) => Some(s.as_str()),
        _ => None,
    };
    match (op, s) {
        (CompareOp::Eq | CompareOp::Ne, Some(s)) if !exact => {
            regex(format!("^{}$", regex_escape(s)), false)
        }
        (CompareOp::Eq | CompareOp::Ne, _) => format!("@ == {}", literal(value)),
        (CompareOp::Co, Some(s)) => regex(regex_escape(s), exact),
        (CompareOp::Sw, Some(s)) if exact => format!("@ starts with {}", jp_string(s)),
        (CompareOp::Sw, Some(s)) => regex(format!("^{}", regex_escape(s)), false),
        (CompareOp::Ew, Some(s)) => regex(format!("{}$", regex_escape(s)), exact),
        (CompareOp::Gt, _) => format!("@ > {}", literal(value)),
        (CompareOp::Ge, _) => format!("@ >= {}", literal(value)),
        (CompareOp::Lt, _) => format!("@ < {}", literal(value)),
        (CompareOp::Le, _) => format!("@ <= {}", literal(value)),
        // co/sw/ew without a string are rejected by the parser.
        (_, None) => "false".to_owned(),
    }
}

fn present(path: &AttrPath, rel: bool) -> String {
    let acc = accessor(path, rel);
    if path.leaf().is_complex()
        || !matches!(
            path.leaf().ty,
            AttrType::String | AttrType::Reference | AttrType::Binary
        )
    {
        format!("exists({acc})")
    } else {
        format!("exists({acc} ? (@ != \"\"))")
    }
}

fn render(f: &Filter, rel: bool) -> String {
    match f {
        Filter::Present(p) => present(p, rel),
        Filter::Compare { path, op, value } => {
            if value.is_null() {
                let pr = present(path, rel);
                return if *op == CompareOp::Ne {
                    pr
                } else {
                    format!("!({pr})")
                };
            }
            let exists = format!(
                "exists({} ? ({}))",
                accessor(path, rel),
                condition(path, *op, value)
            );
            if *op == CompareOp::Ne {
                format!("!({exists})")
            } else {
                exists
            }
        }
        Filter::And(a, b) => format!("({} && {})", render(a, rel), render(b, rel)),
        Filter::Or(a, b) => format!("({} || {})", render(a, rel), render(b, rel)),
        Filter::Not(a) => format!("!({})", render(a, rel)),
        Filter::ValuePath { path, filter } => {
            format!(
                "exists({} ? ({}))",
                accessor(path, false),
                render(filter, true)
            )
        }
    }
}

/// A PostgreSQL jsonpath predicate (for `doc @@ $1::jsonpath`, lax mode)
/// equivalent to the filter over a stored document.
pub fn to_jsonpath(filter: &Filter) -> String {
    render(filter, false)
}

fn push_flat<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Array(items) => out.extend(items.iter().filter(|i| !i.is_null())),
        Value::Null => {}
        v => out.push(v),
    }
}

/// The values at `path` in `doc` (arrays unwrapped, like lax jsonpath).
fn values_at<'a>(doc: &'a Value, path: &AttrPath, rel: bool) -> Vec<&'a Value> {
    let mut top = Vec::new();
    if rel {
        push_flat(doc, &mut top);
    } else {
        let base = if path.schema.extension {
            doc.get(path.schema.urn)
        } else {
            Some(doc)
        };
        if let Some(v) = base.and_then(|b| b.get(path.attr.name)) {
            push_flat(v, &mut top);
        }
    }
    let Some(sub) = path.sub else {
        return top;
    };
    let mut out = Vec::new();
    for v in top {
        if let Some(s) = v.get(sub.name) {
            push_flat(s, &mut out);
        }
    }
    out
}

fn is_present(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    }
}

fn compare_one(v: &Value, op: CompareOp, lit: &Value, exact: bool) -> bool {
    use std::cmp::Ordering;
    let ord = |o: Ordering| match op {
        CompareOp::Eq | CompareOp::Ne => o == Ordering::Equal,
        CompareOp::Gt => o == Ordering::Greater,
        CompareOp::Ge => o != Ordering::Less,
        CompareOp::Lt => o == Ordering::Less,
        CompareOp::Le => o != Ordering::Greater,
        _ => false,
    };
    match (v, lit) {
        (Value::String(a), Value::String(b)) => {
            if op.is_ordering() {
                return ord(a.as_str().cmp(b.as_str()));
            }
            let (a, b) = if exact {
                (a.clone(), b.clone())
            } else {
                (a.to_lowercase(), b.to_lowercase())
            };
            match op {
                CompareOp::Co => a.contains(&b),
                CompareOp::Sw => a.starts_with(&b),
                CompareOp::Ew => a.ends_with(&b),
                _ => a == b,
            }
        }
        (Value::Number(a), Value::Number(b)) => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => a.partial_cmp(&b).is_some_and(ord),
            _ => false,
        },
        (Value::Bool(a), Value::Bool(b)) => matches!(op, CompareOp::Eq | CompareOp::Ne) && a == b,
        _ => false,
    }
}

fn eval(f: &Filter, doc: &Value, rel: bool) -> bool {
    match f {
        Filter::Present(p) => values_at(doc, p, rel).into_iter().any(is_present),
        Filter::Compare { path, op, value } => {
            if value.is_null() {
                let pr = values_at(doc, path, rel).into_iter().any(is_present);
                return if *op == CompareOp::Ne { pr } else { !pr };
            }
            let exact = path.leaf().case_exact;
            let any = values_at(doc, path, rel)
                .into_iter()
                .any(|v| compare_one(v, *op, value, exact));
            if *op == CompareOp::Ne { !any } else { any }
        }
        Filter::And(a, b) => eval(a, doc, rel) && eval(b, doc, rel),
        Filter::Or(a, b) => eval(a, doc, rel) || eval(b, doc, rel),
        Filter::Not(a) => !eval(a, doc, rel),
        Filter::ValuePath { path, filter } => values_at(doc, path, false)
            .into_iter()
            .any(|elem| eval(filter, elem, true)),
    }
}

/// Evaluates the filter over a document, with the same semantics as
/// [`to_jsonpath`].
pub fn matches(filter: &Filter, doc: &Value) -> bool {
    eval(filter, doc, false)
}

/// Evaluates the inner filter of a value path over one value of the attribute.
pub(crate) fn matches_value(filter: &Filter, value: &Value) -> bool {
    eval(filter, value, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn jp(kind: Kind, f: &str) -> String {
        to_jsonpath(&parse(kind, f).unwrap())
    }

    fn user() -> Value {
        json!({
            "schemas": [crate::USER_URN, crate::ENTERPRISE_USER_URN],
            "id": "2819c223-7f76-453a-919d-413861904646",
            "externalId": "Ext-1",
            "userName": "Bjensen@Example.com",
            "name": {"familyName": "Jensen", "givenName": "Barbara"},
            "title": "",
            "active": true,
            "emails": [
                {"value": "bjensen@example.com", "type": "work", "primary": true},
                {"value": "babs@jensen.org", "type": "home"}
            ],
            "meta": {"created": "2026-11-29T01:02:03.123456Z", "lastModified": "2026-11-30T00:00:00.000000Z", "resourceType": "User", "version": "W/\"1\""},
            crate::ENTERPRISE_USER_URN: {"department": "R&D", "manager": {"value": "m1"}},
        })
    }

    #[test]
    fn golden_operators() {
        let cases = [
            (r#"userName eq "bjensen""#, r#"exists($."userName" ? (@ like_regex "^bjensen$" flag "i"))"#),
            (r#"externalId eq "A.b""#, r#"exists($."externalId" ? (@ == "A.b"))"#),
            (r#"userName ne "x""#, r#"!(exists($."userName" ? (@ like_regex "^x$" flag "i")))"#),
            (r#"userName co "a.b""#, r#"exists($."userName" ? (@ like_regex "a\\.b" flag "i"))"#),
            (r#"userName sw "J""#, r#"exists($."userName" ? (@ like_regex "^J" flag "i"))"#),
            (r#"id sw "28""#, r#"exists($."id" ? (@ starts with "28"))"#),
            (r#"userName ew "@x.com""#, r#"exists($."userName" ? (@ like_regex "\\@x\\.com$" flag "i"))"#),
            (r#"id co "7f""#, r#"exists($."id" ? (@ like_regex "7f"))"#),
            (r#"meta.lastModified gt "2011-05-13T04:42:34Z""#, r#"exists($."meta"."lastModified" ? (@ > "2011-05-13T04:42:34.000000Z"))"#),
            (r#"meta.created ge "2011""#, r#"exists($."meta"."created" ? (@ >= "2011"))"#),
            (r#"meta.created lt "2011""#, r#"exists($."meta"."created" ? (@ < "2011"))"#),
            (r#"meta.created le "2011""#, r#"exists($."meta"."created" ? (@ <= "2011"))"#),
            ("title pr", r#"exists($."title" ? (@ != ""))"#),
            ("name pr", r#"exists($."name")"#),
            ("emails pr", r#"exists($."emails"[*])"#),
            ("active eq true", r#"exists($."active" ? (@ == true))"#),
            ("active ne false", r#"!(exists($."active" ? (@ == false)))"#),
            ("title eq null", r#"!(exists($."title" ? (@ != "")))"#),
            (r#"emails.value eq "a""#, r#"exists($."emails"[*]."value" ? (@ like_regex "^a$" flag "i"))"#),
            (r#"emails co "a""#, r#"exists($."emails"[*]."value" ? (@ like_regex "a" flag "i"))"#),
            (
                r#"emails[type eq "work" and value co "@example.com"]"#,
                r#"exists($."emails"[*] ? ((exists(@."type" ? (@ like_regex "^work$" flag "i")) && exists(@."value" ? (@ like_regex "\\@example\\.com" flag "i")))))"#,
            ),
            (
                r#"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department eq "R&D""#,
                r#"exists($."urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"."department" ? (@ like_regex "^R\\&D$" flag "i"))"#,
            ),
            (
                r#"urn:ietf:params:scim:schemas:core:2.0:User:name.familyName eq "J""#,
                r#"exists($."name"."familyName" ? (@ like_regex "^J$" flag "i"))"#,
            ),
            (
                r#"a eq "1" or b eq "2" and not (c eq "3")"#.replace("a eq", "title eq").replace("b eq", "nickName eq").replace("c eq", "locale eq").as_str().to_owned().leak(),
                r#"(exists($."title" ? (@ like_regex "^1$" flag "i")) || (exists($."nickName" ? (@ like_regex "^2$" flag "i")) && !(exists($."locale" ? (@ like_regex "^3$" flag "i")))))"#,
            ),
        ];
        for (f, want) in cases {
            assert_eq!(jp(Kind::User, f), want, "{f}");
        }
        assert_eq!(
            jp(Kind::Group, r#"members[value eq "u1"]"#),
            r#"exists($."members"[*] ? (exists(@."value" ? (@ == "u1"))))"#
        );
        assert_eq!(
            jp(Kind::Group, r#"members.value eq "u1""#),
            r#"exists($."members"[*]."value" ? (@ == "u1"))"#
        );
        assert_eq!(
            jp(Kind::Group, "DISPLAYNAME EQ 5"),
            r#"exists($."displayName" ? (@ == 5))"#
        );
    }

    #[test]
    fn evaluation() {
        let doc = user();
        let yes = [
            r#"userName eq "bjensen@example.com""#,
            r#"USERNAME Eq "BJENSEN@EXAMPLE.COM""#,
            r#"userName sw "bJ""#,
            r#"userName ew ".COM""#,
            r#"userName co "n@e""#,
            r#"externalId eq "Ext-1""#,
            r#"externalId ne "ext-1""#,
            r#"nickName ne "x""#,
            "name pr",
            "emails pr",
            "title eq null",
            "nickName eq null",
            "active eq true",
            r#"emails.value eq "babs@jensen.org""#,
            r#"emails eq "babs@jensen.org""#,
            r#"emails[type eq "work" and value co "@example.com"]"#,
            r#"emails[type eq "HOME"] and not (emails[type eq "other"])"#,
            r#"meta.created gt "2026-11-29T01:02:03Z""#,
            r#"meta.created lt "2026-11-30""#,
            r#"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department eq "r&d""#,
            r#"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager.value eq "m1""#,
            r#"title pr or userName pr"#,
        ];
        for f in yes {
            assert!(matches(&parse(Kind::User, f).unwrap(), &doc), "{f}");
        }
        let no = [
            r#"userName eq "bjensen""#,
            r#"externalId eq "ext-1""#,
            "title pr",
            "nickName pr",
            r#"nickName eq "x""#,
            r#"emails[type eq "work" and value co "jensen.org"]"#,
            "active eq false",
            r#"id eq "2819C223-7F76-453A-919D-413861904646""#,
            r#"meta.created gt "2027""#,
            r#"not (userName pr)"#,
            r#"title pr and userName pr"#,
        ];
        for f in no {
            assert!(!matches(&parse(Kind::User, f).unwrap(), &doc), "{f}");
        }
    }

    #[test]
    fn datetime_normalization() {
        assert_eq!(
            normalize_datetime("2026-11-29T01:02:03Z").as_deref(),
            Some("2026-11-29T01:02:03.000000Z")
        );
        assert_eq!(
            normalize_datetime("2026-11-29T01:02:03.1234567Z").as_deref(),
            Some("2026-11-29T01:02:03.123456Z")
        );
        assert_eq!(
            normalize_datetime("2026-03-01T00:30:00+01:00").as_deref(),
            Some("2026-02-28T23:30:00.000000Z")
        );
        assert_eq!(
            normalize_datetime("2024-02-29T23:00:00-02:00").as_deref(),
            Some("2024-03-01T01:00:00.000000Z")
        );
        assert_eq!(normalize_datetime("nope"), None);
        assert_eq!(
            jp(Kind::User, r#"meta.created gt "2011-05-13T04:42:34Z""#),
            r#"exists($."meta"."created" ? (@ > "2011-05-13T04:42:34.000000Z"))"#
        );
    }

    #[test]
    fn errors() {
        let bad = [
            "",
            "userName",
            "userName eq",
            r#"userName eq "x"#,
            r#"userName xx "x""#,
            r#"nope eq "x""#,
            r#"name eq "x""#,
            r#"groups.value eq "x""#,
            r#"groups[value eq "x"]"#,
            "active gt true",
            "meta.created gt null",
            "userName co 5",
            r#"(userName eq "x""#,
            r#"userName eq "x")"#,
            r#"userName eq "x" and"#,
            r#"emails[type eq "work"]]"#,
            r#"emails[emails[type eq "work"]]"#,
            r#"emails[nope eq "work"]"#,
            "userName eq bare",
            r#"userName eq "\q""#,
        ];
        for f in bad {
            let e = parse(Kind::User, f).unwrap_err();
            assert_eq!(e.scim_type, Some("invalidFilter"), "{f}");
            assert_eq!(e.status, 400);
        }
        let e = parse(Kind::User, r#"groups.value eq "x""#).unwrap_err();
        assert_eq!(e.detail, "filtering on groups is not supported");
        assert!(parse(Kind::Group, r#"userName eq "x""#).is_err());
    }

    #[test]
    fn limits() {
        let deep = format!("{}userName pr{}", "(".repeat(33), ")".repeat(33));
        assert!(parse(Kind::User, &deep).is_err());
        let ok = format!("{}userName pr{}", "(".repeat(32), ")".repeat(32));
        assert!(parse(Kind::User, &ok).is_ok());
        let nots = format!("{}userName pr", "not ".repeat(40));
        assert!(parse(Kind::User, &nots).is_err());
        let many = vec!["userName pr"; 65].join(" or ");
        assert!(parse(Kind::User, &many).is_err());
        let fine = vec!["userName pr"; 64].join(" and ");
        assert!(parse(Kind::User, &fine).is_ok());
        let huge = format!(r#"userName eq "{}""#, "a".repeat(5000));
        assert!(parse(Kind::User, &huge).is_err());
        let unbalanced = "(".repeat(10000);
        assert!(parse(Kind::User, &unbalanced).is_err());
    }

    #[test]
    fn hostile_strings_stay_inside_literals() {
        let hostile = "a\") || true || (\"\\ $ @ ) ] \n\t\u{1} é 漢 \u{7f} ' .* ^$";
        let f = format!(
            "userName eq {} or externalId sw {} or id co {}",
            serde_json::to_string(hostile).unwrap(),
            serde_json::to_string(hostile).unwrap(),
            serde_json::to_string(hostile).unwrap()
        );
        let parsed = parse(Kind::User, &f).unwrap();
        let out = to_jsonpath(&parsed);
        // Every literal must round-trip: extract the string literals and check
        // that outside them only our own syntax appears.
        let mut outside = String::new();
        let mut literals = Vec::new();
        let mut chars = out.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '"' {
                let mut lit = String::new();
                loop {
                    match chars.next() {
                        Some('\\') => {
                            lit.push('\\');
                            lit.push(chars.next().unwrap());
                        }
                        Some('"') => break,
                        Some(c) => {
                            assert!(
                                c as u32 >= 0x20 && c as u32 != 0x7f,
                                "raw control char in literal"
                            );
                            lit.push(c)
                        }
                        None => panic!("unterminated literal in {out}"),
                    }
                }
                literals.push(lit);
            } else {
                outside.push(c);
            }
        }
        assert_eq!(
            outside,
            "((exists($. ? (@ like_regex  flag )) || exists($. ? (@ starts with ))) || exists($. ? (@ like_regex )))",
            "{out}"
        );
        // The starts-with literal decodes (JSON escapes ⊂ jsonpath escapes) to the input.
        let sw = literals.iter().find(|l| l.starts_with("a\\\"")).unwrap();
        let decoded: String = serde_json::from_str(&format!("\"{sw}\"")).unwrap();
        assert_eq!(decoded, hostile);
        // The regex literals decode to the escaped regex of the input.
        let re = literals.iter().find(|l| l.starts_with("^")).unwrap();
        let decoded: String = serde_json::from_str(&format!("\"{re}\"")).unwrap();
        assert_eq!(decoded, format!("^{}$", regex_escape(hostile)));
        // And in-memory matching treats them literally.
        let doc = json!({"userName": hostile.to_uppercase()});
        assert!(matches(
            &parse(
                Kind::User,
                &format!("userName eq {}", serde_json::to_string(hostile).unwrap())
            )
            .unwrap(),
            &doc
        ));
    }
}
