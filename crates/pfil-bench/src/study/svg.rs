//! The study's chart, written by hand: one panel per hook, chain length,
//! batch size and writer setting; in each, grouped bars of the median
//! ns/packet per strategy, one bar per reader-thread count, with min–max
//! whiskers, on a log scale shared by all panels.

use std::fmt::Write;

use super::matrix::Plan;
use super::{Machine, Measured};

const PANEL_W: f64 = 340.0;
const PANEL_H: f64 = 240.0;
const MARGIN_L: f64 = 56.0;
const MARGIN_R: f64 = 10.0;
const MARGIN_T: f64 = 26.0;
const MARGIN_B: f64 = 64.0;
const HEADER_H: f64 = 78.0;
const COLUMNS: usize = 4;
const COLORS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One panel: a configuration without the thread count.
struct Panel<'a> {
    title: String,
    /// Per strategy (plan order), per thread count (plan order): the
    /// measurement, if any.
    cells: Vec<Vec<Option<&'a Measured>>>,
}

fn panels<'a>(plan: &Plan, results: &'a [Vec<Measured>]) -> Vec<Panel<'a>> {
    let mut out: Vec<(super::Group, Panel<'a>)> = Vec::new();
    for group in results {
        let g = group[0].group;
        let key = super::Group { threads: 0, ..g };
        let idx = match out.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                let title = format!(
                    "{} x{}, batch {}, writer {}",
                    g.hook_name(),
                    g.chain,
                    g.batch,
                    if g.writer { "on" } else { "off" }
                );
                let cells = vec![vec![None; plan.threads.len()]; plan.strategies.len()];
                out.push((key, Panel { title, cells }));
                out.len() - 1
            }
        };
        let t = plan
            .threads
            .iter()
            .position(|&t| t == g.threads)
            .expect("group thread count is in the plan");
        for m in group {
            if let Some(s) = plan.strategies.iter().position(|&s| s == m.strategy) {
                out[idx].1.cells[s][t] = Some(m);
            }
        }
    }
    out.into_iter().map(|(_, p)| p).collect()
}

/// The SVG document.
pub fn render(plan: &Plan, machine: &Machine, results: &[Vec<Measured>]) -> String {
    let panels = panels(plan, results);
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for m in results.iter().flatten() {
        let s = m.sample();
        lo = lo.min(s.min());
        hi = hi.max(s.max());
    }
    if !(lo.is_finite() && lo > 0.0) {
        lo = 1.0;
    }
    if hi <= lo {
        hi = lo * 10.0;
    }
    let (d_lo, d_hi) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let d_hi = d_hi.max(d_lo + 1);
    let cols = COLUMNS.min(panels.len()).max(1);
    let rows = panels.len().div_ceil(cols).max(1);
    let width = cols as f64 * PANEL_W + 60.0;
    let height = HEADER_H + rows as f64 * PANEL_H + 10.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="16" font-weight="bold">pfil lock study: median ns/packet per thread by strategy and reader threads (log scale; whiskers: min-max of {} runs)</text>"#,
        plan.runs - 1
    );
    let _ = writeln!(
        s,
        r#"<text x="10" y="40" font-size="11">{} ({} cores), Linux {}; {} per run and thread; writer {} Hz; lower is better; unsync is the limit</text>"#,
        esc(&machine.cpu_model),
        machine.cores,
        esc(&machine.kernel),
        plan.work,
        plan.writer_hz
    );
    // Legend: one swatch per thread count.
    let mut x = 10.0;
    for (i, t) in plan.threads.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="52" width="12" height="12" fill="{}"/><text x="{}" y="62">{t} reader thread{}</text>"#,
            COLORS[i % COLORS.len()],
            x + 16.0,
            if *t == 1 { "" } else { "s" }
        );
        x += 120.0;
    }
    let plot_h = PANEL_H - MARGIN_T - MARGIN_B;
    let plot_w = PANEL_W - MARGIN_L - MARGIN_R;
    let y_of = |v: f64| -> f64 {
        let f = (v.max(10f64.powi(d_lo)).log10() - d_lo as f64) / (d_hi - d_lo) as f64;
        MARGIN_T + plot_h * (1.0 - f)
    };
    for (p, panel) in panels.iter().enumerate() {
        let ox = 10.0 + (p % cols) as f64 * PANEL_W;
        let oy = HEADER_H + (p / cols) as f64 * PANEL_H;
        let _ = writeln!(s, r#"<g transform="translate({ox},{oy})">"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="16" text-anchor="middle" font-weight="bold" font-size="12">{}</text>"#,
            MARGIN_L + plot_w / 2.0,
            esc(&panel.title)
        );
        // Grid and y axis: decades, with 2 and 5 as minor lines.
        for d in d_lo..=d_hi {
            for (k, major) in [(1.0, true), (2.0, false), (5.0, false)] {
                let v = k * 10f64.powi(d);
                if d == d_hi && k > 1.0 {
                    continue;
                }
                let y = y_of(v);
                let _ = writeln!(
                    s,
                    r##"<line x1="{MARGIN_L}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="{}" stroke-width="1"/>"##,
                    MARGIN_L + plot_w,
                    if major { "#bbbbbb" } else { "#eeeeee" }
                );
                if major {
                    let _ = writeln!(
                        s,
                        r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                        MARGIN_L - 4.0,
                        y + 4.0,
                        fmt_tick(v)
                    );
                }
            }
        }
        let _ = writeln!(
            s,
            r#"<text transform="translate(14,{:.1}) rotate(-90)" text-anchor="middle">ns/packet</text>"#,
            MARGIN_T + plot_h / 2.0
        );
        let _ = writeln!(
            s,
            r#"<line x1="{MARGIN_L}" x2="{MARGIN_L}" y1="{MARGIN_T}" y2="{}" stroke="black"/>"#,
            MARGIN_T + plot_h
        );
        let _ = writeln!(
            s,
            r#"<line x1="{MARGIN_L}" x2="{}" y1="{}" y2="{}" stroke="black"/>"#,
            MARGIN_L + plot_w,
            MARGIN_T + plot_h,
            MARGIN_T + plot_h
        );
        let n_s = plan.strategies.len().max(1);
        let n_t = plan.threads.len().max(1);
        let slot = plot_w / n_s as f64;
        let bar_w = (slot * 0.8) / n_t as f64;
        for (si, strategy) in plan.strategies.iter().enumerate() {
            let sx = MARGIN_L + si as f64 * slot;
            for ti in 0..n_t {
                let Some(m) = panel.cells[si][ti] else {
                    continue;
                };
                let sample = m.sample();
                let (med, mn, mx) = (sample.median(), sample.min(), sample.max());
                let bx = sx + slot * 0.1 + ti as f64 * bar_w;
                let y = y_of(med);
                let base = MARGIN_T + plot_h;
                let _ = writeln!(
                    s,
                    r#"<rect x="{bx:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} {} threads: median {:.2} ns/packet (min {:.2}, max {:.2})</title></rect>"#,
                    (bar_w - 1.0).max(1.0),
                    (base - y).max(0.5),
                    COLORS[ti % COLORS.len()],
                    strategy,
                    plan.threads[ti],
                    med,
                    mn,
                    mx
                );
                let cx = bx + (bar_w - 1.0) / 2.0;
                let _ = writeln!(
                    s,
                    r#"<line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="black" stroke-width="1"/>"#,
                    y_of(mx),
                    y_of(mn)
                );
            }
            let lx = sx + slot / 2.0;
            let ly = MARGIN_T + plot_h + 8.0;
            let _ = writeln!(
                s,
                r#"<text transform="translate({lx:.1},{ly:.1}) rotate(40)" font-size="10">{strategy}</text>"#
            );
        }
        s.push_str("</g>\n");
    }
    s.push_str("</svg>\n");
    s
}

fn fmt_tick(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}
