//! The charts of `report.html` as interactive inline SVG, drawn here from the
//! same [`Chart`] description plotters draws the PNG/SVG exports from.
//!
//! Inline SVG with a small script (no charting library) keeps the page one
//! self-contained file that works offline: every mark is an SVG element
//! carrying its data (`data-x`, `data-y`, `data-tip`, a `<title>`), so the
//! page shows a chart before and without any script, tooltips read values
//! with their units straight from the element, and the script only moves
//! elements when the x axis is zoomed (wheel or drag; double-click resets)
//! and hides series when their legend entry is clicked. An embedded
//! Vega-Lite or Plotly would add 0.5–3.5 MB of minified JavaScript to every
//! report for the same three interactions.

use crate::chart::{tick, BarPlot, Chart, Mark, XyPlot};
use plotters::style::RGBColor;
use std::fmt::Write;

const W: f64 = 960.0;
const H: f64 = 540.0;
/// Plot area margins: left, right, top, bottom.
const ML: f64 = 78.0;
const MR: f64 = 24.0;
const MT: f64 = 64.0;
const MB: f64 = 58.0;
/// Most points a series draws as hoverable marks (the line keeps them all).
const MAX_MARKS: usize = 400;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn rgb(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// An axis label split into its name and unit: "TTFT p99 (ms, log scale)"
/// gives ("TTFT p99", "ms").
pub fn name_and_unit(label: &str) -> (String, String) {
    // "TTFT p99 (ms), log scale" says the scale after the unit.
    let label = label.strip_suffix(", log scale").unwrap_or(label);
    match label.rfind(" (") {
        Some(i) if label.ends_with(')') => {
            let unit = label[i + 2..label.len() - 1]
                .split(", log scale")
                .next()
                .unwrap_or("")
                .trim()
                .to_string();
            let unit = if unit == "log scale" {
                String::new()
            } else {
                unit
            };
            (label[..i].to_string(), unit)
        }
        _ => (label.to_string(), String::new()),
    }
}

/// A value with its unit, as a tooltip shows it.
fn with_unit(v: f64, unit: &str) -> String {
    let t = tick(v);
    match unit {
        "" => t,
        "%" => format!("{t} %"),
        u => format!("{t} {u}"),
    }
}

/// A linear or log axis over `(lo, hi)`.
#[derive(Clone, Copy)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    /// Where `v` falls, 0 at `lo` and 1 at `hi`.
    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.max(1e-300).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    /// Tick values: 1-2-5 steps (linear), decades and their 2s and 5s (log).
    fn ticks(&self, integer: bool) -> Vec<f64> {
        if self.log {
            let mut out = Vec::new();
            let (a, b) = (
                self.lo.log10().floor() as i32,
                self.hi.log10().ceil() as i32,
            );
            let steps: &[f64] = if b - a <= 3 { &[1.0, 2.0, 5.0] } else { &[1.0] };
            for e in a..=b {
                for m in steps {
                    let v = m * 10f64.powi(e);
                    if v >= self.lo && v <= self.hi {
                        out.push(v);
                    }
                }
            }
            return out;
        }
        let raw = (self.hi - self.lo) / 6.0;
        let mag = 10f64.powf(raw.log10().floor());
        let mut step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(raw);
        if integer {
            step = step.max(1.0).round();
        }
        let mut v = (self.lo / step).ceil() * step;
        let mut out = Vec::new();
        while v <= self.hi + step * 1e-9 && out.len() < 50 {
            out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
            v += step;
        }
        out
    }
}

fn px(a: &Axis, v: f64) -> f64 {
    ML + a.frac(v) * (W - ML - MR)
}

fn py(a: &Axis, v: f64) -> f64 {
    H - MB - a.frac(v) * (H - MT - MB)
}

fn frame(s: &mut String, name: &str, title: &str, extra: &str) {
    let _ = write!(
        s,
        "<svg class=\"ichart\" id=\"ichart-{n}\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"13\" data-pl=\"{ML}\" data-pr=\"{MR}\" data-pt=\"{MT}\" data-pb=\"{MB}\" {extra}><title>{t}</title>\
<rect x=\"0\" y=\"0\" width=\"{W}\" height=\"{H}\" fill=\"#fff\"/>\
<text x=\"{cx}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">{t}</text>",
        n = esc(name),
        t = esc(title),
        cx = W / 2.0
    );
}

/// One x/y chart.
pub fn xy_svg(p: &XyPlot) -> String {
    let ((x0, x1), (y0, y1)) = p.ranges();
    let xa = Axis {
        lo: x0,
        hi: x1,
        log: p.x_log,
    };
    let ya = Axis {
        lo: y0,
        hi: y1,
        log: p.y_log,
    };
    let (xname, xunit) = name_and_unit(&p.x_label);
    let (yname, yunit) = name_and_unit(&p.y_label);
    let mut s = String::new();
    frame(
        &mut s,
        &p.name,
        &p.title,
        &format!(
            "data-x0=\"{x0}\" data-x1=\"{x1}\" data-xlog=\"{}\" data-xint=\"{}\" data-zoomable=\"1\"",
            p.x_log as u8, p.x_integer as u8
        ),
    );
    let (l, r, t, b) = (ML, W - MR, MT, H - MB);
    // Grid and y ticks (the y axis does not zoom).
    for v in ya.ticks(false) {
        let y = py(&ya, v);
        let _ = write!(
            s,
            "<line x1=\"{l}\" x2=\"{r}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e6e6e6\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            l - 6.0,
            y + 4.0,
            tick(v)
        );
    }
    // The second scale, inside the plot's right edge (the margin is the
    // script's zoom frame).
    if let Some(y2) = &p.y2 {
        for v in ya.ticks(false) {
            if let Some(label) = y2.label_at(v) {
                let y = py(&ya, v);
                let _ = write!(
                    s,
                    "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#555\" font-size=\"11\">{}</text>",
                    r - 4.0,
                    y - 3.0,
                    esc(&label)
                );
            }
        }
        let _ = write!(
            s,
            "<text transform=\"translate({:.1},{:.1}) rotate(90)\" text-anchor=\"middle\" font-size=\"12\">{}</text>",
            W - 8.0,
            (t + b) / 2.0,
            esc(&y2.label)
        );
    }
    // X ticks: redrawn by the script on zoom.
    s.push_str("<g class=\"xticks\">");
    for v in xa.ticks(p.x_integer) {
        let x = px(&xa, v);
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{t}\" y2=\"{b}\" stroke=\"#f0f0f0\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            b + 18.0,
            tick(v)
        );
    }
    s.push_str("</g>");
    let _ = write!(
        s,
        "<rect x=\"{l}\" y=\"{t}\" width=\"{w}\" height=\"{h}\" fill=\"none\" stroke=\"#888\"/>\
<text x=\"{cx}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
<text transform=\"translate(18,{cy}) rotate(-90)\" text-anchor=\"middle\">{}</text>\
<clipPath id=\"clip-{n}\"><rect x=\"{l}\" y=\"{t}\" width=\"{w}\" height=\"{h}\"/></clipPath>\
<g class=\"plot\" clip-path=\"url(#clip-{n})\">",
        H - 14.0,
        esc(&p.x_label),
        esc(&p.y_label),
        w = r - l,
        h = b - t,
        cx = (l + r) / 2.0,
        cy = (t + b) / 2.0,
        n = esc(&p.name)
    );
    for rl in &p.ref_lines {
        let c = rgb(rl.color);
        let tip = esc(&format!(
            "{}: {}",
            rl.label,
            with_unit(rl.at, if rl.vertical { &xunit } else { &yunit })
        ));
        if rl.vertical {
            let x = px(&xa, rl.at);
            let _ = write!(
                s,
                "<line class=\"ref\" data-at=\"{}\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{t}\" y2=\"{b}\" stroke=\"{c}\" stroke-width=\"2\" stroke-dasharray=\"6 4\" data-tip=\"{tip}\"><title>{tip}</title></line>",
                rl.at
            );
        } else {
            let y = py(&ya, rl.at);
            let _ = write!(
                s,
                "<line class=\"ref-h\" x1=\"{l}\" x2=\"{r}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{c}\" stroke-width=\"2\" stroke-dasharray=\"6 4\" data-tip=\"{tip}\"><title>{tip}</title></line><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"{c}\" font-size=\"12\">{}</text>",
                r - 4.0,
                y - 4.0,
                esc(&rl.label)
            );
        }
    }
    for (k, se) in p.series.iter().enumerate() {
        let c = rgb(se.color);
        let _ = write!(
            s,
            "<g class=\"series\" data-series=\"{k}\" data-label=\"{}\">",
            esc(&se.label)
        );
        let pts: Vec<(f64, f64)> = se
            .points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        if matches!(se.mark, Mark::Line | Mark::LinePoints) && pts.len() > 1 {
            let data: Vec<String> = pts.iter().map(|(x, y)| format!("{x},{y}")).collect();
            let screen: Vec<String> = pts
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(&xa, x), py(&ya, y)))
                .collect();
            let _ = write!(
                s,
                "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"{}\" data-xy=\"{}\" points=\"{}\"/>",
                se.width,
                data.join(" "),
                screen.join(" ")
            );
        }
        // Hoverable marks: every point, or an even sample of a long line.
        let every = pts.len().div_ceil(MAX_MARKS).max(1);
        let visible = matches!(se.mark, Mark::Points | Mark::LinePoints);
        for (i, &(x, y)) in pts.iter().enumerate() {
            if i % every != 0 && i + 1 != pts.len() {
                continue;
            }
            let mut tip = format!(
                "{}{}{} {}, {} {}",
                se.label,
                if se.label.is_empty() { "" } else { ": " },
                xname,
                with_unit(x, &xunit),
                yname,
                with_unit(y, &yunit)
            );
            if let Some(extra) = se.tips.get(i).filter(|t| !t.is_empty()) {
                let _ = write!(tip, " — {extra}");
            }
            let tip = esc(&tip);
            let (fill, r) = if visible {
                (c.as_str(), 4.0)
            } else {
                ("transparent", 5.0)
            };
            let _ = write!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{r}\" fill=\"{fill}\" data-x=\"{x}\" data-y=\"{y}\" data-tip=\"{tip}\"><title>{tip}</title></circle>",
                px(&xa, x),
                py(&ya, y)
            );
        }
        s.push_str("</g>");
    }
    for h in &p.highlights {
        let tip = esc(&format!(
            "{}: {} {}, {} {}",
            h.label,
            xname,
            with_unit(h.at.0, &xunit),
            yname,
            with_unit(h.at.1, &yunit)
        ));
        let _ = write!(
            s,
            "<circle class=\"hl\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"9\" fill=\"none\" stroke=\"{}\" stroke-width=\"3\" data-x=\"{}\" data-y=\"{}\" data-tip=\"{tip}\"><title>{tip}</title></circle>",
            px(&xa, h.at.0),
            py(&ya, h.at.1),
            rgb(h.color),
            h.at.0,
            h.at.1
        );
    }
    s.push_str("</g>");
    // Legend: one entry per labelled series (click to hide or show it),
    // then the highlights and reference lines.
    let mut x = ML;
    let y = 46.0;
    for (k, se) in p
        .series
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.label.is_empty())
    {
        let _ = write!(
            s,
            "<g class=\"legend\" data-series=\"{k}\" style=\"cursor:pointer\"><title>click to hide or show</title><rect x=\"{x:.1}\" y=\"{:.1}\" width=\"14\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{y}\">{}</text></g>",
            y - 9.0,
            rgb(se.color),
            x + 18.0,
            esc(&se.label)
        );
        x += 30.0 + 7.0 * se.label.chars().count() as f64;
    }
    for h in &p.highlights {
        let _ = write!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/><text x=\"{:.1}\" y=\"{y}\">{}</text>",
            x + 6.0,
            y - 4.0,
            rgb(h.color),
            x + 16.0,
            esc(&h.label)
        );
        x += 28.0 + 7.0 * h.label.chars().count() as f64;
    }
    s.push_str("</svg>");
    s
}

/// One bar chart (hover a bar for its value).
pub fn bars_svg(b: &BarPlot) -> String {
    let (_, unit) = name_and_unit(&b.y_label);
    let hi = b
        .bars
        .iter()
        .map(|(_, v)| *v)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let ya = Axis {
        lo: 0.0,
        hi: if hi > 0.0 { hi * 1.08 } else { 1.0 },
        log: false,
    };
    let mut s = String::new();
    frame(&mut s, &b.name, &b.title, "");
    let (l, r, t, bt) = (ML, W - MR, MT, H - MB);
    for v in ya.ticks(false) {
        let y = py(&ya, v);
        let _ = write!(
            s,
            "<line x1=\"{l}\" x2=\"{r}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e6e6e6\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            l - 6.0,
            y + 4.0,
            tick(v)
        );
    }
    let n = b.bars.len().max(1) as f64;
    let slot = (r - l) / n;
    for (i, (label, v)) in b.bars.iter().enumerate() {
        let c = b
            .colors
            .get(i)
            .or(b.colors.last())
            .map_or("#0072b2".to_string(), |&c| rgb(c));
        let v = if v.is_finite() { *v } else { 0.0 };
        let (x, w) = (l + slot * i as f64 + slot * 0.15, slot * 0.7);
        let y = py(&ya, v);
        let more = b.tips.get(i).filter(|t| !t.is_empty());
        let tip = esc(&match more {
            Some(t) => format!("{label}: {} — {t}", with_unit(v, &unit)),
            None => format!("{label}: {}", with_unit(v, &unit)),
        });
        let _ = write!(
            s,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{c}\" data-tip=\"{tip}\"><title>{tip}</title></rect>",
            (bt - y).max(0.5)
        );
        if n <= 24.0 {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"12\">{}</text>",
                x + w / 2.0,
                bt + 16.0,
                esc(label)
            );
        }
    }
    let _ = write!(
        s,
        "<rect x=\"{l}\" y=\"{t}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#888\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text><text transform=\"translate(18,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text></svg>",
        r - l,
        bt - t,
        (l + r) / 2.0,
        H - 14.0,
        esc(&b.x_label),
        (t + bt) / 2.0,
        esc(&b.y_label)
    );
    s
}

/// The interactive SVG of `chart`.
pub fn svg(chart: &Chart) -> String {
    match chart {
        Chart::Xy(p) => xy_svg(p),
        Chart::Bars(b) => bars_svg(b),
    }
}

/// Collects script errors before anything else runs (the self-check
/// reports them).
pub const ERROR_HOOK: &str = "<script>window.__reportErrors=[];window.addEventListener('error',function(e){window.__reportErrors.push(String(e.message));});var __ce=console.error;console.error=function(){window.__reportErrors.push(Array.prototype.join.call(arguments,' '));__ce.apply(console,arguments);};</script>";

/// The page's script: tooltips on every `[data-tip]`, legend toggles, x-axis
/// zoom, sortable tables, and a self-check written onto `<body>` (charts
/// drawn, charts empty, script errors, and whether a hover showed a
/// tooltip, a zoom moved the axis and a legend click hid a series) that the
/// browser test reads.
pub const SCRIPT: &str = r#"<script>
(function(){
var errors=window.__reportErrors||[];
var tip=document.createElement('div');
tip.id='report-tooltip';
tip.style.cssText='position:absolute;display:none;background:#222;color:#fff;padding:3px 7px;border-radius:3px;font-size:12px;pointer-events:none;z-index:9;max-width:480px';
document.body.appendChild(tip);
function show(el,x,y){tip.textContent=el.getAttribute('data-tip');tip.style.display='block';tip.style.left=(x+12)+'px';tip.style.top=(y+12)+'px';}
document.querySelectorAll('[data-tip]').forEach(function(el){
 el.addEventListener('mousemove',function(e){show(el,e.pageX,e.pageY);});
 el.addEventListener('mouseleave',function(){tip.style.display='none';});
});
function ticks(lo,hi,log,integer){
 var out=[];
 if(log){var a=Math.floor(Math.log10(lo)),b=Math.ceil(Math.log10(hi)),st=b-a<=3?[1,2,5]:[1];
  for(var e=a;e<=b;e++)for(var k=0;k<st.length;k++){var v=st[k]*Math.pow(10,e);if(v>=lo&&v<=hi)out.push(v);}return out;}
 var raw=(hi-lo)/6,mag=Math.pow(10,Math.floor(Math.log10(raw))),step=raw;
 [1,2,5,10].some(function(m){if(m*mag>=raw){step=m*mag;return true;}return false;});
 if(integer)step=Math.max(1,Math.round(step));
 for(var v=Math.ceil(lo/step)*step;v<=hi+step*1e-9&&out.length<50;v+=step)out.push(Math.abs(v)<step*1e-9?0:v);
 return out;
}
function fmt(v){var a=Math.abs(v);if(a===0)return '0';if(a>=1e6)return +(v/1e6).toFixed(2)+'M';if(a>=1e4)return +(v/1e3).toFixed(1)+'k';if(a>=100)return v.toFixed(0);if(a>=1)return String(+v.toFixed(2));if(a>=1e-3)return String(+v.toFixed(4));return v.toExponential(1);}
function setup(svg){
 var W=960,H=540,pl=+svg.getAttribute('data-pl'),pr=+svg.getAttribute('data-pr'),pt=+svg.getAttribute('data-pt'),pb=+svg.getAttribute('data-pb');
 var log=svg.getAttribute('data-xlog')==='1',integer=svg.getAttribute('data-xint')==='1';
 var home=[+svg.getAttribute('data-x0'),+svg.getAttribute('data-x1')],dom=home.slice();
 var f=function(v){return log?(Math.log(Math.max(v,1e-300))-Math.log(dom[0]))/(Math.log(dom[1])-Math.log(dom[0])):(v-dom[0])/(dom[1]-dom[0]);};
 var X=function(v){return pl+f(v)*(W-pl-pr);};
 var inv=function(x){var u=(x-pl)/(W-pl-pr);return log?Math.exp(Math.log(dom[0])+u*(Math.log(dom[1])-Math.log(dom[0]))):dom[0]+u*(dom[1]-dom[0]);};
 var NS='http://www.w3.org/2000/svg';
 function draw(){
  svg.querySelectorAll('circle[data-x]').forEach(function(c){c.setAttribute('cx',X(+c.getAttribute('data-x')).toFixed(1));});
  svg.querySelectorAll('line.ref').forEach(function(l){var x=X(+l.getAttribute('data-at')).toFixed(1);l.setAttribute('x1',x);l.setAttribute('x2',x);});
  svg.querySelectorAll('polyline[data-xy]').forEach(function(p){
   var old=p.getAttribute('points').split(' ');
   p.setAttribute('points',p.getAttribute('data-xy').split(' ').map(function(xy,i){return X(+xy.split(',')[0]).toFixed(1)+','+old[i].split(',')[1];}).join(' '));});
  var g=svg.querySelector('g.xticks');while(g.firstChild)g.removeChild(g.firstChild);
  ticks(dom[0],dom[1],log,integer).forEach(function(v){var x=X(v);
   var l=document.createElementNS(NS,'line');l.setAttribute('x1',x);l.setAttribute('x2',x);l.setAttribute('y1',pt);l.setAttribute('y2',H-pb);l.setAttribute('stroke','#f0f0f0');g.appendChild(l);
   var t=document.createElementNS(NS,'text');t.setAttribute('x',x);t.setAttribute('y',H-pb+18);t.setAttribute('text-anchor','middle');t.textContent=fmt(v);g.appendChild(t);});
  svg.setAttribute('data-domain',dom[0]+','+dom[1]);
 }
 function local(e){var r=svg.getBoundingClientRect();return (e.clientX-r.left)*W/r.width;}
 svg.zoomAt=function(x,factor){
  var c=inv(x);
  if(log){var a=Math.log(c),lo=a+(Math.log(dom[0])-a)*factor,hi=a+(Math.log(dom[1])-a)*factor;dom=[Math.exp(lo),Math.exp(hi)];}
  else dom=[c+(dom[0]-c)*factor,c+(dom[1]-c)*factor];
  draw();
 };
 svg.resetZoom=function(){dom=home.slice();draw();};
 svg.addEventListener('wheel',function(e){e.preventDefault();svg.zoomAt(local(e),e.deltaY<0?0.8:1.25);},{passive:false});
 var start=null,band=null;
 svg.addEventListener('mousedown',function(e){if(e.target.closest('g.legend'))return;start=local(e);band=document.createElementNS(NS,'rect');band.setAttribute('y',pt);band.setAttribute('height',H-pt-pb);band.setAttribute('fill','rgba(0,114,178,0.12)');band.setAttribute('x',start);band.setAttribute('width',0);svg.appendChild(band);e.preventDefault();});
 svg.addEventListener('mousemove',function(e){if(start===null)return;var x=local(e);band.setAttribute('x',Math.min(start,x));band.setAttribute('width',Math.abs(x-start));});
 window.addEventListener('mouseup',function(e){if(start===null)return;var x=local(e);band.remove();if(Math.abs(x-start)>8){var a=inv(Math.min(start,x)),b=inv(Math.max(start,x));dom=[a,b];draw();}start=null;});
 svg.addEventListener('dblclick',function(){svg.resetZoom();});
 svg.setAttribute('data-domain',dom[0]+','+dom[1]);
}
document.querySelectorAll('svg.ichart[data-zoomable]').forEach(setup);
document.querySelectorAll('svg.ichart g.legend').forEach(function(item){
 item.addEventListener('click',function(){
  var svg=item.ownerSVGElement,k=item.getAttribute('data-series');
  var s=svg.querySelector('g.series[data-series="'+k+'"]');var hidden=s.style.display==='none';
  s.style.display=hidden?'':'none';item.style.opacity=hidden?'1':'0.35';
 });
});
document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){
  th.style.cursor='pointer';th.title='sort';
  th.addEventListener('click',function(){
   var asc=th.getAttribute('data-dir')!=='asc';th.setAttribute('data-dir',asc?'asc':'desc');
   var body=t.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
   rows.sort(function(a,b){var x=a.cells[i].textContent,y=b.cells[i].textContent,nx=parseFloat(x),ny=parseFloat(y);
    var c=(isNaN(nx)||isNaN(ny))?x.localeCompare(y):nx-ny;return asc?c:-c;});
   rows.forEach(function(r){body.appendChild(r);});
  });
 });
});
function selfCheck(){
 var b=document.body;
 var charts=document.querySelectorAll('figure svg'),broken=0;
 charts.forEach(function(s){var r=s.getBoundingClientRect();if(r.width<50||r.height<50||s.querySelectorAll('rect,path,polyline,line,circle').length<2)broken++;});
 b.setAttribute('data-charts',charts.length);
 b.setAttribute('data-charts-broken',broken);
 // A hover over the first chart mark shows its tooltip.
 var mark=document.querySelector('svg.ichart [data-tip]');
 if(mark){var r=mark.getBoundingClientRect();
  mark.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,clientX:r.left+r.width/2,clientY:r.top+r.height/2}));
  b.setAttribute('data-tooltip',tip.style.display==='block'&&tip.textContent===mark.getAttribute('data-tip')?tip.textContent:'');
  mark.dispatchEvent(new MouseEvent('mouseleave'));}
 // A wheel over a zoomable chart narrows its x axis; a double-click resets it.
 var z=document.querySelector('svg.ichart[data-zoomable]');
 if(z){var before=z.getAttribute('data-domain');var r2=z.getBoundingClientRect();
  z.dispatchEvent(new WheelEvent('wheel',{deltaY:-100,clientX:r2.left+r2.width/2,clientY:r2.top+r2.height/2,bubbles:true,cancelable:true}));
  var after=z.getAttribute('data-domain');z.resetZoom();
  b.setAttribute('data-zoom',before!==after&&z.getAttribute('data-domain')===before?'1':'0');}
 // A legend click hides its series; a second click shows it again.
 var item=document.querySelector('svg.ichart g.legend');
 if(item){var s=item.ownerSVGElement.querySelector('g.series[data-series="'+item.getAttribute('data-series')+'"]');
  item.dispatchEvent(new MouseEvent('click',{bubbles:true}));var hid=s.style.display==='none';
  item.dispatchEvent(new MouseEvent('click',{bubbles:true}));
  b.setAttribute('data-legend',hid&&s.style.display!=='none'?'1':'0');}
 b.setAttribute('data-errors',errors.length);
 b.setAttribute('data-error-text',errors.join(' | '));
}
if(document.readyState==='complete')selfCheck();else window.addEventListener('load',selfCheck);
// report.html#why-only shows the "why" section alone (for screenshots and links).
if(location.hash==='#why-only'){document.querySelectorAll('body>section').forEach(function(s){if(!s.querySelector('#why'))s.style.display='none';});}
})();
</script>"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::{RefLine, Series, PALETTE, TARGET};

    #[test]
    fn units_come_from_the_axis_label() {
        assert_eq!(
            name_and_unit("TTFT p99 (ms, log scale)"),
            ("TTFT p99".into(), "ms".into())
        );
        assert_eq!(name_and_unit("replicas"), ("replicas".into(), "".into()));
        assert_eq!(name_and_unit("x (log scale)"), ("x".into(), "".into()));
        assert_eq!(
            name_and_unit("TTFT p99 (ms), log scale"),
            ("TTFT p99".into(), "ms".into())
        );
    }

    #[test]
    fn marks_carry_their_values_units_and_settings() {
        let mut p = XyPlot::new("t", "T", "offered load (requests/s)", "SLO attainment (%)");
        let mut s = Series::new(
            "a",
            vec![(1.0, 96.0), (2.0, 99.5)],
            Mark::LinePoints,
            PALETTE[0],
        );
        s.tips = vec!["fleet.replicas = 4".into(), String::new()];
        p.series.push(s);
        p.ref_lines.push(RefLine {
            label: "target".into(),
            at: 99.0,
            vertical: false,
            color: TARGET,
        });
        p.y_range = Some((0.0, 105.0));
        let svg = xy_svg(&p);
        assert!(
            svg.contains("data-tip=\"a: offered load 1 requests/s, SLO attainment 96 % — fleet.replicas = 4\""),
            "{svg}"
        );
        assert!(svg.contains("<title>target: 99 %</title>"), "{svg}");
        assert!(svg.contains("class=\"legend\" data-series=\"0\""));
        // Fitted to the data: no tick at 0 or 50 on a 96–99.5 % chart.
        assert!(
            !svg.contains(">50</text>") && !svg.contains(">0</text>"),
            "{svg}"
        );
    }

    #[test]
    fn log_ticks_are_decades_or_their_multiples() {
        let a = Axis {
            lo: 3.0,
            hi: 3000.0,
            log: true,
        };
        assert_eq!(a.ticks(false), [10.0, 100.0, 1000.0]);
        let b = Axis {
            lo: 0.0,
            hi: 7.0,
            log: false,
        };
        assert_eq!(b.ticks(true), [0.0, 2.0, 4.0, 6.0]);
    }
}
