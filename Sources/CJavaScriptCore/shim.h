#include <JavaScriptCore/JavaScript.h>

/* From JavaScriptCore's JSContextRefPrivate.h, which Debian does not ship; the library
   exports both functions. The callback runs on the thread executing JavaScript each time
   `limit` seconds of its CPU time have passed; returning true terminates the script. */
typedef bool (*JSShouldTerminateCallback)(JSContextRef ctx, void *context);
JS_EXPORT void JSContextGroupSetExecutionTimeLimit(JSContextGroupRef group, double limit,
                                                   JSShouldTerminateCallback callback, void *context);
JS_EXPORT void JSContextGroupClearExecutionTimeLimit(JSContextGroupRef group);

/* From JSBasePrivate.h: the heap's statistics as an object (heapSize, extraMemorySize, ...).
   It walks the whole heap: call it rarely. */
JS_EXPORT JSObjectRef JSGetMemoryUsageStatistics(JSContextRef ctx);

/* From JSContextRefPrivate.h: whether eval() and the Function constructor may compile code
   at run time; when disabled they throw an EvalError with `message`. Scripts the embedder
   evaluates (JSEvaluateScript) are not affected. */
JS_EXPORT void JSGlobalContextSetEvalEnabled(JSGlobalContextRef ctx, bool enabled, JSStringRef message);
