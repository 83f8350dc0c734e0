/* The raw JavaScriptCore call rate Couchette's filters are compared with: one context,
   the filter compiled once, then for each document (one JSON object per line of a file)
   the document made an engine value and the function called with it and a request object.
   Usage: jsc_ref FUNCTION_SOURCE REQUEST_JSON DOCUMENTS_FILE RUNS
   Prints {"calls_per_second": best of RUNS, "calls": N, "passed": N}. */
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

static JSValueRef parse(JSContextRef context, const char *json) {
    JSStringRef text = JSStringCreateWithUTF8CString(json);
    JSValueRef value = JSValueMakeFromJSONString(context, text);
    JSStringRelease(text);
    return value;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: jsc_ref SOURCE REQUEST FILE RUNS\n"); return 2; }
    FILE *file = fopen(argv[3], "r");
    if (!file) { perror(argv[3]); return 1; }
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
    size_t wrapped_size = strlen(argv[1]) + 8;
    char *wrapped = malloc(wrapped_size);
    snprintf(wrapped, wrapped_size, "(%s)", argv[1]);
    JSStringRef script = JSStringCreateWithUTF8CString(wrapped);
    JSValueRef exception = NULL;
    JSValueRef compiled = JSEvaluateScript(context, script, NULL, NULL, 1, &exception);
    JSStringRelease(script);
    if (exception || !JSValueIsObject(context, compiled)) { fprintf(stderr, "the function does not compile\n"); return 1; }
    JSObjectRef function = JSValueToObject(context, compiled, NULL);
    JSValueRef request = parse(context, argv[2]);
    JSValueProtect(context, request);

    int runs = atoi(argv[4]);
    double best = 0;
    size_t passed = 0;
    for (int run = 0; run < runs; run++) {
        passed = 0;
        double began = now();
        for (size_t i = 0; i < count; i++) {
            JSValueRef arguments[2] = {parse(context, lines[i]), request};
            JSValueRef result = JSObjectCallAsFunction(context, function, NULL, 2, arguments, &exception);
            if (exception) { fprintf(stderr, "the function threw\n"); return 1; }
            if (JSValueToBoolean(context, result)) passed++;
        }
        double rate = count / (now() - began);
        if (rate > best) best = rate;
    }
    printf("{\"calls_per_second\": %.0f, \"calls\": %zu, \"passed\": %zu}\n", best, count, passed);
    return 0;
}
