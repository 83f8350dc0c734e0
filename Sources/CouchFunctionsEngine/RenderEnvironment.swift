/// The part of CouchDB's JavaScript environment that renders responses: `provides` and
/// `registerType` (content negotiation), `start`, `send` and `getRow` (the list API, also
/// usable in shows), and the drivers `FunctionRuntime+Rendering` calls for show, list,
/// update and rewrite functions. Written after CouchDB's query server (`render.js`,
/// `mimeparse.js`): the same answers, the same error names and reasons, the same order of
/// chunks. Evaluated after `JavaScriptEnvironment.prelude`.
enum RenderEnvironment {
    static let script = #"""
    (function(couchette) {
      // Media types by name; `registerType` adds to them for the current call only (they are
      // reset before each call, where CouchDB's long-lived process would keep them).
      var typesByName, nameByType;
      function registerType(name) {
        var types = Array.prototype.slice.call(arguments, 1);
        typesByName[name] = types;
        for (var i = 0; i < types.length; i++) { nameByType[types[i]] = name; }
      }
      function resetTypes() {
        typesByName = {}; nameByType = {};
        registerType("all", "*/*");
        registerType("text", "text/plain; charset=utf-8", "txt");
        registerType("html", "text/html; charset=utf-8");
        registerType("xhtml", "application/xhtml+xml", "xhtml");
        registerType("xml", "application/xml", "text/xml", "application/x-xml");
        registerType("js", "text/javascript", "application/javascript", "application/x-javascript");
        registerType("css", "text/css");
        registerType("ics", "text/calendar");
        registerType("csv", "text/csv");
        registerType("rss", "application/rss+xml");
        registerType("atom", "application/atom+xml");
        registerType("yaml", "application/x-yaml", "text/yaml");
        registerType("multipart_form", "multipart/form-data");
        registerType("url_encoded_form", "application/x-www-form-urlencoded");
        registerType("json", "application/json", "text/x-json");
      }

      // Accept-header matching (RFC 2616 section 14.1), ranked as CouchDB ranks it.
      function trim(text) { return text.replace(/^\s+/, "").replace(/\s+$/, ""); }
      function parseRange(text) {
        var parts = text.split(";"), params = {};
        for (var i = 0; i < parts.length; i++) {
          var pair = parts[i].split("=");
          if (pair.length == 2) { params[trim(pair[0])] = trim(pair[1]); }
        }
        var full = trim(parts[0]);
        if (full == "*") { full = "*/*"; }
        var q = parseFloat(params.q);
        if (!params.q || isNaN(q) || q > 1 || q < 0) { params.q = "1"; }
        var halves = full.split("/");
        return [halves[0], halves[1], params];
      }
      function fitness(type, ranges) {
        var target = parseRange(type), best = -1, bestQ = 0;
        for (var i = 0; i < ranges.length; i++) {
          var range = ranges[i];
          var typeMatches = range[0] == target[0] || range[0] == "*" || target[0] == "*";
          var subtypeMatches = range[1] == target[1] || range[1] == "*" || target[1] == "*";
          if (!typeMatches || !subtypeMatches) { continue; }
          var score = (range[0] == target[0] ? 100 : 0) + (range[1] == target[1] ? 10 : 0);
          for (var name in target[2]) {
            if (name != "q" && range[2][name] && range[2][name] == target[2][name]) { score += 1; }
          }
          if (score > best) { best = score; bestQ = range[2].q; }
        }
        return [best, parseFloat(bestQ)];
      }
      function bestMatch(supported, header) {
        var ranges = header.split(",").map(parseRange), ranked = [];
        for (var i = 0; i < supported.length; i++) { ranked.push([fitness(supported[i], ranges), i, supported[i]]); }
        // CouchDB sorts these entries as text; the last one wins when its quality is not 0.
        ranked.sort();
        var last = ranked[ranked.length - 1];
        return last && last[0][1] ? last[2] : "";
      }

      var providers, providesUsed, responseType;
      function provides(name, fun) { providesUsed = true; providers.push([name, fun]); }
      function resetProvides() { providers = []; providesUsed = false; responseType = null; }
      function runProvides(req, ddoc) {
        var accept = req.headers && req.headers["Accept"], chosen = null, fun;
        if (req.query && req.query.format) {
          chosen = req.query.format;
          responseType = typesByName[chosen][0];
        } else if (accept) {
          var supported = [];
          providers.reverse().forEach(function(provider) {
            if (typesByName[provider[0]]) { supported = supported.concat(typesByName[provider[0]]); }
          });
          responseType = bestMatch(supported, accept);
          chosen = nameByType[responseType];
        } else {
          chosen = providers[0][0];
          responseType = typesByName[chosen][0];
        }
        for (var i = 0; chosen && i < providers.length; i++) {
          if (providers[i][0] == chosen) { fun = providers[i][1]; break; }
        }
        if (fun) { return fun.call(ddoc); }
        var offered = providers.map(function(provider) {
          return (typesByName[provider[0]] || []).join(", ") || provider[0];
        });
        throw ["error", "not_acceptable",
               "Content-Type " + (accept || chosen) + " not supported, try one of: " + offered.join(", ")];
      }

      // The list API. Each flush is a message Swift reads back: ["start", chunks, response],
      // ["chunks", chunks(, response)], ["end", chunks(, response)].
      var chunks, startResponse, newHeader, gotRow, lastRow, messages, nextRow;
      function resetList() { chunks = []; startResponse = {}; newHeader = false; gotRow = false; lastRow = false; }
      function start(response) { startResponse = response || {}; newHeader = true; }
      function send(chunk) { chunks.push(chunk.toString()); }
      function withContentType(response) {
        response.headers = response.headers || {};
        if (responseType) { response.headers["Content-Type"] = response.headers["Content-Type"] || responseType; }
        return response;
      }
      function flushStart() {
        messages.push(["start", chunks, withContentType(startResponse || {})]);
        chunks = []; startResponse = {}; newHeader = false;
      }
      function flush(label) {
        messages.push(newHeader ? [label, chunks, startResponse] : [label, chunks]);
        newHeader = false; chunks = [];
      }
      function getRow() {
        if (lastRow) { return null; }
        if (!gotRow) { gotRow = true; flushStart(); } else { flush("chunks"); }
        var row = nextRow ? nextRow() : null;
        if (row === null || row === undefined) { lastRow = true; return null; }
        return row;
      }

      function wrap(response) { return typeof response == "string" ? {body: response} : response; }
      function kind(value) {
        if (value === null) { return "null"; }
        return Array.isArray(value) ? "array" : typeof value;
      }
      // What couchjs answers for an exception a function raised: errors it named pass through,
      // anything else becomes `render_error`.
      function renderError(e) {
        if (e && ((e.error && e.reason) || e[0] == "error")) { throw e; }
        if (e && e[0] == "fatal") { throw ["error", e[1], e[2]]; }
        var text = e && e.toString ? e.toString() : String(e);
        throw ["error", "render_error", "function raised error: " + text + " \nstacktrace: " + (e && e.stack)];
      }
      // `rows`: a view's rows, handed to `getRow` one at a time as CouchDB hands them to a list
      // (`id`, `key`, `value`, `doc` only).
      function begin(rows) {
        resetTypes(); resetProvides(); resetList(); messages = [];
        var index = 0;
        nextRow = rows ? function() {
          if (index >= rows.length) { return null; }
          var row = rows[index++], given = {};
          ["id", "key", "value", "doc"].forEach(function(name) { if (row[name] !== undefined) { given[name] = row[name]; } });
          return given;
        } : null;
      }

      couchette.runShow = function(fun, ddoc, doc, req) {
        begin();
        try {
          var response = wrap(fun.call(ddoc, doc, req) || {});
          if (chunks.length > 0) {
            response.headers = response.headers || {};
            for (var name in startResponse) { response.headers[name] = startResponse[name]; }
            response.body = chunks.join("") + (response.body || "");
            resetList();
          }
          if (providesUsed) {
            var provided = wrap(runProvides(req, ddoc) || {});
            response.body = (response.body || "") + chunks.join("");
            response.body += provided.body || "";
            response = withContentType(response);
            resetList();
          }
          var type = kind(response);
          if (type != "object" && type != "string") {
            throw ["error", "render_error", "undefined response from show function"];
          }
          return wrap(response);
        } catch (e) {
          if (doc === null && req.path && req.path.length > 5) { throw ["error", "not_found", "document not found"]; }
          renderError(e);
        }
      };

      couchette.runUpdate = function(fun, ddoc, doc, req) {
        begin();
        try {
          if (req.method == "GET") { throw ["error", "method_not_allowed", "Update functions do not allow GET"]; }
          var result = fun.call(ddoc, doc, req);
          var response = result[1], type = kind(response);
          if (type != "object" && type != "string") {
            throw ["error", "render_error", "undefined response from update function"];
          }
          return [result[0] === undefined ? null : result[0], wrap(response)];
        } catch (e) {
          renderError(e);
        }
      };

      // `view`: the view's answer (`total_rows`, `offset`, `update_seq`, `rows`).
      couchette.runList = function(fun, ddoc, view, req) {
        begin((view && view.rows) || []);
        var head = {};
        ["total_rows", "offset", "update_seq"].forEach(function(name) { if (view && view[name] !== undefined) { head[name] = view[name]; } });
        try {
          var tail = fun.call(ddoc, head, req);
          if (providesUsed) { tail = runProvides(req, ddoc); }
          if (!gotRow) { getRow(); }
          if (typeof tail != "undefined") { chunks.push(tail); }
          flush("end");
          return messages;
        } catch (e) {
          renderError(e);
        }
      };

      couchette.runRewrite = function(fun, ddoc, req) {
        begin();
        var result;
        try {
          result = fun.call(ddoc, req);
        } catch (e) {
          renderError(e);
        }
        if (!result) { return ["no_dispatch_rule"]; }
        if (typeof result == "string") { result = {path: result, method: req.method}; }
        return ["ok", result];
      };

      couchette.render = {
        registerType: registerType, provides: provides, start: start, send: send, getRow: getRow
      };
      resetTypes(); resetProvides(); resetList(); messages = [];
    })(__couchette);

    function start(response) { __couchette.render.start(response); }
    function send(chunk) { __couchette.render.send(chunk); }
    function getRow() { return __couchette.render.getRow(); }
    function provides(type, fun) { __couchette.render.provides(type, fun); }
    function registerType() { __couchette.render.registerType.apply(null, arguments); }
    """#
}
