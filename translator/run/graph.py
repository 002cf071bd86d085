"""The model as a graph, for the reports (issue 26): a layered layout decided here and drawn
offline by the HTML report, and Model Explorer node data (one overlay per target) for
``report --graph`` / ``--serve``.

The layout is a layered (Sugiyama-style) drawing: a node's layer is its longest path from the
inputs, a node without inputs (a constant, a shape source) sits just above its first consumer,
nodes are ordered within a layer by the mean position of their neighbours (a few sweeps down
and up), then placed under their producers and pushed apart. It is linear in the edges per
sweep, so a model of a few thousand nodes lays out in well under a second, and the HTML only
draws what this computes (no layout in the browser, no network).

Model Explorer's node ids come from its own ONNX adapter (``model-explorer-onnx``, the
``opbridge[graph]`` extra): each IR node is matched to the adapter's node through its first
output tensor name, which the ONNX frontend keeps.
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterable

from ..ir.graph import Model

#: status → (the letter the HTML data spells it with, the word shown, its colour): the one
#: table the graph view, its legend and the Model Explorer overlays all read
STATUSES = {"native": ("n", "native", "#bfe8bf"), "decomposed": ("d", "decomposed", "#c9d8ff"),
            "legalized": ("l", "legalized", "#ffe9a8"), "folded": ("f", "folded", "#e4e4e4"),
            "unsupported": ("r", "refused", "#f7a8a8")}
COLOURS = {k: v[2] for k, v in STATUSES.items()}
NODE_W, NODE_H, GAP_X, GAP_Y = 150, 26, 24, 44
SWEEPS = 5  # odd: the last sweep is downwards, so a chain sits under its producer


def edges_of(model: Model) -> tuple[list[Any], list[tuple[int, int]]]:
    """The nodes in the report's order (``graph.walk()``) and the producer → consumer edges
    between them (a value read inside a subgraph links its outer producer too)."""
    nodes = list(model.graph.walk())
    made: dict[int, int] = {}
    for i, n in enumerate(nodes):
        for v in n.outputs:
            made[id(v)] = i
    edges = set()
    for j, n in enumerate(nodes):
        for v in n.inputs:
            i = made.get(id(v)) if v is not None else None
            if i is not None and i != j:
                edges.add((i, j))
    return nodes, sorted(edges)


def adjacency(n: int, edges: list[tuple[int, int]]) -> tuple[list[list[int]], list[list[int]]]:
    """(producers, consumers) of each of the ``n`` nodes."""
    pred: list[list[int]] = [[] for _ in range(n)]
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        pred[b].append(a)
        succ[a].append(b)
    return pred, succ


def layers(pred: list[list[int]], succ: list[list[int]]) -> list[int]:
    """Longest path from the sources (Kahn's order, so a cycle cannot hang it: a node left
    over keeps layer 0); a source with consumers moves down to just above its first consumer."""
    n = len(pred)
    indeg = [len(p) for p in pred]
    layer = [0] * n
    ready = [i for i in range(n) if indeg[i] == 0]
    k = 0
    while k < len(ready):
        i = ready[k]
        k += 1
        for j in succ[i]:
            layer[j] = max(layer[j], layer[i] + 1)
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    for i in range(n):
        if not pred[i] and succ[i]:
            layer[i] = max(0, min(layer[j] for j in succ[i]) - 1)
    return layer


def layout(model: Model) -> dict[str, Any]:
    """``{"nodes": [[x, y, op, name], ...], "edges": [[a, b], ...], "width", "height"}`` in
    the report's node order; x and y are the node's top-left corner."""
    nodes, edges = edges_of(model)
    n = len(nodes)
    pred, succ = adjacency(n, edges)
    layer = layers(pred, succ)
    depth = max(layer, default=-1) + 1
    rows: list[list[int]] = [[] for _ in range(depth)]
    for i in range(n):
        rows[layer[i]].append(i)
    step = NODE_W + GAP_X
    x = [0.0] * n
    for row in rows:
        for k, i in enumerate(row):
            x[i] = (k - (len(row) - 1) / 2) * step

    def place(row: list[int], near: list[list[int]]) -> None:
        want = {i: (sum(x[j] for j in near[i]) / len(near[i]) if near[i] else x[i]) for i in row}
        row.sort(key=lambda i: (want[i], x[i]))
        last = None
        for i in row:  # as near the neighbours as the spacing allows, left to right
            x[i] = want[i] if last is None else max(want[i], last + step)
            last = x[i]
        shift = sum(want[i] - x[i] for i in row) / len(row) if row else 0.0
        for i in row:
            x[i] += shift

    # a constant or other source beside the chain it feeds must not pull the chain sideways
    # (layer after layer, that drifts a straight network off to one side): producers that are
    # themselves computed set a node's place; the sources follow their consumers
    main_pred = [[j for j in pred[i] if pred[j]] or pred[i] for i in range(n)]
    for sweep in range(SWEEPS):
        order = rows if sweep % 2 == 0 else rows[::-1]
        for row in order:
            place(row, main_pred if sweep % 2 == 0 else succ)
    x0 = min(x, default=0.0)
    out = [[round(x[i] - x0, 1), layer[i] * (NODE_H + GAP_Y), nodes[i].op, nodes[i].name] for i in range(n)]
    width = max((p[0] for p in out), default=0.0) + NODE_W
    return {"nodes": out, "edges": [list(e) for e in edges], "width": width,
            "height": depth * (NODE_H + GAP_Y), "w": NODE_W, "h": NODE_H}


def html_data(model: Model, plans: Iterable[Any]) -> str:
    """The JSON the HTML graph view draws: the layout, and per target one status letter per
    node (``n``ative, ``d``ecomposed, ``l``egalized, ``f``olded, ``r``efused) and the reason of
    each refused node."""
    plans = list(plans)
    g = layout(model)
    g["key"] = {letter: [word, colour] for letter, word, colour in STATUSES.values()}
    g["targets"] = [p.backend for p in plans]
    g["status"] = {p.backend: "".join(STATUSES.get(q.status, STATUSES["native"])[0] for q in p.nodes) for p in plans}
    g["why"] = {p.backend: {str(i): f"{q.reason}: {q.detail}" for i, q in enumerate(p.nodes) if q.status == "unsupported"}
                for p in plans}
    # ``</script>`` inside a name must not end the data block: every "<" is escaped
    return json.dumps(g, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")


def legend_html() -> str:
    """The graph view's legend, from ``STATUSES``."""
    return " ".join(f"<i style='background:{colour}'></i>{word}" for _, word, colour in STATUSES.values())


# --- Model Explorer -------------------------------------------------------------------------------

def _adapter() -> Any:
    try:
        from model_explorer_onnx.main import ONNXAdapter
    except ImportError:
        from ..table.errors import OpbridgeError

        raise OpbridgeError("missing_dependency", "--graph writes Model Explorer node data through its ONNX adapter: "
                            "pip install 'opbridge[graph]' (ai-edge-model-explorer, model-explorer-onnx)") from None
    return ONNXAdapter()


def require_onnx(source: str) -> None:
    """Model Explorer overlays name nodes as its ONNX adapter does: ``--graph`` takes ONNX only."""
    if not source.lower().endswith(".onnx"):
        from ..table.errors import OpbridgeError

        raise OpbridgeError("bad_option", f"--graph needs an ONNX model (Model Explorer's ONNX adapter names the nodes); "
                            f"{os.path.basename(source)} is not one: use the HTML report's graph view (--html)")


def explorer_ids(source: str) -> dict[str, tuple[str, str]]:
    """Output tensor name → (graph id, node id) as Model Explorer's ONNX adapter names them."""
    import contextlib
    import io
    import logging

    logging.getLogger("model_explorer_onnx").setLevel(logging.ERROR)
    with contextlib.redirect_stdout(io.StringIO()):
        graphs = _adapter().convert(source, {})["graphs"]
    ids: dict[str, tuple[str, str]] = {}
    for g in graphs:
        for node in g.nodes:
            for md in node.outputsMetadata:
                for kv in md.attrs:
                    if kv.key == "__tensor_tag" and kv.value not in ("", "None"):
                        ids.setdefault(kv.value, (g.id, node.id))
    return ids


def explorer_overlays(source: str, model: Model, plans: Iterable[Any],
                      per_node: dict[str, list[dict[str, Any]]] | None = None) -> tuple[dict[str, dict[str, Any]], int]:
    """Model Explorer node data, one file's content per name: ``status-<target>`` (each node
    coloured by its status, the reason in its value) and, with ``per_node`` (``check
    --per-node``'s records by target), ``error-<target>`` (each compared node's max abs error,
    on a gradient). Also the number of report nodes the adapter's graph has no node for."""
    require_onnx(source)
    ids = explorer_ids(source)
    nodes = list(model.graph.walk())
    where = [ids.get(n.outputs[0].name) if n.outputs else None for n in nodes]
    unmatched = sum(1 for w in where if w is None)
    out: dict[str, dict[str, Any]] = {}
    for p in plans:
        graphs: dict[str, dict[str, Any]] = {}
        for w, q in zip(where, p.nodes):
            if w is None:
                continue
            label = "refused" if q.status == "unsupported" else q.status
            value = f"{label}: {q.reason}: {q.detail}" if q.status == "unsupported" else (
                f"{label}: {q.detail}" if q.detail and q.status != "folded" else label)
            graphs.setdefault(w[0], {"results": {}})["results"][w[1]] = {"value": value, "bgColor": COLOURS[q.status]}
        for gid, data in graphs.items():
            data["name"] = f"opbridge {p.backend}"
            data["showExpandedSummaryOnGroupNode"] = True
            data["showLabelCountColumnsInChildrenStatsTable"] = True
        out[f"status-{p.backend}"] = graphs
    for backend, recs in sorted((per_node or {}).items()):
        graphs = {}
        by_out = {r.get("value"): r for r in recs}
        for n, w in zip(nodes, where):
            r = by_out.get(n.outputs[0].name) if n.outputs else None
            if w is None or r is None or r.get("max_abs") is None:
                continue
            graphs.setdefault(w[0], {"results": {}})["results"][w[1]] = {"value": float(r["max_abs"])}
        for data in graphs.values():
            data["name"] = f"opbridge {backend} max abs error"
            data["gradient"] = [{"stop": 0, "bgColor": "#e8f5e9"}, {"stop": 1, "bgColor": "#e53935"}]
        out[f"error-{backend}"] = graphs
    return out, unmatched


def serve(source: str, overlay_files: list[str], port: int, open_browser: bool = True) -> None:
    """Model Explorer on ``source`` with the overlay files loaded (blocks until interrupted)."""
    _adapter()
    import model_explorer

    cfg = model_explorer.config()
    cfg.add_model_from_path(os.path.abspath(source))
    for f in overlay_files:
        cfg.add_node_data_from_path(os.path.abspath(f))
    model_explorer.visualize_from_config(config=cfg, port=port, no_open_in_browser=not open_browser,
                                         extensions=["model_explorer_onnx"])


#: the HTML report's graph view: the data block is ``html_data``'s JSON; the script only draws
#: what ``layout`` decided (one path for every edge, a rect + label per node), recolours the
#: nodes for the chosen target, zooms (wheel, +/-), pans (drag), and a click on a node shows
#: its statuses and scrolls its row of the node table into view.
GRAPH_HTML = """<h2>Graph</h2>
<div id='gv-bar'><label>target <select id='gv-t'></select></label>
<button id='gv-in' aria-label='zoom in'>+</button><button id='gv-out' aria-label='zoom out'>&minus;</button>
<button id='gv-fit'>fit</button>
<span class='gv-key'>{legend}</span></div>
<div id='gv-info' aria-live='polite'>Click a node to see it on every target.</div>
<svg id='gv' role='img' aria-label='the model graph, nodes coloured by their status on the chosen target'></svg>
<script type='application/json' id='gv-data'>{data}</script>
<script>
(function(){{
  var t0=performance.now(), svg=document.getElementById('gv'), NS=svg.namespaceURI;
  var G=JSON.parse(document.getElementById('gv-data').textContent);
  var C={{}}, WORD={{}};
  for(var key in G.key){{WORD[key]=G.key[key][0]; C[key]=G.key[key][1];}}
  var root=document.createElementNS(NS,'g'); svg.appendChild(root);
  var d=[], N=G.nodes, w=G.w, h=G.h;
  for(var k=0;k<G.edges.length;k++){{
    var a=N[G.edges[k][0]], b=N[G.edges[k][1]], x1=a[0]+w/2, y1=a[1]+h, x2=b[0]+w/2, y2=b[1], my=(y1+y2)/2;
    d.push('M'+x1+' '+y1+'C'+x1+' '+my+' '+x2+' '+my+' '+x2+' '+y2);
  }}
  var p=document.createElementNS(NS,'path'); p.setAttribute('d',d.join('')); p.setAttribute('class','gv-e'); root.appendChild(p);
  var rects=[], sel=null;
  for(var i=0;i<N.length;i++){{
    var g=document.createElementNS(NS,'g'), nd=N[i];
    g.setAttribute('transform','translate('+nd[0]+','+nd[1]+')'); g.setAttribute('data-i',i); g.setAttribute('class','gv-n');
    var r=document.createElementNS(NS,'rect'); r.setAttribute('width',w); r.setAttribute('height',h); r.setAttribute('rx',4);
    var tx=document.createElementNS(NS,'text'); tx.setAttribute('x',5); tx.setAttribute('y',17);
    var nm=nd[3].length>14?nd[3].slice(0,13)+'\\u2026':nd[3]; tx.textContent=nd[2]+' \\u00b7 '+nm;
    var ti=document.createElementNS(NS,'title'); ti.textContent=nd[3]+' ('+nd[2]+')';
    g.appendChild(r); g.appendChild(tx); g.appendChild(ti); root.appendChild(g); rects.push(r);
  }}
  var ts=document.getElementById('gv-t');
  for(var j=0;j<G.targets.length;j++){{var o=document.createElement('option'); o.value=o.textContent=G.targets[j]; ts.appendChild(o);}}
  function paint(){{var s=G.status[ts.value]||''; for(var i=0;i<rects.length;i++){{rects[i].setAttribute('fill',C[s.charAt(i)]||'#fff');}}}}
  ts.addEventListener('change',function(){{paint(); if(sel!==null){{show(sel);}}}});
  var v={{x:0,y:0,k:1}};
  function apply(){{root.setAttribute('transform','translate('+v.x+','+v.y+') scale('+v.k+')');
    svg.setAttribute('class',v.k<0.4?'gv-far':'');}}
  function fit(){{var W=svg.clientWidth||800, H=svg.clientHeight||560;
    v.k=Math.min(1,Math.max(0.01,Math.min(W/(G.width+20),H/(G.height+20)))); v.x=(W-G.width*v.k)/2; v.y=10; apply();}}
  function start(){{var W=svg.clientWidth||800;  // readable first: labels shown, the top of the graph, centred
    v.k=Math.min(1,Math.max(0.45,W/(G.width+20))); v.x=Math.max(10,(W-G.width*v.k)/2);
    if(G.width*v.k>W){{var c=0; for(var i=0;i<N.length&&i<50;i++){{c+=N[i][0];}} v.x=W/2-(c/Math.max(1,Math.min(50,N.length))+w/2)*v.k;}}
    v.y=10; apply();}}
  var touched=false;  // the first view follows the window's size until the user zooms or pans
  window.addEventListener('resize',function(){{if(!touched){{start();}}}});
  function zoom(f,cx,cy){{touched=true; var k=Math.min(4,Math.max(0.01,v.k*f)); v.x=cx-(cx-v.x)*k/v.k; v.y=cy-(cy-v.y)*k/v.k; v.k=k; apply();}}
  svg.addEventListener('wheel',function(e){{e.preventDefault(); var b=svg.getBoundingClientRect();
    zoom(e.deltaY<0?1.2:1/1.2,e.clientX-b.left,e.clientY-b.top);}},{{passive:false}});
  var drag=null;
  svg.addEventListener('mousedown',function(e){{drag={{x:e.clientX,y:e.clientY,vx:v.x,vy:v.y,moved:false}};}});
  window.addEventListener('mousemove',function(e){{if(!drag){{return;}} var dx=e.clientX-drag.x, dy=e.clientY-drag.y;
    if(Math.abs(dx)+Math.abs(dy)>3){{drag.moved=true; touched=true;}} v.x=drag.vx+dx; v.y=drag.vy+dy; apply();}});
  window.addEventListener('mouseup',function(e){{var m=drag&&drag.moved; drag=null; if(m){{return;}}
    var t=e.target&&e.target.closest?e.target.closest('g.gv-n'):null; if(t){{show(+t.getAttribute('data-i'));}}}});
  document.getElementById('gv-in').addEventListener('click',function(){{zoom(1.5,svg.clientWidth/2,svg.clientHeight/2);}});
  document.getElementById('gv-out').addEventListener('click',function(){{zoom(1/1.5,svg.clientWidth/2,svg.clientHeight/2);}});
  document.getElementById('gv-fit').addEventListener('click',fit);
  function show(i){{
    if(sel!==null){{rects[sel].removeAttribute('stroke');}} sel=i; rects[i].setAttribute('stroke','#000'); rects[i].setAttribute('stroke-width','3');
    var info=document.getElementById('gv-info'); info.textContent='';
    var b=document.createElement('b'); b.textContent=N[i][3]+' ('+N[i][2]+')'; info.appendChild(b);
    for(var j=0;j<G.targets.length;j++){{var t=G.targets[j], c=(G.status[t]||'').charAt(i);
      var s=document.createElement('span'); s.className='gv-s'; s.style.background=C[c]||'#fff';
      s.textContent=t+': '+(WORD[c]||'?')+((G.why[t]||{{}})[i]?' \\u2014 '+G.why[t][i]:''); info.appendChild(s);}}
    var row=document.getElementById('n'+i);
    if(row){{row.style.display=''; row.scrollIntoView({{block:'nearest'}}); row.classList.add('hit');
      setTimeout(function(){{row.classList.remove('hit');}},1500);}}
    else{{var f=document.getElementById('folded-all'); if(f){{f.open=true;}}}}
  }}
  paint(); start();
  document.documentElement.setAttribute('data-graph-nodes',String(N.length));
  document.documentElement.setAttribute('data-graph-ms',String(Math.round(performance.now()-t0)));
}})();
</script>
"""

GRAPH_CSS = """#gv{{width:100%;height:560px;border:1px solid #ccc;background:#fcfcfc;cursor:grab;display:block}}
.gv-e{{fill:none;stroke:#8a8a8a;stroke-width:1}} .gv-n text{{font:11px system-ui,sans-serif;fill:#222;pointer-events:none}}
.gv-n rect{{stroke:#777;stroke-width:.6}} .gv-far .gv-n text{{display:none}}
#gv-bar{{margin:6px 0;display:flex;gap:8px;align-items:center;flex-wrap:wrap}} #gv-bar button{{min-width:28px}}
.gv-key i{{display:inline-block;width:12px;height:12px;border:1px solid #999;margin:0 3px 0 8px;vertical-align:middle}}
#gv-info{{margin:4px 0;min-height:20px}} .gv-s{{display:inline-block;margin:2px 6px 2px 0;padding:1px 5px;border-radius:3px}}
tr.hit td{{outline:2px solid #000}}
"""
