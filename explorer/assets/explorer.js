// dirgate policy explorer: asks the decisions API for every decision on a group's
// members for one principal and shows them, differences highlighted. The token is
// pasted or comes from signing in (when the gateway serves sign-in); it lives in this
// page's memory (the token field) only: no storage, no cookie. Text from the server is
// only ever set as textContent.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const api = document.body.dataset.decisionsUrl;
  const sessionURL = document.body.dataset.sessionUrl; // "" when sign-in is not served
  const authURL = document.body.dataset.authUrl;
  const chunk = 250; // rows rendered per frame, so that 2,000 rows never freeze the page
  let renderId = 0;

  function setStatus(text) { $("status").textContent = text; }

  function showError(text) {
    const e = $("error");
    e.textContent = text;
    e.hidden = text === "";
  }

  function queryString() {
    const p = new URLSearchParams();
    p.set("subject", $("subject").value.trim());
    p.set("group", $("group").value.trim());
    p.set("includeIndirect", $("indirect").checked ? "true" : "false");
    return p.toString();
  }

  async function ask(draft) {
    const token = $("token").value;
    const init = {
      method: draft === null ? "GET" : "POST",
      headers: { "Adm-Authorization": token },
      credentials: "omit",
      cache: "no-store",
    };
    if (draft !== null) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify({ module: draft });
    }
    showError("");
    setStatus("Asking the policy…");
    let res;
    try {
      res = await fetch(api + "?" + queryString(), init);
    } catch (err) {
      setStatus("");
      showError("The request failed: " + err.message);
      return;
    }
    let body = null;
    try { body = await res.json(); } catch (_) { /* not JSON */ }
    if (!res.ok) {
      setStatus("");
      const msg = body && body.message ? body.message : res.statusText;
      showError(res.status + " " + (body && body.code ? body.code + ": " : "") + msg);
      return;
    }
    render(body);
  }

  // postJSON posts body as JSON and answers the response with its JSON body (null
  // when there is none).
  async function postJSON(url, body) {
    const res = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
    let data = null;
    try { data = await res.json(); } catch (_) { /* not JSON */ }
    return { res, data };
  }

  // refusal describes a refused sign-in from the product's error body,
  // {message, code, innerError: {message, code}}: both messages and the most
  // specific code.
  function refusal(res, body) {
    const inner = body && body.innerError && typeof body.innerError === "object" ? body.innerError : {};
    const parts = [];
    if (body && typeof body.message === "string") parts.push(body.message);
    if (typeof inner.message === "string" && inner.message !== "" && inner.message !== parts[0]) parts.push(inner.message);
    if (parts.length === 0) parts.push(res.statusText || "No answer.");
    const code = typeof inner.code === "string" && inner.code ? inner.code : body && typeof body.code === "string" ? body.code : "";
    return "Sign-in failed: " + parts.join(" ") + " (" + res.status + (code ? " " + code : "") + ")";
  }

  // signIn creates a session with the typed user name and password, exchanges it
  // for a token and puts the token in the token field. The password field is
  // emptied as soon as it is read; the session id and the password live in this
  // function's variables only.
  async function signIn(ev) {
    ev.preventDefault();
    const username = $("username").value.trim();
    const password = $("password").value;
    $("password").value = "";
    const status = $("signin-status");
    const error = $("signin-error");
    const button = $("signin-button");
    const fail = (text) => {
      status.textContent = "";
      error.textContent = text;
      error.hidden = false;
      $("password").focus();
    };
    status.textContent = "Signing in…";
    error.textContent = "";
    error.hidden = true;
    button.disabled = true;
    try {
      const s = await postJSON(sessionURL, { username, password });
      if (!s.res.ok || !s.data || typeof s.data.sessionId !== "string") {
        fail(refusal(s.res, s.data));
        return;
      }
      const a = await postJSON(authURL, { sessionId: s.data.sessionId });
      if (!a.res.ok || !a.data || typeof a.data.token !== "string") {
        fail(refusal(a.res, a.data));
        return;
      }
      $("token").value = a.data.token;
      signedIn = a.data.token;
      $("signout-button").hidden = false;
      const until = typeof a.data.expiresAtUtc === "string"
        ? a.data.expiresAtUtc.replace(/\.\d+Z$/, "").replace("T", " ") + " UTC" : "";
      status.textContent = "Signed in as " + username + "; your token is filled in below" +
        (until ? ", valid until " + until : "") + ".";
      $("subject").focus();
    } catch (err) {
      fail("Sign-in failed: the request failed: " + err.message);
    } finally {
      button.disabled = false;
    }
  }

  // signedIn is the token the last sign-in gave, for Sign out; "" when none.
  let signedIn = "";

  // signOut revokes the signed-in token on every replica (DELETE {base}/api/auth,
  // as the product's clients tear down) and empties the token field if it still
  // holds it.
  async function signOut() {
    const token = signedIn;
    const status = $("signin-status");
    const error = $("signin-error");
    if (!token) return;
    try {
      const res = await fetch(authURL + "?token=" + encodeURIComponent(token), {
        method: "DELETE",
        headers: { "Adm-Authorization": token },
        credentials: "omit",
        cache: "no-store",
      });
      if (!res.ok) {
        let body = null;
        try { body = await res.json(); } catch (_) { /* not JSON */ }
        error.textContent = "Sign-out failed: " + (body && typeof body.message === "string" ? body.message : res.statusText) + " (" + res.status + ")";
        error.hidden = false;
        return;
      }
    } catch (err) {
      error.textContent = "Sign-out failed: the request failed: " + err.message;
      error.hidden = false;
      return;
    }
    signedIn = "";
    if ($("token").value === token) $("token").value = "";
    $("signout-button").hidden = true;
    error.hidden = true;
    status.textContent = "Signed out: the token no longer works.";
    $("username").focus();
  }

  function decisionCell(tr, allowed, changed) {
    const td = document.createElement("td");
    td.textContent = allowed ? "allowed" : "denied";
    td.className = allowed ? "yes" : "no";
    if (changed) {
      td.classList.add("changed");
      td.dataset.changed = "true";
    }
    tr.appendChild(td);
  }

  function textCell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
  }

  function row(o, hasCandidate) {
    const tr = document.createElement("tr");
    tr.dataset.guid = o.guid;
    const c = o.candidate;
    const viewChanged = hasCandidate && c.view !== o.active.view;
    const removeChanged = hasCandidate && c.remove !== o.active.remove;
    if (viewChanged || removeChanged) {
      tr.className = "diff";
      tr.dataset.diff = "true";
    }
    textCell(tr, o.displayName);
    textCell(tr, o.objectType);
    textCell(tr, o.dn, "dn");
    decisionCell(tr, o.active.view, false);
    decisionCell(tr, o.active.remove, false);
    if (hasCandidate) {
      decisionCell(tr, c.view, viewChanged);
      decisionCell(tr, c.remove, removeChanged);
    } else {
      textCell(tr, "—");
      textCell(tr, "—");
    }
    const td = document.createElement("td");
    const ul = document.createElement("ul");
    ul.className = "reasons";
    for (const [action, list] of [["view", o.reasons.view], ["remove", o.reasons.remove]]) {
      for (const r of list || []) {
        const li = document.createElement("li");
        li.textContent = action + ": " + r;
        ul.appendChild(li);
      }
    }
    td.appendChild(ul);
    tr.appendChild(td);
    return tr;
  }

  function render(ex) {
    const id = ++renderId;
    const rows = $("rows");
    rows.replaceChildren();
    const hasCandidate = !!ex.candidateRevision;
    const objs = ex.objects || [];
    let diffs = 0;
    for (const o of objs) {
      if (hasCandidate && (o.candidate.view !== o.active.view || o.candidate.remove !== o.active.remove)) diffs++;
    }
    // With several domains a name can be in each: the subject's domain tells them apart.
    const who = (ex.subject.displayName || ex.subject.dn) + (ex.subject.domainName ? " (" + ex.subject.domainName + ")" : "");
    const cand = !hasCandidate ? "candidate none" : ex.candidateSource === "draft"
      ? "draft " + ex.candidateRevision.replace(/^draft-/, "") : "candidate " + ex.candidateRevision;
    $("caption").textContent = "Decisions for " + who + " on the members of " + (ex.group.displayName || ex.group.dn);
    $("summary").textContent = objs.length + " objects; active policy " + ex.activeRevision + ", " + cand +
      (hasCandidate ? "; " + diffs + " objects decided differently" : "");
    $("result").hidden = false;
    let i = 0;
    const step = () => {
      if (id !== renderId) return; // a newer answer replaced this one
      const frag = document.createDocumentFragment();
      const end = Math.min(i + chunk, objs.length);
      for (; i < end; i++) frag.appendChild(row(objs[i], hasCandidate));
      rows.appendChild(frag);
      applyFilter();
      if (i < objs.length) {
        setStatus("Showing " + i + " of " + objs.length + " objects…");
        requestAnimationFrame(step);
      } else {
        setStatus("Showing " + objs.length + " objects.");
        rows.dataset.complete = "true";
      }
    };
    rows.dataset.complete = "false";
    step();
  }

  function applyFilter() {
    const only = $("only-diff").checked;
    for (const tr of $("rows").children) tr.classList.toggle("hidden", only && tr.dataset.diff !== "true");
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("query").addEventListener("submit", (ev) => { ev.preventDefault(); ask(null); });
    $("try").addEventListener("click", () => {
      if (!$("query").reportValidity()) return;
      ask($("draft").value);
    });
    $("only-diff").addEventListener("change", applyFilter);
    const form = $("signin");
    if (form) {
      if (sessionURL && authURL) {
        form.addEventListener("submit", signIn);
        $("signout-button").addEventListener("click", signOut);
      }
      else form.hidden = true; // sign-in is not served
    }
  });
})();
