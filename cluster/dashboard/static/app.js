// The dashboard's pages: rendered from /api JSON, kept live by /api/watch (server-sent
// events). window.__kubeling records when the page got its data and each change, for the
// browser test's latency figures.
"use strict";
window.__kubeling = {snapshotAt: 0, updates: []};
const kubeling = (() => {
  const state = {nodes: [], deployments: [], pods: [], events: []};
  const palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                   "#9c755f", "#bab0ac"];

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c ?? "")));
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }

  function table(id, columns, rows, rowId) {
    const t = document.getElementById(id);
    t.replaceChildren(el("tr", {}, ...columns.map(([title]) => el("th", {}, title))));
    for (const row of rows) {
      const tr = el("tr", {"data-id": rowId(row)});
      for (const [, cell, cls] of columns) {
        const value = cell(row);
        tr.append(el("td", {class: cls ? cls(row) : ""}, value));
      }
      t.append(tr);
    }
    if (!rows.length) t.append(el("tr", {}, el("td", {colspan: columns.length}, "none")));
  }

  const key = (row) => (row.namespace ? row.namespace + "/" : "") + row.name;
  const age = (iso) => {
    if (!iso) return "";
    const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    return s < 120 ? s + "s" : s < 7200 ? Math.floor(s / 60) + "m" : Math.floor(s / 3600) + "h";
  };
  const podLink = (row) => el("a", {href: `/pods/${row.namespace}/${row.name}`}, row.name);

  const views = {
    nodes: () => table("nodes", [["NAME", (r) => r.name], ["STATUS", (r) => r.ready === "True" ? "Ready" : "NotReady",
      (r) => r.ready], ["ROLES", (r) => r.roles.join(",")], ["TAINTS", (r) => r.taints.join(" ")],
      ["ADDRESS", (r) => r.address], ["POD CIDR", (r) => r.podCIDR], ["AGE", (r) => age(r.created)]], state.nodes, key),
    deployments: () => table("deployments", [["NAMESPACE", (r) => r.namespace], ["NAME", (r) => r.name],
      ["READY", (r) => r.ready], ["UP-TO-DATE", (r) => r.upToDate], ["AVAILABLE", (r) => r.available],
      ["AGE", (r) => age(r.created)]], state.deployments, key),
    pods: () => table("pods", [["NAMESPACE", (r) => r.namespace], ["NAME", podLink], ["READY", (r) => r.ready],
      ["STATUS", (r) => r.status, (r) => r.status], ["RESTARTS", (r) => r.restarts], ["NODE", (r) => r.node],
      ["IP", (r) => r.ip], ["WHY", (r) => r.explained ? "recorded" : ""], ["AGE", (r) => age(r.created)]],
      state.pods, key),
    events: () => table("events", [["LAST", (r) => age(r.last)], ["TYPE", (r) => r.type, (r) => r.type],
      ["REASON", (r) => r.reason], ["OBJECT", (r) => r.object], ["MESSAGE", (r) => r.message, () => "msg"]],
      state.events.slice().reverse().slice(0, 50), key),
  };

  function showErrors(errors) {
    document.getElementById("errors").replaceChildren(
      ...Object.entries(errors || {}).map(([kind, why]) => el("div", {class: "error"}, `${kind}: ${why}`)));
  }

  function watch(onChange) {
    const live = document.getElementById("live");
    const source = new EventSource("/api/watch");
    source.onopen = () => { live.textContent = "live"; };
    source.onerror = () => { live.textContent = "reconnecting…"; };
    source.onmessage = (message) => onChange(JSON.parse(message.data));
    return source;
  }

  async function overview() {
    async function load() {
      const snapshot = await (await fetch("/api/snapshot")).json();
      for (const kind of Object.keys(state)) state[kind] = snapshot[kind];
      showErrors(snapshot.errors);
      for (const render of Object.values(views)) render();
      window.__kubeling.snapshotAt = Date.now();
    }
    await load();
    watch((change) => {
      if (change.op === "resync") { load(); return; }
      const rows = state[change.kind];
      const i = rows.findIndex((r) => key(r) === key(change.row));
      if (change.op === "delete") { if (i >= 0) rows.splice(i, 1); }
      else if (i >= 0) rows[i] = change.row;
      else { rows.push(change.row); if (change.kind !== "events") rows.sort((a, b) => key(a).localeCompare(key(b))); }
      views[change.kind]();
      window.__kubeling.updates.push({kind: change.kind, op: change.op, id: key(change.row), at: Date.now()});
    });
  }

  // The scheduler's recorded attempt as a chart: a row per node evaluated; a feasible
  // node's bar is its plugins' weighted scores end to end (the total at its end), a
  // filtered node's bar is grey with the plugin that rejected it; the winner starred.
  function whyChart(why) {
    const box = document.getElementById("why");
    if (!why) {
      box.replaceChildren(el("p", {}, "No recorded attempt: give the pod the annotation " +
        "scheduler.kubeling.io/record: \"true\" before it is scheduled (or turn on recordResults in its profile)."));
      return;
    }
    const color = (plugin) => palette[why.plugins.indexOf(plugin) % palette.length];
    const max = Math.max(1, ...why.nodes.map((n) => n.total || 0));
    const rowH = 26, labelW = 170, barW = 520, width = labelW + barW + 220;
    const chart = svg("svg", {class: "why", width, height: rowH * why.nodes.length + 10, role: "img",
                              "aria-label": "scheduling explanation"});
    why.nodes.forEach((n, i) => {
      const g = svg("g", {class: "node-row " + (n.feasible ? "feasible" : "rejected") + (n.selected ? " winner" : ""),
                          "data-node": n.node, transform: `translate(0, ${i * rowH + 4})`});
      g.append(svg("text", {class: "node-name", x: 0, y: 15}, (n.selected ? "★ " : "") + n.node));
      if (n.feasible && n.total == null) {  // the only feasible node: the scheduler scores nothing
        g.append(svg("rect", {class: "unscored", x: labelW, y: 2, width: barW, height: rowH - 8, fill: "#9fc5a8"}));
        g.append(svg("text", {class: "reason", x: labelW + 6, y: 15}, "the only feasible node: not scored"));
      } else if (n.feasible) {
        let x = labelW;
        for (const plugin of why.plugins) {
          const score = n.scores[plugin] || 0;
          const w = barW * score / max;
          if (w > 0) {
            g.append(svg("rect", {class: "score", "data-plugin": plugin, x, y: 2, width: w, height: rowH - 8,
                                  fill: color(plugin)}, svg("title", {}, `${plugin}: ${score}`)));
          }
          x += w;
        }
        g.append(svg("text", {class: "total", x: x + 6, y: 15}, String(n.total ?? "-")));
      } else {
        g.append(svg("rect", {class: "filtered", x: labelW, y: 2, width: barW, height: rowH - 8, fill: "#d0d4d9"}));
        g.append(svg("text", {class: "reason", x: labelW + 6, y: 15}, n.filter));
      }
      chart.append(g);
    });
    const legend = el("div", {class: "legend"}, ...why.plugins.map((p) =>
      el("span", {}, el("i", {style: `background:${color(p)}`}), p)));
    const summary = el("p", {}, `attempt ${why.attempt ?? "?"}: ` +
      (why.selected ? `selected ${why.selected}` : "no node fit") +
      Object.entries(why.rejected || {}).map(([reason, count]) => `; ${count} more node(s): ${reason}`).join(""));
    box.replaceChildren(summary, chart, legend);
  }

  // The pod's start from its trace: a row per span (indented by depth), a bar from its
  // start to its end on one time axis for the whole trace.
  async function startTimeline(namespace, name) {
    const box = document.getElementById("timeline");
    const reply = await fetch(`/api/pods/${namespace}/${name}/trace`);
    const body = await reply.json();
    if (!reply.ok) { box.replaceChildren(el("p", {class: "note"}, body.error)); return; }
    const spans = body.spans;
    const end = Math.max(1, ...spans.map((s) => s.startMs + s.durationMs));
    const rowH = 18, labelW = 380, barW = 560;
    const chart = svg("svg", {class: "timeline", width: labelW + barW + 90, height: rowH * spans.length + 24,
                              role: "img", "aria-label": "pod start timeline"});
    spans.forEach((s, i) => {
      const y = i * rowH;
      const g = svg("g", {class: "span", "data-service": s.service, "data-name": s.name});
      g.append(svg("text", {x: 4 + 10 * Math.min(s.depth, 12), y: y + 13}, `${s.service}: ${s.name}`.slice(0, 60)));
      const x = labelW + barW * s.startMs / end;
      g.append(svg("rect", {x, y: y + 3, width: Math.max(1, barW * s.durationMs / end), height: rowH - 6,
                            fill: palette[Math.abs([...s.service].reduce((h, c) => h * 31 + c.charCodeAt(0), 7))
                                          % palette.length]},
                   svg("title", {}, `${s.durationMs.toFixed(1)} ms from ${s.startMs.toFixed(1)} ms`)));
      chart.append(g);
    });
    chart.append(svg("text", {class: "axis", x: labelW, y: rowH * spans.length + 18},
                     `0 … ${end.toFixed(0)} ms, trace ${body.traceID}`));
    box.replaceChildren(chart);
  }

  async function podPage() {
    const [, , namespace, name] = location.pathname.split("/");
    document.getElementById("title").textContent = `${namespace}/${name}`;
    async function load() {
      const reply = await fetch(`/api/pods/${namespace}/${name}`);
      const body = await reply.json();
      if (!reply.ok) { showErrors({pod: body.error}); return; }
      const p = body.pod;
      table("summary", [["NODE", (r) => r.node], ["STATUS", (r) => r.status, (r) => r.status], ["READY", (r) => r.ready],
        ["RESTARTS", (r) => r.restarts], ["IP", (r) => r.ip], ["AGE", (r) => age(r.created)]], [p], key);
      table("containers", [["NAME", (r) => r.name], ["IMAGE", (r) => r.image], ["STATE", (r) => r.state, (r) => r.state],
        ["READY", (r) => r.ready], ["RESTARTS", (r) => r.restarts]], body.containers, (r) => r.name);
      table("conditions", [["TYPE", (r) => r.type], ["STATUS", (r) => r.status, (r) => r.status],
        ["REASON", (r) => r.reason], ["MESSAGE", (r) => r.message, () => "msg"]], body.conditions, (r) => r.type);
      whyChart(body.why);
      window.__kubeling.snapshotAt = window.__kubeling.snapshotAt || Date.now();
      return body;
    }
    async function logs(containers) {
      const box = document.getElementById("logs");
      const parts = [];
      for (const c of containers) {
        const reply = await fetch(`/api/pods/${namespace}/${name}/log?container=${encodeURIComponent(c.name)}&tail=100`);
        const text = reply.ok ? await reply.text() : (await reply.json()).error;
        parts.push(el("h3", {}, c.name), el("pre", {class: "log", "data-container": c.name}, text));
      }
      box.replaceChildren(...parts);
    }
    const body = await load();
    startTimeline(namespace, name);
    if (body) {
      await logs(body.containers);
      document.getElementById("refresh-logs").onclick = () => logs(body.containers);
    }
    watch((change) => {
      if (change.kind === "pods" && change.row.namespace === namespace && change.row.name === name) {
        load();
        window.__kubeling.updates.push({kind: "pods", op: change.op, id: `${namespace}/${name}`, at: Date.now()});
      }
    });
  }

  return {overview, podPage};
})();
