//! Measured against predicted busbw over message size: a text chart for the terminal and
//! an SVG file. Sizes on a log2 axis (nccl-tests doubles them), busbw linear from 0.
//! The SVG is written by hand: two polylines and their axes do not justify a plotting
//! crate and its font and image dependencies.

use std::fmt::Write;

use crate::predict::Judged;

/// Rows of the text chart.
const HEIGHT: usize = 12;

fn top(sizes: &[Judged]) -> f64 {
    sizes
        .iter()
        .flat_map(|s| [Some(s.busbw), s.predicted_busbw])
        .flatten()
        .fold(0.0, f64::max)
        .max(1e-9)
}

/// `m` measured, `p` predicted, `*` both, one column per size.
pub fn text(sizes: &[Judged]) -> String {
    if sizes.is_empty() {
        return String::new();
    }
    let top = top(sizes);
    let row_of = |v: f64| ((v / top) * (HEIGHT - 1) as f64).round() as usize;
    let mut grid = vec![vec![' '; sizes.len()]; HEIGHT];
    for (x, s) in sizes.iter().enumerate() {
        if let Some(p) = s.predicted_busbw {
            grid[row_of(p)][x] = 'p';
        }
        let y = row_of(s.busbw);
        grid[y][x] = if grid[y][x] == 'p' { '*' } else { 'm' };
    }
    let mut out = String::new();
    for (i, row) in grid.iter().enumerate().rev() {
        let label = if i == HEIGHT - 1 || i == 0 || i == HEIGHT / 2 {
            format!("{:7.1}", top * i as f64 / (HEIGHT - 1) as f64)
        } else {
            String::new()
        };
        let _ = writeln!(out, "{label:>7} |{}", row.iter().collect::<String>());
    }
    let _ = writeln!(out, "{:>7} +{}", "GB/s", "-".repeat(sizes.len()));
    let first = human_size(sizes[0].size);
    let last = human_size(sizes[sizes.len() - 1].size);
    let gap = sizes.len().saturating_sub(first.len() + last.len()).max(1);
    let _ = writeln!(out, "{:>9}{first}{}{last}", "", " ".repeat(gap));
    let _ = writeln!(out, "{:>9}m measured busbw, p predicted, * both", "");
    out
}

/// The chart as an SVG document.
pub fn svg(sizes: &[Judged], title: &str) -> String {
    let (w, h, margin) = (720.0, 360.0, 56.0);
    let top = top(sizes);
    let n = sizes.len().max(2) as f64 - 1.0;
    let x = |i: usize| margin + (w - 2.0 * margin) * i as f64 / n;
    let y = |v: f64| h - margin - (h - 2.0 * margin) * v / top;
    let line = |values: Vec<(usize, f64)>| {
        values
            .iter()
            .map(|(i, v)| format!("{:.1},{:.1}", x(*i), y(*v)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let measured = line(
        sizes
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.busbw))
            .collect(),
    );
    let predicted = line(
        sizes
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, s.predicted_busbw?)))
            .collect(),
    );
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(out, "<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>");
    let _ = writeln!(out, "<text x=\"{margin}\" y=\"24\">{}</text>", xml(title));
    let _ = writeln!(
        out,
        "<path d=\"M{margin},{} V{} H{}\" stroke=\"black\" fill=\"none\"/>",
        margin,
        h - margin,
        w - margin
    );
    for k in 0..=4 {
        let v = top * f64::from(k) / 4.0;
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.1}</text>",
            margin - 6.0,
            y(v) + 4.0
        );
    }
    let step = (sizes.len() / 8).max(1);
    for (i, s) in sizes.iter().enumerate().step_by(step) {
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(i),
            h - margin + 18.0,
            human_size(s.size)
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">message size (bytes per rank)</text>",
        w / 2.0,
        h - 12.0
    );
    let _ = writeln!(
        out,
        "<text x=\"12\" y=\"{}\">busbw GB/s</text>",
        margin - 12.0
    );
    if !predicted.is_empty() {
        let _ = writeln!(
            out,
            "<polyline points=\"{predicted}\" fill=\"none\" stroke=\"#888\" stroke-dasharray=\"6 4\" stroke-width=\"2\"><title>predicted</title></polyline>"
        );
    }
    let _ = writeln!(
        out,
        "<polyline points=\"{measured}\" fill=\"none\" stroke=\"#1f5fbf\" stroke-width=\"2\"><title>measured</title></polyline>"
    );
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"24\" fill=\"#1f5fbf\">measured</text><text x=\"{}\" y=\"24\" fill=\"#888\">predicted</text>",
        w - 220.0,
        w - 150.0
    );
    out.push_str("</svg>\n");
    out
}

fn xml(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .map(|c| match c {
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '&' => "&amp;".to_string(),
            '"' => "&quot;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// `8 B`, `64 KiB`, `16 GiB`: nccl-tests' sizes are powers of two.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut unit = 0;
    while v >= 1024 && v % 1024 == 0 && unit < UNITS.len() - 1 {
        v /= 1024;
        unit += 1;
    }
    format!("{v}{}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::Verdict;

    fn sizes() -> Vec<Judged> {
        (0..20)
            .map(|i| Judged {
                size: 8 << i,
                time_us: 1.0,
                busbw: f64::from(i),
                predicted_busbw: Some(f64::from(i) * 1.2),
                ratio: None,
                verdict: Verdict::AtFabricLimit,
                wrong: 0,
            })
            .collect()
    }

    #[test]
    fn the_text_chart_draws_both_curves() {
        let t = text(&sizes());
        assert!(t.contains('m') && t.contains('p'), "{t}");
        assert!(t.contains("8B") && t.contains("4MiB"), "{t}");
        assert_eq!(t.lines().count(), HEIGHT + 3);
        assert_eq!(text(&[]), "");
    }

    #[test]
    fn the_svg_is_one_document_with_escaped_title() {
        let s = svg(&sizes(), "all_reduce <gpu-0001>\u{1b}[31m");
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("all_reduce &lt;gpu-0001&gt;[31m"));
        assert_eq!(human_size(16 << 30), "16GiB");
        assert_eq!(human_size(1000), "1000B");
    }
}
