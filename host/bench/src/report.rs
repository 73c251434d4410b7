//! Tables, printed as they are measured and collected into the Markdown
//! report.

/// A Markdown table.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| (*h).to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Markdown, with columns padded so that it also reads well in a terminal.
    pub fn markdown(&self) -> String {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::from("|");
            for (i, w) in widths.iter().enumerate() {
                let c = cells.get(i).map_or("", String::as_str);
                let pad = w.saturating_sub(c.chars().count());
                s.push(' ');
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
                s.push_str(" |");
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.headers);
        out.push('|');
        for w in &widths {
            out.push_str(&format!("{}|", "-".repeat(w + 2)));
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// One section of the report.
#[derive(Clone, Debug, Default)]
pub struct Section {
    pub title: String,
    pub intro: String,
    pub tables: Vec<(String, Table)>,
    pub notes: Vec<String>,
}

impl Section {
    pub fn new(title: &str, intro: &str) -> Self {
        Self {
            title: title.to_string(),
            intro: intro.to_string(),
            ..Self::default()
        }
    }

    /// Adds a table (with an optional caption) and prints it.
    pub fn table(&mut self, caption: &str, table: Table) {
        if !caption.is_empty() {
            println!("{caption}");
        }
        println!("{}", table.markdown());
        self.tables.push((caption.to_string(), table));
    }

    /// Adds a note and prints it.
    pub fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        println!("  note: {note}");
        self.notes.push(note);
    }

    pub fn markdown(&self) -> String {
        let mut out = format!("## {}\n\n", self.title);
        if !self.intro.is_empty() {
            out.push_str(&self.intro);
            out.push_str("\n\n");
        }
        for (caption, table) in &self.tables {
            if !caption.is_empty() {
                out.push_str(caption);
                out.push_str("\n\n");
            }
            out.push_str(&table.markdown());
            out.push('\n');
        }
        for n in &self.notes {
            out.push_str(&format!("- {n}\n"));
        }
        if !self.notes.is_empty() {
            out.push('\n');
        }
        out
    }
}

/// How a measured value stands against its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Met,
    Missed,
    /// The value could not be measured in this run (e.g. a peer that did
    /// not build); the row says why.
    NotMeasured,
}

impl Verdict {
    pub fn of(met: bool) -> Self {
        if met { Self::Met } else { Self::Missed }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Met => "met",
            Self::Missed => "**missed**",
            Self::NotMeasured => "not measured",
        }
    }
}

/// One row of the targets table.
#[derive(Clone, Debug)]
pub struct Target {
    pub what: String,
    pub target: String,
    pub measured: String,
    pub baseline: String,
    pub verdict: Verdict,
}
