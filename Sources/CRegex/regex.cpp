// Mango's `$regex` on Debian's RE2, behind a C interface Swift can import (RE2's C++ API cannot be).
#include "CRegex.h"

#include <new>
#include <re2/re2.h>

struct couchette_regex {
    re2::RE2 compiled;
    explicit couchette_regex(const re2::StringPiece &pattern, const re2::RE2::Options &options)
        : compiled(pattern, options) {}
};

couchette_regex *couchette_regex_compile(const char *pattern, size_t length) {
    re2::RE2::Options options;  // UTF-8, not anchored, longest match off: PCRE's semantics where RE2 has them
    options.set_log_errors(false);  // a client's bad pattern is a 400, not a line on stderr
    auto *regex = new (std::nothrow) couchette_regex(re2::StringPiece(pattern, length), options);
    if (regex == nullptr) return nullptr;
    if (!regex->compiled.ok()) {
        delete regex;
        return nullptr;
    }
    return regex;
}

int couchette_regex_search(const couchette_regex *regex, const char *text, size_t length) {
    return re2::RE2::PartialMatch(re2::StringPiece(text, length), regex->compiled) ? 1 : 0;
}

void couchette_regex_free(couchette_regex *regex) { delete regex; }
