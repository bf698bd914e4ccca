package report

// exploreScript draws the interactive memory view of index.html from the
// JSON in <script id="bfcsim-data">: per trace, a memory map (address ×
// event) that zooms with the wheel, pans by dragging and resets on a
// double click, with a tooltip on the block under the pointer; a timeline
// of bytes in use and reserved whose click sets the cursor; and, at the
// cursor, the occupancy of every allocator side by side. window.bfcsimView
// exposes the views, for the browser tests. Plain ES2017, no library: the
// page works offline from file://.
const exploreScript = `(function () {
"use strict";
var el = document.getElementById("bfcsim-data");
if (!el) return;
var data = JSON.parse(el.textContent);
var UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
function bytes(n) {
  if (n < 1024) return n + " B";
  var u = 0;
  while (n >= 1024 && u < UNITS.length - 1) { n /= 1024; u++; }
  return (n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0)) + " " + UNITS[u];
}
function count(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
function hex(n) { return "0x" + n.toString(16); }
var COLORS = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d", "#eeca3b", "#ff9da6", "#79706e", "#bab0ac"];
var OTHER = "#c8d3de";
var STACK_LINES = 30;
// rankSites orders an allocator's call sites by the bytes × events their
// drawn blocks hold, so that the largest get the distinct colours.
function rankSites(b) {
  var weight = [], order = [], rank = [];
  for (var g = 0; g < b.Tags.length; g++) { weight.push(0); order.push(g); rank.push(-1); }
  for (var i = 0; i < b.A.length; i++) weight[b.G[i]] += b.S[i] * Math.max(b.E[i] - b.B[i], 1);
  order.sort(function (x, y) { return weight[y] - weight[x] || x - y; });
  for (var k = 0; k < order.length; k++) rank[order[k]] = k;
  return {order: order, rank: rank};
}

function View(sec, tr) {
  this.sec = sec; this.tr = tr; this.ai = 0; this.cursor = null; this.hover = -1;
  this.map = sec.querySelector("canvas.x-map");
  this.tl = sec.querySelector("canvas.x-timeline");
  this.tip = sec.querySelector(".x-tip");
  this.occ = sec.querySelector(".x-occ");
  this.pick = sec.querySelector("select.x-alloc");
  this.status = sec.querySelector(".x-status");
  this.colourPick = sec.querySelector("select.x-colour");
  this.legend = sec.querySelector(".x-legend");
  this.colourBy = "site";
  var self = this;
  this.pick.addEventListener("change", function () { self.setAllocator(+self.pick.value); });
  if (this.colourPick) this.colourPick.addEventListener("change", function () { self.setColour(self.colourPick.value); });
  this.map.addEventListener("wheel", function (ev) { ev.preventDefault(); self.zoomAt(ev); }, {passive: false});
  this.map.addEventListener("mousedown", function (ev) { self.drag = {x: ev.offsetX, y: ev.offsetY, v: Object.assign({}, self.v), moved: false}; });
  window.addEventListener("mouseup", function () { self.drag = null; });
  this.map.addEventListener("mousemove", function (ev) { self.move(ev); });
  this.map.addEventListener("mouseleave", function () { self.hideTip(); });
  this.map.addEventListener("dblclick", function () { self.reset(); self.draw(); });
  this.tl.addEventListener("click", function (ev) { self.setCursor(self.tlEvent(ev.offsetX)); });
  this.occRows = [];
  for (var i = 0; i < tr.allocators.length; i++) {
    var row = document.createElement("div");
    row.className = "x-occ-row";
    var label = document.createElement("div");
    label.className = "x-occ-label";
    var c = document.createElement("canvas");
    c.width = 960; c.height = 22; c.className = "x-occ-bar";
    row.appendChild(label); row.appendChild(c);
    this.occ.appendChild(row);
    this.occRows.push({label: label, canvas: c});
    c.addEventListener("mousemove", (function (k, canvas) {
      return function (ev) { canvas.title = self.occTip(k, ev); };
    })(i, c));
  }
  this.reset();
  this.draw();
}
View.prototype.alloc = function () { return this.tr.allocators[this.ai]; };
// colour returns the colour of block i of allocator a: by its call site
// (the largest sites apart, the rest alike) or by its size class.
View.prototype.colour = function (a, i) {
  var b = a.blocks;
  if (this.colourBy === "size") {
    var c = Math.floor(Math.log2(Math.max(b.S[i], 1)) / 2);
    return COLORS[c % COLORS.length];
  }
  if (!b.rank) b.rank = rankSites(b).rank;
  var r = b.rank[b.G[i]];
  return r < COLORS.length - 1 ? COLORS[r] : OTHER;
};
View.prototype.setColour = function (by) {
  this.colourBy = by; if (this.colourPick) this.colourPick.value = by; this.draw();
};
View.prototype.drawLegend = function () {
  if (!this.legend) return;
  var a = this.alloc(), b = a.blocks;
  this.legend.textContent = "";
  if (!b || this.colourBy !== "site") return;
  var ranked = rankSites(b).order;
  for (var k = 0; k < ranked.length && k < COLORS.length; k++) {
    var item = document.createElement("span"), sw = document.createElement("span");
    item.className = "x-key";
    sw.className = "x-swatch";
    sw.style.background = k < COLORS.length - 1 ? COLORS[k] : OTHER;
    item.appendChild(sw);
    item.appendChild(document.createTextNode(k < COLORS.length - 1 ? (b.Tags[ranked[k]] || "(no call site recorded)") :
      "the " + count(ranked.length - k) + " other call sites"));
    this.legend.appendChild(item);
  }
};
View.prototype.reset = function () {
  var a = this.alloc();
  this.v = {e0: 0, e1: Math.max(this.tr.events, 1), a0: 0, a1: Math.max(a.hi - a.lo, 1)};
};
View.prototype.setAllocator = function (i) {
  this.ai = i; this.pick.value = String(i); this.hover = -1; this.reset(); this.draw();
};
View.prototype.range = function () { return Object.assign({}, this.v); };
View.prototype.xOf = function (e) { return (e - this.v.e0) / (this.v.e1 - this.v.e0) * this.map.width; };
View.prototype.yOf = function (a) { return this.map.height - (a - this.v.a0) / (this.v.a1 - this.v.a0) * this.map.height; };
View.prototype.eventAt = function (x) { return this.v.e0 + x / this.map.width * (this.v.e1 - this.v.e0); };
View.prototype.addrAt = function (y) { return this.v.a0 + (this.map.height - y) / this.map.height * (this.v.a1 - this.v.a0); };
View.prototype.scale = function (ev) {
  var r = this.map.getBoundingClientRect();
  return {x: (ev.clientX - r.left) * this.map.width / r.width, y: (ev.clientY - r.top) * this.map.height / r.height};
};
View.prototype.zoomAt = function (ev) {
  var p = this.scale(ev), f = ev.deltaY < 0 ? 0.8 : 1.25;
  var e = this.eventAt(p.x), a = this.addrAt(p.y), v = this.v;
  v.e0 = e - (e - v.e0) * f; v.e1 = e + (v.e1 - e) * f;
  v.a0 = a - (a - v.a0) * f; v.a1 = a + (v.a1 - a) * f;
  if (v.e1 - v.e0 < 1) { v.e1 = v.e0 + 1; }
  if (v.a1 - v.a0 < 1) { v.a1 = v.a0 + 1; }
  this.draw();
};
View.prototype.move = function (ev) {
  var p = this.scale(ev);
  if (this.drag && (ev.buttons & 1)) {
    var d = this.drag, dx = (p.x - d.x) / this.map.width * (d.v.e1 - d.v.e0), dy = (p.y - d.y) / this.map.height * (d.v.a1 - d.v.a0);
    this.v = {e0: d.v.e0 - dx, e1: d.v.e1 - dx, a0: d.v.a0 + dy, a1: d.v.a1 + dy};
    this.hideTip(); this.draw();
    return;
  }
  this.showTip(p, ev);
};
View.prototype.blockAt = function (e, a) {
  var b = this.alloc().blocks;
  if (!b) return -1;
  for (var i = b.A.length - 1; i >= 0; i--) {
    if (e >= b.B[i] && e < b.E[i] && a >= b.A[i] && a < b.A[i] + b.S[i]) return i;
  }
  return -1;
};
View.prototype.tipText = function (i) {
  var a = this.alloc(), b = a.blocks, tag = b.Tags[b.G[i]];
  var lines = ["id " + b.I[i] + (tag ? " · " + tag : ""),
    "requested " + bytes(b.R[i]) + " · block " + bytes(b.S[i]),
    "address " + hex(a.lo + b.A[i]),
    "allocated at event " + count(b.B[i]) + (b.LA[i] ? " (line " + count(b.LA[i]) + ")" : "")];
  lines.push(b.LF[i] ? "freed at event " + count(b.E[i]) + " (line " + count(b.LF[i]) + ")" : "never freed");
  var k = b.K ? b.K[i] : -1;
  if (k >= 0 && this.tr.stacks) {
    var st = this.tr.stacks[k], fr = this.tr.frames, at = -1;
    for (var j = 0; j < st.length; j++) if (fr[st[j]] === tag) { at = j; break; }
    lines.push("stack, innermost first (" + count(st.length) + " frames" + (at >= 0 ? ", → the call site" : "") + "):");
    var line = function (j) {
      var f = fr[st[j]];
      return (j === at ? "→ " : "  ") + (f.length > 160 ? f.slice(0, 159) + "…" : f);
    };
    if (at < STACK_LINES) {
      for (j = 0; j < st.length && j < STACK_LINES; j++) lines.push(line(j));
      if (st.length > STACK_LINES) lines.push("  … " + count(st.length - STACK_LINES) + " more frames");
    } else {
      // The call site lies far out (past C++ frames): the innermost
      // frames, then those around it.
      var head = 6, from = at - 4, to = Math.min(st.length, at + STACK_LINES - head - 4);
      for (j = 0; j < head; j++) lines.push(line(j));
      lines.push("  … " + count(from - head) + " frames …");
      for (j = from; j < to; j++) lines.push(line(j));
      if (to < st.length) lines.push("  … " + count(st.length - to) + " more frames");
    }
  }
  return lines.join("\n");
};
View.prototype.showTip = function (p, ev) {
  var e = this.eventAt(p.x), addr = this.addrAt(p.y), a = this.alloc(), text = "";
  var i = this.blockAt(e, addr);
  if (i >= 0) {
    text = this.tipText(i);
  } else if (a.raster) {
    var g = a.raster, col = Math.floor(e / g.Width), row = Math.floor(addr / g.RowBytes);
    if (col >= 0 && col < g.Cols && row >= 0 && row < g.Rows) {
      text = g.U[row * g.Cols + col] + "% in use: events " + count(col * g.Width) + "–" + count((col + 1) * g.Width) +
        ", addresses " + hex(a.lo + row * g.RowBytes) + "– (summarised)";
    }
  }
  if (i !== this.hover) { this.hover = i; this.draw(); }
  if (!text) { this.hideTip(); return; }
  this.tip.textContent = text;
  this.tip.hidden = false;
  this.tip.style.left = (p.x / this.map.width * this.map.getBoundingClientRect().width + 14) + "px";
  this.tip.style.top = (p.y / this.map.height * this.map.getBoundingClientRect().height + 14) + "px";
};
View.prototype.hideTip = function () { this.tip.hidden = true; if (this.hover >= 0) { this.hover = -1; this.draw(); } };
View.prototype.draw = function () { this.drawMap(); this.drawTimeline(); this.drawOcc(); this.drawStatus(); this.drawLegend(); };
View.prototype.drawMap = function () {
  var c = this.map.getContext("2d"), a = this.alloc(), W = this.map.width, H = this.map.height;
  c.clearRect(0, 0, W, H);
  c.fillStyle = "#f7fafc"; c.fillRect(0, 0, W, H);
  if (a.raster) {
    var g = a.raster;
    for (var r = 0; r < g.Rows; r++) {
      for (var k = 0; k < g.Cols; k++) {
        var u = g.U[r * g.Cols + k] / 100;
        if (!u) continue;
        var cx0 = this.xOf(k * g.Width), cx1 = this.xOf((k + 1) * g.Width);
        var cy0 = this.yOf((r + 1) * g.RowBytes), cy1 = this.yOf(r * g.RowBytes);
        if (cx1 < 0 || cx0 > W || cy1 < 0 || cy0 > H) continue;
        c.fillStyle = "rgba(159,179,200," + u + ")";
        c.fillRect(cx0, cy0, Math.max(cx1 - cx0, 1), Math.max(cy1 - cy0, 1));
      }
    }
  }
  if (a.blocks) {
    var b = a.blocks;
    for (var i = 0; i < b.A.length; i++) {
      if (b.E[i] <= this.v.e0 || b.B[i] >= this.v.e1 || b.A[i] + b.S[i] <= this.v.a0 || b.A[i] >= this.v.a1) continue;
      var x0 = this.xOf(b.B[i]), x1 = this.xOf(b.E[i]), y0 = this.yOf(b.A[i] + b.S[i]), y1 = this.yOf(b.A[i]);
      c.fillStyle = i === this.hover ? "#d62728" : this.colour(a, i);
      c.fillRect(x0, y0, Math.max(x1 - x0, 1), Math.max(y1 - y0, 1));
    }
  }
  if (this.cursor !== null) {
    c.strokeStyle = "#222"; c.beginPath();
    var cx = this.xOf(this.cursor) + 0.5; c.moveTo(cx, 0); c.lineTo(cx, H); c.stroke();
  }
};
View.prototype.tlEvent = function (x) {
  var r = this.tl.getBoundingClientRect();
  return Math.max(0, Math.min(this.tr.events - 1, Math.floor(x / r.width * this.tr.events)));
};
View.prototype.drawTimeline = function () {
  var c = this.tl.getContext("2d"), a = this.alloc(), W = this.tl.width, H = this.tl.height, n = Math.max(this.tr.events, 1);
  c.clearRect(0, 0, W, H);
  var top = 1;
  for (var i = 0; i < a.v.length; i++) top = Math.max(top, a.v[i], a.u[i]);
  c.fillStyle = "rgba(47,111,159,0.08)";
  c.fillRect(this.v.e0 / n * W, 0, (this.v.e1 - this.v.e0) / n * W, H);
  var series = [[a.v, "#9fb3c8"], [a.u, "#2f6f9f"], [a.live, "#54a24b"]];
  for (var s = 0; s < series.length; s++) {
    c.strokeStyle = series[s][1]; c.beginPath();
    for (var j = 0; j < a.t.length; j++) {
      var x = a.t[j] / n * W, y = H - series[s][0][j] / top * (H - 4);
      if (j === 0) c.moveTo(x, y); else c.lineTo(x, y);
    }
    c.stroke();
  }
  if (this.cursor !== null) {
    c.strokeStyle = "#d62728"; c.beginPath();
    var cx = this.cursor / n * W + 0.5; c.moveTo(cx, 0); c.lineTo(cx, H); c.stroke();
  }
};
View.prototype.setCursor = function (e) {
  this.cursor = e;
  var v = this.v;
  if (e < v.e0 || e >= v.e1) { var w = v.e1 - v.e0; v.e0 = e - w / 2; v.e1 = e + w / 2; }
  this.draw();
};
// occupancyAt summarises allocator k's blocks live right after event e.
View.prototype.occupancyAt = function (k, e) {
  var a = this.tr.allocators[k], b = a.blocks, live = [], bytes = 0;
  if (b) {
    for (var i = 0; i < b.A.length; i++) {
      if (b.B[i] <= e && e < b.E[i]) { live.push(i); bytes += b.S[i]; }
    }
  }
  return {live: live, bytes: bytes};
};
View.prototype.drawOcc = function () {
  for (var k = 0; k < this.occRows.length; k++) {
    var row = this.occRows[k], a = this.tr.allocators[k], c = row.canvas.getContext("2d"), W = row.canvas.width, H = row.canvas.height;
    c.clearRect(0, 0, W, H);
    c.fillStyle = "#f0f4f8"; c.fillRect(0, 0, W, H);
    if (this.cursor === null) { row.label.textContent = a.name + ": click the timeline to see the address space at that moment"; continue; }
    var span = Math.max(a.hi - a.lo, 1), e = this.cursor;
    if (a.blocks && a.exact) {
      var o = this.occupancyAt(k, e), b = a.blocks;
      for (var j = 0; j < o.live.length; j++) {
        var i = o.live[j];
        c.fillStyle = this.colour(a, i);
        c.fillRect(b.A[i] / span * W, 0, Math.max(b.S[i] / span * W, 1), H);
      }
      row.label.textContent = a.name + " after event " + count(e) + ": " + count(o.live.length) + " blocks, " + bytes(o.bytes) + " in use";
    } else if (a.raster) {
      var g = a.raster, col = Math.min(g.Cols - 1, Math.floor(e / g.Width));
      for (var r = 0; r < g.Rows; r++) {
        var u = g.U[r * g.Cols + col] / 100;
        if (!u) continue;
        c.fillStyle = "rgba(76,120,168," + u + ")";
        c.fillRect(r * g.RowBytes / span * W, 0, Math.max(g.RowBytes / span * W, 1), H);
      }
      var ol = this.occupancyAt(k, e), bl = a.blocks;
      for (var q = 0; bl && q < ol.live.length; q++) {
        var m = ol.live[q];
        c.fillStyle = this.colour(a, m);
        c.fillRect(bl.A[m] / span * W, 0, Math.max(bl.S[m] / span * W, 1), H);
      }
      row.label.textContent = a.name + " around event " + count(e) + ": " + count(ol.live.length) + " of its largest blocks, " + bytes(ol.bytes) +
        ", over the share in use of the rest (summarised)";
    }
  }
};
// occTip names the block of allocator k under the pointer in its
// occupancy bar, at the cursor.
View.prototype.occTip = function (k, ev) {
  var a = this.tr.allocators[k], b = a.blocks;
  if (this.cursor === null || !b) return "";
  var r = ev.currentTarget.getBoundingClientRect(), addr = (ev.clientX - r.left) / r.width * Math.max(a.hi - a.lo, 1);
  var o = this.occupancyAt(k, this.cursor);
  for (var j = 0; j < o.live.length; j++) {
    var i = o.live[j];
    if (addr >= b.A[i] && addr < b.A[i] + b.S[i]) {
      var saved = this.ai; this.ai = k;
      var text = a.name + ": " + this.tipText(i);
      this.ai = saved;
      return text;
    }
  }
  return a.name + ": free or summarised here";
};
View.prototype.drawStatus = function () {
  var v = this.v;
  this.status.textContent = "events " + count(Math.max(0, Math.floor(v.e0))) + "–" + count(Math.ceil(v.e1)) +
    " · addresses " + bytes(Math.max(0, Math.floor(v.a0))) + "–" + bytes(Math.ceil(v.a1)) + " above " + hex(this.alloc().lo) +
    (this.cursor === null ? "" : " · cursor at event " + count(this.cursor));
};
// blockCenter returns the client coordinates of the middle of the visible
// part of the block with trace id, for tests: null if none is drawn.
View.prototype.blockCenter = function (id) {
  var b = this.alloc().blocks;
  if (!b) return null;
  for (var i = 0; i < b.I.length; i++) {
    if (b.I[i] !== id) continue;
    var x = (Math.max(this.xOf(b.B[i]), 0) + Math.min(this.xOf(b.E[i]), this.map.width)) / 2;
    var y = (Math.max(this.yOf(b.A[i] + b.S[i]), 0) + Math.min(this.yOf(b.A[i]), this.map.height)) / 2;
    var r = this.map.getBoundingClientRect();
    return {x: r.left + x * r.width / this.map.width, y: r.top + y * r.height / this.map.height};
  }
  return null;
};
var views = [];
for (var t = 0; t < data.traces.length; t++) {
  var sec = document.getElementById(data.traces[t].id + "-explore");
  if (sec) views.push(new View(sec, data.traces[t]));
}
var jumps = document.querySelectorAll("a.x-jump");
for (var j = 0; j < jumps.length; j++) {
  jumps[j].addEventListener("click", function (ev) {
    var a = ev.currentTarget;
    for (var k = 0; k < views.length; k++) {
      if (views[k].tr.id !== a.dataset.trace) continue;
      views[k].setAllocator(+a.dataset.alloc);
      views[k].setCursor(+a.dataset.event);
    }
  });
}
window.bfcsimView = {views: views, readyAt: performance.now(), find: function (id) { for (var k = 0; k < views.length; k++) if (views[k].tr.id === id) return views[k]; return null; }};
})();`
