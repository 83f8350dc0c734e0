/* The raw JavaScriptCore rate a view build is compared with: one context on one thread, the
   map function compiled once with an `emit` that collects its rows, then for each document (one
   JSON object per line of a file) the document made an engine value, the function called, and
   the rows it emitted written out as JSON (what any indexer must take out of the engine).
   Usage: jsc_map_ref MAP_SOURCE DOCUMENTS_FILE RUNS
   Prints {"documents_per_second": best of RUNS, "documents": N, "rows": rows emitted in a run}. */
#include <JavaScriptCore/JavaScript.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static JSValueRef evaluate(JSContextRef context, const char *source) {
    JSStringRef script = JSStringCreateWithUTF8CString(source);
    JSValueRef exception = NULL;
    JSValueRef value = JSEvaluateScript(context, script, NULL, NULL, 1, &exception);
    JSStringRelease(script);
    return exception ? NULL : value;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: jsc_map_ref SOURCE FILE RUNS\n"); return 2; }
    FILE *file = fopen(argv[2], "r");
    if (!file) { perror(argv[2]); return 1; }
    size_t count = 0, capacity = 1024;
    char **lines = malloc(capacity * sizeof *lines);
    char *line = NULL;
    size_t size = 0;
    ssize_t length;
    while ((length = getline(&line, &size, file)) > 0) {
        if (line[length - 1] == '\n') line[length - 1] = 0;
        if (count == capacity) lines = realloc(lines, (capacity *= 2) * sizeof *lines);
        lines[count++] = strdup(line);
    }
    fclose(file);

    JSGlobalContextRef context = JSGlobalContextCreate(NULL);
    if (!evaluate(context, "var __rows = []; function emit(k, v) { __rows.push([k, v === undefined ? null : v]); }")) {
        fprintf(stderr, "the environment does not compile\n");
        return 1;
    }
    size_t wrapped_size = strlen(argv[1]) + 8;
    char *wrapped = malloc(wrapped_size);
    snprintf(wrapped, wrapped_size, "(%s)", argv[1]);
    JSValueRef compiled = evaluate(context, wrapped);
    if (!compiled || !JSValueIsObject(context, compiled)) { fprintf(stderr, "the function does not compile\n"); return 1; }
    JSObjectRef function = JSValueToObject(context, compiled, NULL);
    JSValueProtect(context, function);
    JSObjectRef global = JSContextGetGlobalObject(context);
    JSStringRef rowsName = JSStringCreateWithUTF8CString("__rows");

    int runs = atoi(argv[3]);
    double best = 0;
    size_t rows = 0;
    for (int run = 0; run < runs; run++) {
        rows = 0;
        double began = now();
        for (size_t i = 0; i < count; i++) {
            JSObjectSetProperty(context, global, rowsName, JSObjectMakeArray(context, 0, NULL, NULL), 0, NULL);
            JSStringRef text = JSStringCreateWithUTF8CString(lines[i]);
            JSValueRef document = JSValueMakeFromJSONString(context, text);
            JSStringRelease(text);
            JSValueRef exception = NULL;
            JSObjectCallAsFunction(context, function, NULL, 1, &document, &exception);
            if (exception) { fprintf(stderr, "the function threw\n"); return 1; }
            JSValueRef emitted = JSObjectGetProperty(context, global, rowsName, NULL);
            JSStringRef json = JSValueCreateJSONString(context, emitted, 0, NULL);
            rows += JSStringGetLength(json) > 2;
            JSStringRelease(json);
        }
        double rate = count / (now() - began);
        if (rate > best) best = rate;
    }
    printf("{\"documents_per_second\": %.0f, \"documents\": %zu, \"rows\": %zu}\n", best, count, rows);
    return 0;
}
