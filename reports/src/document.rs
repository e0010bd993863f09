//! A report as structured content — headings, paragraphs, tables, figures —
//! rendered to a self-contained HTML page (charts inlined as SVG, styles
//! inline: one file a person can mail) and to Markdown (charts linked as
//! PNG files).

use crate::chart::Rendered;
use std::fmt::Write;

/// A table of text cells.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// One block of a section.
#[derive(Clone, Debug)]
pub enum Block {
    Para(String),
    Table(Table),
    Figure(Rendered),
    /// Raw HTML (interactive inline SVG and script) with its Markdown
    /// stand-in; the section that builds it escapes its own text.
    Html {
        html: String,
        markdown: String,
    },
}

/// A titled section.
#[derive(Clone, Debug)]
pub struct Section {
    pub heading: String,
    pub blocks: Vec<Block>,
}

impl Section {
    pub fn new(heading: impl Into<String>) -> Section {
        Section {
            heading: heading.into(),
            blocks: Vec::new(),
        }
    }

    pub fn para(&mut self, s: impl Into<String>) {
        self.blocks.push(Block::Para(s.into()));
    }

    pub fn table(&mut self, header: &[&str], rows: Vec<Vec<String>>) {
        self.blocks.push(Block::Table(Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows,
        }));
    }

    pub fn figure(&mut self, r: Rendered) {
        self.blocks.push(Block::Figure(r));
    }

    pub fn html(&mut self, html: String, markdown: String) {
        self.blocks.push(Block::Html { html, markdown });
    }

    /// The charts this section shows.
    pub fn figures(&self) -> impl Iterator<Item = &Rendered> {
        self.blocks.iter().filter_map(|b| match b {
            Block::Figure(r) => Some(r),
            _ => None,
        })
    }
}

/// A whole report.
#[derive(Clone, Debug)]
pub struct Doc {
    pub title: String,
    pub sections: Vec<Section>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG element alone (no XML declaration), for inlining.
fn inline_svg(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1020px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}\
h1{font-size:1.6em}h2{font-size:1.3em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}\
table{border-collapse:collapse;margin:1em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}\
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}\
figure{margin:1.5em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}\
figcaption{font-size:.85em;color:#555}code{font-size:.95em}";

impl Doc {
    /// The self-contained HTML page.
    pub fn html(&self) -> String {
        let mut h = String::new();
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n{}\n</head>\n<body>\n<h1>{}</h1>\n",
            esc(&self.title),
            crate::interactive::ERROR_HOOK,
            esc(&self.title)
        );
        for s in &self.sections {
            let _ = writeln!(h, "<section>\n<h2>{}</h2>", esc(&s.heading));
            for b in &s.blocks {
                match b {
                    Block::Para(p) => {
                        let _ = writeln!(h, "<p>{}</p>", esc(p));
                    }
                    Block::Table(t) => {
                        h.push_str("<table>\n<tr>");
                        for c in &t.header {
                            let _ = write!(h, "<th>{}</th>", esc(c));
                        }
                        h.push_str("</tr>\n");
                        for r in &t.rows {
                            h.push_str("<tr>");
                            for c in r {
                                let _ = write!(h, "<td>{}</td>", esc(c));
                            }
                            h.push_str("</tr>\n");
                        }
                        h.push_str("</table>\n");
                    }
                    Block::Html { html, .. } => {
                        h.push_str(html);
                        h.push('\n');
                    }
                    Block::Figure(r) => {
                        let _ = writeln!(
                            h,
                            "<figure id=\"chart-{n}\">\n{svg}\n<figcaption>{t} — hover for values, wheel or drag to zoom the x axis (double-click resets), click a legend entry to hide it — <a href=\"charts/{n}.png\">charts/{n}.png</a> · <a href=\"charts/{n}.svg\">charts/{n}.svg</a></figcaption>\n</figure>",
                            n = esc(&r.name),
                            svg = if r.interactive.is_empty() {
                                inline_svg(&r.svg).trim_end()
                            } else {
                                r.interactive.as_str()
                            },
                            t = esc(&r.title)
                        );
                    }
                }
            }
            h.push_str("</section>\n");
        }
        h.push_str(crate::interactive::SCRIPT);
        h.push_str("\n</body>\n</html>\n");
        h
    }

    /// The Markdown page; charts are the PNG files beside it.
    pub fn markdown(&self) -> String {
        let cell = |s: &str| s.replace('|', "\\|");
        let mut m = format!("# {}\n", self.title);
        for s in &self.sections {
            let _ = write!(m, "\n## {}\n", s.heading);
            for b in &s.blocks {
                match b {
                    Block::Para(p) => {
                        let _ = write!(m, "\n{p}\n");
                    }
                    Block::Table(t) => {
                        m.push('\n');
                        let row = |cells: &[String]| {
                            format!(
                                "| {} |\n",
                                cells
                                    .iter()
                                    .map(|c| cell(c))
                                    .collect::<Vec<_>>()
                                    .join(" | ")
                            )
                        };
                        m.push_str(&row(&t.header));
                        let _ = writeln!(
                            m,
                            "|{}",
                            t.header
                                .iter()
                                .enumerate()
                                .map(|(i, _)| if i == 0 { " --- |" } else { " ---: |" })
                                .collect::<String>()
                        );
                        for r in &t.rows {
                            m.push_str(&row(r));
                        }
                    }
                    Block::Html { markdown, .. } => {
                        m.push_str(markdown);
                    }
                    Block::Figure(r) => {
                        let _ = write!(
                            m,
                            "\n![{}](charts/{}.png)\n",
                            r.title.replace(['[', ']'], ""),
                            r.name
                        );
                    }
                }
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_inlines_figures_and_escapes_text() {
        let mut s = Section::new("Run <1>");
        s.para("a & b");
        s.table(&["k", "v"], vec![vec!["x|y".into(), "1".into()]]);
        s.figure(Rendered {
            name: "ttft-cdf".into(),
            title: "TTFT".into(),
            svg: "<?xml version=\"1.0\"?>\n<svg width=\"10\"></svg>\n".into(),
            interactive: String::new(),
        });
        let d = Doc {
            title: "T".into(),
            sections: vec![s],
        };
        let h = d.html();
        assert!(h.contains("<h2>Run &lt;1&gt;</h2>"));
        assert!(h.contains("<p>a &amp; b</p>"));
        assert!(h.contains("<figure id=\"chart-ttft-cdf\">\n<svg width=\"10\"></svg>"));
        assert!(!h.contains("<?xml"));
        let m = d.markdown();
        assert!(m.contains("| x\\|y | 1 |"), "{m}");
        assert!(m.contains("![TTFT](charts/ttft-cdf.png)"));
    }
}
