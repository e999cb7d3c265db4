//! SVG, laid out here rather than by Graphviz, so that a diagram can be drawn at
//! compile time (the derive puts it on the enum's documentation page) with no tool
//! installed and nothing fetched: it shows offline and on docs.rs alike.
//!
//! The layout is a small layered one: states in columns by their distance from
//! the initial state, ordered within a column to bring each state near its
//! neighbours, moves forward drawn as curves between columns, moves back drawn as
//! arcs beneath everything. Good for the tables this crate is made for (tens of
//! states); Graphviz (`Format::Dot`) remains the tool for large ones.

use std::fmt::Write;

use fsm_model::{Machine, StateId, xml_escape};

use crate::drawing::{Drawing, View};
use crate::ident;

const FONT: f64 = 13.0;
const SMALL: f64 = 11.0;
const LABEL: f64 = 11.0;
const PAD_X: f64 = 12.0;
const PAD_Y: f64 = 8.0;
const LINE: f64 = 15.0;
const ROW_GAP: f64 = 26.0;
const MARGIN: f64 = 16.0;
const START_R: f64 = 6.0;
/// Between two arcs nested above (or below) the boxes: a label's height and more.
const ARC_GAP: f64 = 21.0;

/// A rough width of `text` in a sans-serif font of `size` pixels: enough room
/// for upper-case names, which are wider than average.
fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.62
}

/// A box of the layout: a state, or the start point (`state` None).
#[derive(Debug, Clone)]
struct Node {
    state: Option<StateId>,
    lines: Vec<String>,
    layer: usize,
    /// First (top) and last (bottom) of its column.
    first: bool,
    last: bool,
    x: f64,
    y: f64,
    w: f64,
    h: f64,
}

impl Node {
    fn cy(&self) -> f64 {
        self.y + self.h / 2.0
    }
}

/// The layout of a drawing: where every box is, before any path is drawn.
struct Layout {
    nodes: Vec<Node>,
    /// Edges as (from node, to node, label); the start's edge has no label.
    edges: Vec<(usize, usize, String)>,
}

fn layout(m: &Machine, d: &Drawing) -> Layout {
    // Node 0 is the start point; state nodes follow in the drawing's order.
    let mut nodes = vec![Node {
        state: None,
        lines: Vec::new(),
        layer: 0,
        first: false,
        last: false,
        x: 0.0,
        y: 0.0,
        w: START_R * 2.0,
        h: START_R * 2.0,
    }];
    for s in &d.states {
        let mut lines = vec![m.state(s.id).name.to_string()];
        lines.extend(s.notes.iter().map(|n| format!("({n})")));
        lines.extend(s.loops.iter().cloned());
        let w = lines
            .iter()
            .enumerate()
            .map(|(i, l)| text_width(l, if i == 0 { FONT } else { SMALL }))
            .fold(0.0, f64::max)
            + 2.0 * PAD_X;
        let h = 2.0 * PAD_Y + FONT + LINE * (lines.len() - 1) as f64;
        nodes.push(Node {
            state: Some(s.id),
            lines,
            layer: 0,
            first: false,
            last: false,
            x: 0.0,
            y: 0.0,
            w,
            h,
        });
    }
    let index = |id: StateId| nodes.iter().position(|n| n.state == Some(id));
    let mut edges = Vec::new();
    if let Some(initial) = index(m.initial()) {
        edges.push((0, initial, String::new()));
    }
    for e in &d.edges {
        if let (Some(from), Some(to)) = (index(e.from), index(e.to)) {
            edges.push((from, to, e.label.clone()));
        }
    }

    // Columns: the longest path from the start once the moves that close a cycle
    // (found depth first, in the table's order) are set aside, so that every
    // other move goes left to right; what cannot be reached goes last.
    let back = back_edges(nodes.len(), &edges);
    let mut layer: Vec<Option<usize>> = vec![None; nodes.len()];
    layer[0] = Some(0);
    // Relax in rounds: at most one per node, the graph without back edges being
    // acyclic.
    for _ in 0..nodes.len() {
        let mut changed = false;
        for (i, &(from, to, _)) in edges.iter().enumerate() {
            if back[i] {
                continue;
            }
            if let Some(l) = layer[from]
                && layer[to].is_none_or(|t| t < l + 1)
            {
                layer[to] = Some(l + 1);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let deepest = layer.iter().flatten().copied().max().unwrap_or(0);
    for (node, l) in nodes.iter_mut().zip(&layer) {
        node.layer = l.unwrap_or(deepest + 1);
    }
    let columns = nodes.iter().map(|n| n.layer).max().unwrap_or(0) + 1;

    // Order within columns: the table's order, then a few sweeps placing each
    // node at the mean rank of its neighbours in the columns already placed.
    let mut order: Vec<Vec<usize>> = vec![Vec::new(); columns];
    for (i, n) in nodes.iter().enumerate() {
        order[n.layer].push(i);
    }
    let neighbours = |i: usize| {
        edges
            .iter()
            .filter_map(move |&(a, b, _)| match (a == i, b == i) {
                (true, false) => Some(b),
                (false, true) => Some(a),
                _ => None,
            })
    };
    for sweep in 0..4 {
        let columns_in_turn: Vec<usize> = if sweep % 2 == 0 {
            (1..columns).collect()
        } else {
            (0..columns.saturating_sub(1)).rev().collect()
        };
        for c in columns_in_turn {
            let rank = |n: usize| {
                let l = nodes[n].layer;
                let pos = order[l].iter().position(|&x| x == n).unwrap_or(0);
                (pos as f64 + 0.5) / order[l].len() as f64
            };
            let mut keyed: Vec<(f64, usize, usize)> = order[c]
                .iter()
                .enumerate()
                .map(|(pos, &n)| {
                    let placed: Vec<f64> = neighbours(n)
                        .filter(|&o| nodes[o].layer != c)
                        .map(rank)
                        .collect();
                    let key = if placed.is_empty() {
                        (pos as f64 + 0.5) / order[c].len() as f64
                    } else {
                        placed.iter().sum::<f64>() / placed.len() as f64
                    };
                    (key, pos, n)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            order[c] = keyed.into_iter().map(|(_, _, n)| n).collect();
        }
    }

    // Coordinates: columns left to right, each wide enough for its boxes and,
    // after it, for the labels of the moves that leave it forward.
    let mut x = MARGIN;
    let heights: Vec<f64> = order
        .iter()
        .map(|col| {
            col.iter().map(|&n| nodes[n].h).sum::<f64>()
                + ROW_GAP * col.len().saturating_sub(1) as f64
        })
        .collect();
    let tallest = heights.iter().copied().fold(0.0, f64::max);
    for (c, col) in order.iter().enumerate() {
        let width = col.iter().map(|&n| nodes[n].w).fold(0.0, f64::max);
        let mut y = MARGIN + (tallest - heights[c]) / 2.0;
        for (pos, &n) in col.iter().enumerate() {
            nodes[n].first = pos == 0;
            nodes[n].last = pos + 1 == col.len();
            nodes[n].x = x + (width - nodes[n].w) / 2.0;
            nodes[n].y = y;
            y += nodes[n].h + ROW_GAP;
        }
        let label = edges
            .iter()
            .filter(|(a, b, _)| nodes[*a].layer == c && nodes[*b].layer > c)
            .map(|(_, _, l)| text_width(l, LABEL))
            .fold(0.0, f64::max);
        x += width + (label + 24.0).clamp(48.0, 400.0);
    }
    Layout { nodes, edges }
}

/// Which edges close a cycle: those that reach a node still on the stack of a
/// depth-first walk from the start, taking edges in their order.
fn back_edges(nodes: usize, edges: &[(usize, usize, String)]) -> Vec<bool> {
    let mut back = vec![false; edges.len()];
    // 0 unvisited, 1 on the stack, 2 done.
    let mut mark = vec![0u8; nodes];
    let mut roots: Vec<usize> = (0..nodes).collect();
    roots.sort_by_key(|&n| n != 0);
    for root in roots {
        if mark[root] != 0 {
            continue;
        }
        // The stack holds (node, next edge to look at).
        let mut stack = vec![(root, 0)];
        mark[root] = 1;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            match edges
                .iter()
                .enumerate()
                .skip(*next)
                .find(|(_, e)| e.0 == node)
            {
                Some((i, &(_, to, _))) => {
                    *next = i + 1;
                    match mark[to] {
                        0 => {
                            mark[to] = 1;
                            stack.push((to, 0));
                        }
                        1 => back[i] = true,
                        _ => {}
                    }
                }
                None => {
                    mark[node] = 2;
                    stack.pop();
                }
            }
        }
    }
    back
}

/// Each arc's level, 1 nearest the boxes: arcs above (moves over columns) and
/// arcs below (moves back) each numbered from the shortest to the longest, so
/// that a longer arc goes around a shorter one rather than across it.
fn arc_levels(nodes: &[Node], edges: &[(usize, usize, String)]) -> Vec<usize> {
    let mut levels = vec![0; edges.len()];
    for above in [true, false] {
        let mut arcs: Vec<(usize, f64, f64)> = edges
            .iter()
            .enumerate()
            .filter(|(_, (a, b, _))| {
                let (la, lb) = (nodes[*a].layer, nodes[*b].layer);
                if above { lb > la + 1 } else { lb <= la }
            })
            .map(|(i, (a, b, _))| {
                let (xa, xb) = (nodes[*a].x, nodes[*b].x);
                (i, (xa - xb).abs(), xa.min(xb))
            })
            .collect();
        arcs.sort_by(|x, y| x.1.total_cmp(&y.1).then(x.2.total_cmp(&y.2)));
        for (level, (i, ..)) in arcs.into_iter().enumerate() {
            levels[i] = level + 1;
        }
    }
    levels
}

/// The point at `t = 1/2` of a cubic Bézier curve.
fn midpoint(p: [(f64, f64); 4]) -> (f64, f64) {
    (
        (p[0].0 + 3.0 * p[1].0 + 3.0 * p[2].0 + p[3].0) / 8.0,
        (p[0].1 + 3.0 * p[1].1 + 3.0 * p[2].1 + p[3].1) / 8.0,
    )
}

/// `machine` in `view` as a self-contained SVG image: white background, its own
/// arrow marker, text in the document's sans-serif font.
pub fn svg(machine: &Machine, view: View) -> String {
    let d = Drawing::new(machine, view);
    let Layout { mut nodes, edges } = layout(machine, &d);
    // Room above the boxes for the arcs over columns.
    let arcs_above = edges
        .iter()
        .filter(|(a, b, _)| nodes[*b].layer > nodes[*a].layer + 1)
        .count();
    if arcs_above > 0 {
        let room = 18.0 + ARC_GAP * arcs_above as f64 + LABEL;
        for n in &mut nodes {
            n.y += room;
        }
    }
    let bottom = nodes.iter().map(|n| n.y + n.h).fold(0.0, f64::max);
    let right = nodes.iter().map(|n| n.x + n.w).fold(0.0, f64::max);

    // Paths first, to know how far below the boxes the arcs back reach.
    let mut paths = String::new();
    let mut labels = String::new();
    let top = nodes.iter().map(|n| n.y).fold(f64::MAX, f64::min);
    let mut below = bottom;
    let arcs = arc_levels(&nodes, &edges);
    for (i, (a, b, label)) in edges.iter().enumerate() {
        let (from, to) = (&nodes[*a], &nodes[*b]);
        // Parallel edges between the same two boxes are spread apart.
        let same: Vec<usize> = edges
            .iter()
            .enumerate()
            .filter(|(_, (x, y, _))| (x, y) == (a, b))
            .map(|(j, _)| j)
            .collect();
        let k = same.iter().position(|&j| j == i).unwrap_or(0) as f64;
        let spread = (k - (same.len() as f64 - 1.0) / 2.0) * 10.0;
        let points = if to.layer == from.layer + 1 {
            let (x1, y1) = (from.x + from.w, from.cy() + spread);
            let (x2, y2) = (to.x, to.cy() + spread);
            let dx = (x2 - x1) / 2.0;
            [(x1, y1), (x1 + dx, y1), (x2 - dx, y2), (x2, y2)]
        } else {
            // Over columns between, an arc above every box; back (or within a
            // column), an arc beneath. It leaves a box through the side facing the
            // arc when no box of its column stands in the way, else through the
            // side facing the way it goes; the label sits at the arc's far point.
            let up = to.layer > from.layer;
            let far = if up {
                top - 18.0 - ARC_GAP * arcs[i] as f64
            } else {
                bottom + 18.0 + ARC_GAP * arcs[i] as f64
            };
            let (open_from, open_to) = if up {
                (from.first, to.first)
            } else {
                (from.last, to.last)
            };
            let edge_y = |n: &Node, open: bool| match (open, up) {
                (true, true) => n.y,
                (true, false) => n.y + n.h,
                (false, _) => n.cy() + spread,
            };
            let (y1, y2) = (edge_y(from, open_from), edge_y(to, open_to));
            // Leaving sideways: rightwards when the arc goes right, else leftwards.
            let rightwards = to.x > from.x;
            let x1 = match (open_from, rightwards) {
                (true, _) => from.x + from.w / 2.0 + spread,
                (false, true) => from.x + from.w,
                (false, false) => from.x,
            };
            let x2 = match (open_to, rightwards) {
                (true, _) => to.x + to.w / 2.0 + spread,
                (false, true) => to.x,
                (false, false) => to.x + to.w,
            };
            let side = if rightwards { 40.0 } else { -40.0 };
            let c1x = if open_from { x1 } else { x1 + side };
            let c2x = if open_to { x2 } else { x2 - side };
            // Control points level with each other, placing the curve's midpoint
            // at `far`.
            let cy = (8.0 * far - y1 - y2) / 6.0;
            [(x1, y1), (c1x, cy), (c2x, cy), (x2, y2)]
        };
        let _ = writeln!(
            paths,
            r##"<path d="M{:.1},{:.1} C{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="none" stroke="#444" stroke-width="1.2" marker-end="url(#fsm-arrow-{})"/>"##,
            points[0].0,
            points[0].1,
            points[1].0,
            points[1].1,
            points[2].0,
            points[2].1,
            points[3].0,
            points[3].1,
            ident(machine.name()),
        );
        if !label.is_empty() {
            let (mx, my) = midpoint(points);
            let w = text_width(label, LABEL) + 6.0;
            below = below.max(my + LABEL);
            let _ = writeln!(
                labels,
                r##"<rect x="{:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" rx="3" fill="#fff" fill-opacity="0.9"/><text x="{mx:.1}" y="{:.1}" font-size="{LABEL}" text-anchor="middle" fill="#333">{}</text>"##,
                mx - w / 2.0,
                my - LABEL / 2.0 - 3.0,
                LABEL + 5.0,
                my + LABEL / 2.0 - 1.0,
                xml_escape(label),
            );
        }
    }
    let width = right.max(0.0) + MARGIN;
    let height = below + MARGIN;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" style="max-width:100%;height:auto" font-family="Helvetica,Arial,sans-serif" role="img" aria-label="state diagram of {}">"##,
        xml_escape(machine.name()),
    );
    let _ = writeln!(
        out,
        r##"<defs><marker id="fsm-arrow-{}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#444"/></marker></defs>"##,
        ident(machine.name()),
    );
    let _ = writeln!(out, r##"<rect width="100%" height="100%" fill="#fff"/>"##);
    out.push_str(&paths);
    for n in &nodes {
        let Some(id) = n.state else {
            let _ = writeln!(
                out,
                r##"<circle cx="{:.1}" cy="{:.1}" r="{START_R}" fill="#222"/>"##,
                n.x + START_R,
                n.cy()
            );
            continue;
        };
        let state = machine.state(id);
        let (fill, stroke, dash) = if state.is_transition() {
            ("#fff4d6", "#c98a00", r#" stroke-dasharray="4 3""#)
        } else if state.terminal {
            ("#e8e8e8", "#555", "")
        } else {
            ("#f4f8ff", "#3b5b8c", "")
        };
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" rx="8" fill="{fill}" stroke="{stroke}" stroke-width="1.3"{dash}/>"##,
            n.x, n.y, n.w, n.h
        );
        if state.terminal {
            let _ = writeln!(
                out,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" rx="6" fill="none" stroke="{stroke}"/>"##,
                n.x + 3.0,
                n.y + 3.0,
                n.w - 6.0,
                n.h - 6.0
            );
        }
        // An empty badge at the box's corner, for a page to write a count in
        // (`fsm serve` writes the number of objects in the state).
        let _ = writeln!(
            out,
            r##"<text class="fsm-count" data-state="{}" x="{:.1}" y="{:.1}" font-size="{SMALL}" font-weight="bold" text-anchor="end" fill="#b45309"></text>"##,
            xml_escape(&state.name),
            n.x + n.w - 6.0,
            n.y + SMALL + 1.0,
        );
        for (i, line) in n.lines.iter().enumerate() {
            let (size, weight) = if i == 0 {
                (FONT, "bold")
            } else {
                (SMALL, "normal")
            };
            let _ = writeln!(
                out,
                r##"<text x="{:.1}" y="{:.1}" font-size="{size}" font-weight="{weight}" text-anchor="middle" fill="#111">{}</text>"##,
                n.x + n.w / 2.0,
                n.y + PAD_Y + FONT - 2.0 + LINE * i as f64,
                xml_escape(line)
            );
        }
    }
    out.push_str(&labels);
    out.push_str("</svg>\n");
    out
}
