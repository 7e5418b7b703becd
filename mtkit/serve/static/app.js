// The mtkit web page: translates with POST /v1/translate (attention on) and shows each sentence
// shaded by confidence, alternatives, and the attention of the chosen sentence on hover; its Files
// tab sends a document to POST /translate_file and offers the translated file's download link.
"use strict";
const $ = (id) => document.getElementById(id);
const state = { models: [], translations: [], chosen: null, seq: 0, timer: null };

function shade(confidence) {
  const c = Math.max(0, Math.min(1, confidence));
  return `hsl(${Math.round(120 * c)}, 75%, 88%)`;
}

function tokenSpan(piece, cls) {
  const span = document.createElement("span");
  const start = piece.startsWith("\u2581");
  span.textContent = start ? piece.slice(1) || "\u2581" : piece;
  span.className = `token ${cls}${start ? " word-start" : ""}`;
  return span;
}

function setStatus(text, error = false) {
  $("status").textContent = text;
  $("status").className = error ? "status error" : "status";
}

async function init() {
  const [models, settings, languages] = await Promise.all([
    fetch("/v1/models").then((r) => r.json()),
    fetch("/frontend/settings").then((r) => r.json()),
    fetch("/languages").then((r) => r.json()),
  ]);
  state.models = models;
  for (const [i, m] of models.entries()) {
    const option = new Option(`${m.source} \u2192 ${m.target} (${m.name})`, String(i));
    $("pair").add(option);
  }
  $("apikey").hidden = !settings.keyRequired;
  $("source").addEventListener("input", () => {
    if (!$("live").checked) return;
    clearTimeout(state.timer);
    state.timer = setTimeout(translate, 350);
  });
  $("go").addEventListener("click", translate);
  $("pair").addEventListener("change", translate);
  $("alternatives").addEventListener("change", translate);
  $("tab-text").addEventListener("click", () => showTab("text"));
  $("tab-files").addEventListener("click", () => showTab("files"));
  if (settings.filesTranslation) initFiles(settings, languages);
}

function showTab(name) {
  for (const tab of ["text", "files"]) {
    $(`${tab}-panel`).hidden = tab !== name;
    $(`tab-${tab}`).classList.toggle("active", tab === name);
    $(`tab-${tab}`).setAttribute("aria-selected", String(tab === name));
  }
}

// The Files tab: the languages /languages lists (source "auto" too), the formats /frontend/settings
// names; shown only where the server translates files.
function initFiles(settings, languages) {
  $("tab-files").hidden = false;
  $("file-input").accept = settings.supportedFilesFormat.join(",");
  $("file-formats").textContent = `Formats: ${settings.supportedFilesFormat.join(" ")}`;
  $("file-source").add(new Option("detect", "auto"));
  const targets = new Set();
  for (const lang of languages) {
    $("file-source").add(new Option(lang.name ? `${lang.name} (${lang.code})` : lang.code, lang.code));
    lang.targets.forEach((t) => targets.add(t));
  }
  for (const code of [...targets].sort()) $("file-target").add(new Option(code, code));
  const first = state.models[0];
  if (first) { $("file-source").value = first.source; $("file-target").value = first.target; }
  $("file-go").addEventListener("click", translateFile);
}

function setFileStatus(text, error = false) {
  $("file-status").textContent = text;
  $("file-status").className = error ? "status error" : "status";
}

async function translateFile() {
  const file = $("file-input").files[0];
  $("file-link").hidden = true;
  if (!file) { setFileStatus("choose a file first", true); return; }
  const form = new FormData();
  form.append("file", file);
  form.append("source", $("file-source").value);
  form.append("target", $("file-target").value);
  if ($("apikey").value) form.append("api_key", $("apikey").value);
  setFileStatus(`translating ${file.name}\u2026`);
  const started = performance.now();
  let reply, data;
  try {
    reply = await fetch("/translate_file", { method: "POST", body: form });
    data = await reply.json();
  } catch (err) {
    setFileStatus(`the server did not answer (${err})`, true);
    return;
  }
  if (!reply.ok) { setFileStatus(data.error || `error ${reply.status}`, true); return; }
  const link = $("file-link");
  link.href = data.translatedFileUrl;
  link.download = file.name;
  link.textContent = `Download ${file.name}`;
  link.hidden = false;
  const detected = data.detectedLanguage ? `, detected ${data.detectedLanguage.language}` : "";
  setFileStatus(`translated in ${Math.round(performance.now() - started)} ms${detected}`);
}

async function translate() {
  const text = $("source").value;
  const seq = ++state.seq;
  if (!text.trim()) {
    $("output").textContent = "";
    $("alternatives-box").hidden = true;
    $("attention-box").hidden = true;
    setStatus("");
    return;
  }
  const model = state.models[Number($("pair").value)];
  const body = { text: text.split("\n"), model: model.name, attention: true,
                 nbest: Number($("alternatives").value) + 1 };
  if ($("apikey").value) body.api_key = $("apikey").value;
  setStatus("translating\u2026");
  const started = performance.now();
  let reply, data;
  try {
    reply = await fetch("/v1/translate", { method: "POST", headers: { "Content-Type": "application/json" },
                                            body: JSON.stringify(body) });
    data = await reply.json();
  } catch (err) {
    if (seq === state.seq) setStatus(`the server did not answer (${err})`, true);
    return;
  }
  if (seq !== state.seq) return; // a newer request is on its way
  if (!reply.ok) {
    setStatus(data.error || `error ${reply.status}`, true);
    return;
  }
  setStatus(`${Math.round(performance.now() - started)} ms, beam ${data.beam_size}`);
  render(data.translations);
}

function render(translations) {
  state.translations = translations;
  const output = $("output");
  output.textContent = "";
  let first = null;
  translations.forEach((line, li) => {
    if (li > 0) output.append("\n");
    line.sentences.forEach((s, si) => {
      if (si > 0) output.append(" ");
      const span = document.createElement("span");
      span.className = "sentence";
      span.textContent = s.text;
      span.dataset.line = li;
      span.dataset.sentence = si;
      if (s.confidence !== undefined) {
        span.style.background = shade(s.confidence);
        span.title = `confidence ${s.confidence.toFixed(2)}`;
        span.dataset.confidence = s.confidence;
      }
      span.addEventListener("click", () => choose(li, si));
      output.append(span);
      if (first === null && s.attention) first = [li, si];
    });
  });
  renderAlternatives(translations);
  if (first) choose(...first);
  else $("attention-box").hidden = true;
}

function renderAlternatives(translations) {
  const count = Number($("alternatives").value);
  const list = $("alternatives-list");
  list.textContent = "";
  if (!count) { $("alternatives-box").hidden = true; return; }
  const seen = new Set([translations.map((l) => l.text).join("\n")]);
  for (let k = 1; k <= count; k++) {
    const text = translations.map((line) => line.sentences.map((s) => {
      const nbest = s.nbest || [];
      return nbest.length ? nbest[Math.min(k, nbest.length - 1)].text : s.text;
    }).join(" ")).join("\n");
    if (seen.has(text)) continue;
    seen.add(text);
    const item = document.createElement("li");
    item.textContent = text;
    list.append(item);
  }
  $("alternatives-box").hidden = list.children.length === 0;
}

function choose(li, si) {
  const s = state.translations[li].sentences[si];
  document.querySelectorAll(".sentence.chosen").forEach((e) => e.classList.remove("chosen"));
  const span = document.querySelector(`.sentence[data-line="${li}"][data-sentence="${si}"]`);
  if (span) span.classList.add("chosen");
  if (!s.attention) { $("attention-box").hidden = true; return; }
  const target = $("att-target");
  const source = $("att-source");
  target.textContent = "";
  source.textContent = "";
  const srcSpans = s.source_tokens.map((piece, i) => {
    const span = tokenSpan(piece, "src-token");
    span.dataset.index = i;
    source.append(span);
    return span;
  });
  [...s.target_tokens, "</s>"].forEach((piece, j) => {
    const span = tokenSpan(piece, "tgt-token");
    span.dataset.index = j;
    span.addEventListener("mouseenter", () => highlight(s.attention[j], srcSpans, span));
    target.append(span);
  });
  $("attention-box").hidden = false;
}

// Shade every source subword by its share of the hovered target subword's attention; those with at
// least half of the largest weight are marked "attended".
function highlight(row, srcSpans, active) {
  document.querySelectorAll(".tgt-token.active").forEach((e) => e.classList.remove("active"));
  active.classList.add("active");
  const top = Math.max(...row, 1e-9);
  srcSpans.forEach((span, i) => {
    const share = (row[i] || 0) / top;
    span.style.background = `rgba(255, 153, 0, ${(0.85 * share).toFixed(3)})`;
    span.classList.toggle("attended", share >= 0.5);
    span.title = `attention ${(row[i] || 0).toFixed(3)}`;
  });
}

init().catch((err) => setStatus(`could not load the models (${err})`, true));
