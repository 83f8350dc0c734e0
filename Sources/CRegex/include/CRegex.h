#ifndef COUCHETTE_CREGEX_H
#define COUCHETTE_CREGEX_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// A compiled regular expression (RE2: matching time linear in the text, whatever the pattern).
typedef struct couchette_regex couchette_regex;

/// Compiles a UTF-8 pattern of `length` bytes; NULL when RE2 refuses it (bad syntax, or a
/// construct it does not offer: backreferences, lookaround, possessive quantifiers).
couchette_regex *couchette_regex_compile(const char *pattern, size_t length);

/// 1 when the pattern matches anywhere in the UTF-8 `text` (an unanchored search, as PCRE's
/// `re:run`), 0 otherwise.
int couchette_regex_search(const couchette_regex *regex, const char *text, size_t length);

void couchette_regex_free(couchette_regex *regex);

#ifdef __cplusplus
}
#endif

#endif
