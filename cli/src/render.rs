//! Output in lxc's formats. `table` draws the same borders as lxc (go-tablewriter with a line
//! between rows and centred headers), `compact` the borderless variant, `csv` plain rows without a
//! header; `json` (one line) and `yaml` serialize the objects themselves, not the table.

use serde::Serialize;

use crate::args::TableFormat;

/// Rows ready for display: one header, string cells (a cell may hold several lines).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rows {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Rows {
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        Rows {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push<S: Into<String>>(&mut self, row: impl IntoIterator<Item = S>) {
        self.rows.push(row.into_iter().map(Into::into).collect());
    }

    /// Each column's width: its longest line, header included.
    fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self.header.iter().map(|h| width(h)).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.lines().map(width).max().unwrap_or(0));
            }
        }
        widths
    }
}

fn width(text: &str) -> usize {
    text.chars().count()
}

/// go-tablewriter's centring, which lxc's headers use: the odd space goes to the right. (Table
/// crates such as comfy-table put it on the left, which is why the drawing is done here.)
fn centre(text: &str, w: usize) -> String {
    let gap = w.saturating_sub(width(text));
    format!("{}{text}{}", " ".repeat(gap / 2), " ".repeat(gap - gap / 2))
}

fn left(text: &str, w: usize) -> String {
    format!("{text}{}", " ".repeat(w.saturating_sub(width(text))))
}

/// Lines of one row: as many as its tallest cell, each cell padded to its column.
fn row_lines(cells: &[String], widths: &[usize], sep: &str, edge: &str) -> String {
    let split: Vec<Vec<&str>> = cells.iter().map(|c| c.lines().collect()).collect();
    let height = split.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let mut out = String::new();
    for line in 0..height {
        let parts: Vec<String> = widths
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let text = split.get(i).and_then(|c| c.get(line)).unwrap_or(&"");
                format!(" {} ", left(text, w))
            })
            .collect();
        out += &format!("{edge}{}{edge}\n", parts.join(sep));
    }
    out
}

/// lxc's `table` format: `+`/`-`/`|` borders, a line under the header and between rows.
pub fn table(rows: &Rows) -> String {
    let widths = rows.widths();
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(w + 2)).collect();
    let rule = format!("+{}+\n", rule.join("+"));
    let header: Vec<String> = rows
        .header
        .iter()
        .zip(&widths)
        .map(|(h, &w)| format!(" {} ", centre(h, w)))
        .collect();
    let mut out = format!("{rule}|{}|\n{rule}", header.join("|"));
    for row in &rows.rows {
        out += &row_lines(row, &widths, "|", "|");
        out += &rule;
    }
    out
}

/// lxc's `compact` format: no lines, one space at each edge, cells padded by one space.
pub fn compact(rows: &Rows) -> String {
    let widths = rows.widths();
    let header: Vec<String> = rows
        .header
        .iter()
        .zip(&widths)
        .map(|(h, &w)| format!(" {} ", centre(h, w)))
        .collect();
    let mut out = format!(" {} \n", header.concat());
    for row in &rows.rows {
        out += &row_lines(row, &widths, "", " ");
    }
    out
}

/// lxc's `csv` format: rows only, RFC 4180 quoting.
pub fn csv(rows: &Rows) -> String {
    let mut out = csv::WriterBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_writer(Vec::new());
    for row in &rows.rows {
        out.write_record(row).expect("writing to memory");
    }
    String::from_utf8(out.into_inner().expect("writing to memory")).expect("cells are UTF-8")
}

/// One of the three row formats; `None` for json and yaml, which serialize objects instead.
pub fn rows_in(format: TableFormat, rows: &Rows) -> Option<String> {
    match format {
        TableFormat::Table => Some(table(rows)),
        TableFormat::Compact => Some(compact(rows)),
        TableFormat::Csv => Some(csv(rows)),
        TableFormat::Json | TableFormat::Yaml => None,
    }
}

/// JSON on one line, as lxc prints it.
pub fn json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<String> {
    Ok(serde_json::to_string(value)? + "\n")
}

pub fn yaml<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<String> {
    Ok(serde_yaml::to_string(value)?)
}

/// Prints `rows` in a row format, or `objects` for json and yaml.
pub fn print<T: Serialize + ?Sized>(
    format: TableFormat,
    rows: &Rows,
    objects: &T,
) -> anyhow::Result<()> {
    let text = match format {
        TableFormat::Json => json(objects)?,
        TableFormat::Yaml => yaml(objects)?,
        _ => rows_in(format, rows).expect("a row format"),
    };
    print!("{text}");
    Ok(())
}

/// lxc's rendering of a yes/no column.
pub fn yes_no(value: bool) -> &'static str {
    if value {
        "YES"
    } else {
        "NO"
    }
}

/// A unit enum value as its JSON spells it (`running`, `create_instance`).
pub fn wire_name<T: Serialize>(value: T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}
