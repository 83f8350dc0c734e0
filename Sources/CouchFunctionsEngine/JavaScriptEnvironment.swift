/// CouchDB's JavaScript environment (its `couchjs` `main.js`, `util.js`, `render.js`),
/// evaluated once in every worker process: `emit`, `sum`, `toJSON`, `isArray`, `require` for
/// CommonJS modules in the design document; the show/list helpers (`start`, `send`, `getRow`,
/// `provides`, `registerType`) are in `RenderEnvironment`. `log` and the module compiler
/// (`__couchetteCompileModule`, which the prelude takes out of the global scope) are native
/// (`ScriptContext`). The state a call leaves behind lives in `__couchette` and is reset
/// before each call that uses it.
enum JavaScriptEnvironment {
    static let prelude = #"""
    var __couchette = (function() {
      var state = { emitted: [] };
      state.reset = function() { state.emitted = []; };
      // CommonJS modules from the design document, resolved as CouchDB's util.js resolves
      // them: a path from the design document's root, or relative to the requiring module
      // ("./x" beside it, "../x" one level up); `module.id` is the path from the root. A
      // module runs once per function (its exports are cached); a circular require gets the
      // exports as they are so far. Modules are compiled by the embedder (`compileModule`):
      // eval() is disabled, as in CouchDB.
      var compileModule = __couchetteCompileModule;
      delete this.__couchetteCompileModule;
      function requirePathError(reason) { return ["error", "invalid_require_path", reason]; }
      function resolveModule(names, mod, root) {
        if (names.length == 0) {
          if (typeof mod.current != "string") {
            throw requirePathError("Must require a JavaScript string, not: " + (typeof mod.current));
          }
          return {current: mod.current, parent: mod.parent, id: mod.id, exports: {}};
        }
        var n = names.shift();
        if (n == "..") {
          if (!(mod && mod.parent && mod.parent.parent)) {
            throw requirePathError("Object has no parent " + JSON.stringify(mod && mod.current));
          }
          return resolveModule(names, {id: mod.id.slice(0, mod.id.lastIndexOf("/")), parent: mod.parent.parent,
                                       current: mod.parent.current});
        } else if (n == ".") {
          if (!(mod && mod.parent)) {
            throw requirePathError("Object has no parent " + JSON.stringify(mod && mod.current));
          }
          return resolveModule(names, {parent: mod.parent, current: mod.current, id: mod.id});
        } else if (root) {
          mod = {current: root};
        }
        if (mod.current === null || typeof mod.current != "object" || mod.current[n] === undefined) {
          throw requirePathError("Object has no property \"" + n + "\". " + JSON.stringify(mod.current));
        }
        return resolveModule(names, {current: mod.current[n], parent: mod, id: mod.id ? mod.id + "/" + n : n});
      }
      state.makeRequire = function(ddoc) {
        var cache = {};
        function require(name, module) {
          var resolved = resolveModule(String(name).split("/"), module && module.parent, ddoc);
          if (!Object.prototype.hasOwnProperty.call(cache, resolved.id)) {
            cache[resolved.id] = resolved.exports;
            try {
              var body = compileModule("(function (module, exports, require) { " + resolved.current + "\n })", resolved.id);
              body.call(null, resolved, resolved.exports, function(name) { return require(name, resolved); });
            } catch (e) {
              delete cache[resolved.id];
              throw ["error", "compilation_error", "Module require('" + name + "') raised error " + String(e)];
            }
            cache[resolved.id] = resolved.exports;
          }
          return cache[resolved.id];
        }
        return function(name) { return require(name); };
      };
      // CoffeeScript source as JavaScript (the compiler is loaded on first use).
      state.transpileCoffee = function(source) {
        return state.coffeeScript.compile(source, {bare: true});
      };
      // A filter over a batch of documents in one entry into the engine: "1" or "0" each.
      state.filterBatch = function(filter, docs, req) {
        var passed = "";
        for (var i = 0; i < docs.length; i++) { passed += filter(docs[i], req) ? "1" : "0"; }
        return passed;
      };
      // Validations of several writes in one entry into the engine: for each entry
      // [newDoc, oldDoc, userCtx], "pass" when every function passed it, else the JSON text
      // of what the first that refused threw ({"thrown": value}), of the Error it raised
      // ({"error": [name, message]}), or {"unserializable": true} for a throw JSON cannot
      // carry (a Symbol, a function, an object whose toJSON returns nothing). It fails
      // closed: only the literal "pass" passes, and nothing functions leave behind (a
      // replaced JSON, Object.defineProperty, prototypes' toJSON or index setters) can turn
      // a refusal into one: the originals are taken here, before any function runs, and the
      // answer carries its own toJSON (none).
      var stringify = JSON.stringify, define = Object.defineProperty;
      function outcome(error) {
        try {
          if (error && error.name && error.stack) { return stringify({error: [String(error.name), String(error.message)]}); }
          var text = stringify(error === undefined ? null : error);
          if (typeof text !== "string") { return '{"unserializable":true}'; }
          return '{"thrown":' + text + '}';
        } catch (e) {
          return '{"unserializable":true}';
        }
      }
      state.validateBatch = function(functions, entries, secObj) {
        var results = [];
        define(results, "toJSON", {value: undefined});
        for (var i = 0; i < entries.length; i++) {
          var entry = entries[i], result = "pass";
          for (var j = 0; j < functions.length && result === "pass"; j++) {
            try {
              functions[j](entry[0], entry[1], entry[2], secObj);
            } catch (error) {
              result = outcome(error);
            }
          }
          define(results, i, {value: result, enumerable: true, writable: true, configurable: true});
        }
        return results;
      };
      // Every map function over every document of a batch, `emit` collecting each one's
      // rows; a function's rows for a document are {error} when it threw (its rows before the
      // throw are dropped, as couchjs drops them). Documents are frozen when several functions
      // share them, so one view cannot change what the next sees.
      state.mapBatch = function(funs, docs, seal) {
        function freeze(value) {
          if (value !== null && typeof value == "object" && !Object.isFrozen(value)) {
            Object.freeze(value);
            for (var k in value) { freeze(value[k]); }
          }
        }
        var out = [];
        for (var i = 0; i < docs.length; i++) {
          var doc = docs[i], results = [];
          if (seal) { freeze(doc); }
          for (var j = 0; j < funs.length; j++) {
            state.emitted = [];
            try {
              funs[j](doc);
              results.push(state.emitted);
            } catch (error) {
              if (error == "fatal_error") { throw error; }
              results.push({error: String(error && error.message ? error.name + ": " + error.message : toJSON(error))});
            }
          }
          out.push(results);
        }
        state.emitted = [];
        return out;
      };
      state.reduce = function(fun, keys, values, rereduce) { return [fun(keys, values, rereduce)]; };
      // A replication's transform over a batch: for each document {ok: document to write}, or
      // {error: [name, reason]} for one the function refused by throwing (or answered wrongly).
      state.transformBatch = function(fun, docs, direction) {
        var out = [];
        for (var i = 0; i < docs.length; i++) {
          try {
            var result = fun(docs[i], direction);
            if (result === undefined) { result = docs[i]; }
            if (result === null || typeof result != "object" || Array.isArray(result)) {
              out.push({error: ["transform_error", "a transform must return an object"]});
            } else {
              out.push({ok: result});
            }
          } catch (error) {
            var name = error && error.name ? String(error.name) : (error && error.error ? String(error.error) : "transform_error");
            var reason = error && error.message !== undefined ? String(error.message)
              : (error && error.reason !== undefined ? String(error.reason) : String(error));
            out.push({error: [name, reason]});
          }
        }
        return out;
      };
      // Several runs of one reduce function, [keys, values, rereduce] each: their results.
      state.reduceBatch = function(fun, runs) {
        var results = [];
        for (var i = 0; i < runs.length; i++) { results.push(fun(runs[i][0], runs[i][1], runs[i][2])); }
        return results;
      };
      return state;
    })();

    function emit(key, value) { __couchette.emitted.push([key, value === undefined ? null : value]); }
    function sum(values) { var total = 0; for (var i = 0; i < values.length; i++) { total += values[i]; } return total; }
    function toJSON(value) { return JSON.stringify(value); }
    function isArray(value) { return Array.isArray(value); }
    """#
}
