#ifndef COUCHETTE_COLLATION_H
#define COUCHETTE_COLLATION_H
#include <stdint.h>

/* ICU's collator behind a header that names no ICU type: Swift's Foundation carries its own
   copy of ICU's headers, and a module exposing Debian's next to it does not compile. ICU's
   C functions are also renamed per release (ucol_open_72); these names are stable. */

/* The root collator (CouchDB's couch_ejson_compare opens "" with default attributes), or
   NULL when ICU cannot open it. Comparison and sort keys only read it: safe from any thread. */
const void *couchette_collator_open(void);

/* -1, 0 or 1 as ucol_strcollIter compares two UTF-8 strings; 2 on error. */
int couchette_collate_utf8(const void *collator, const char *a, int32_t aLength, const char *b, int32_t bLength);

/* The sort key of a UTF-16 string: bytes that memcmp orders as the collator compares, ending
   with one 0 byte and holding no other. Returns the full length, which may exceed capacity
   (call again with a larger buffer); 0 on error. */
int32_t couchette_sort_key(const void *collator, const uint16_t *text, int32_t length, uint8_t *key, int32_t capacity);

/* The collator's version (ucol_getVersion: four bytes, which change when its order does). */
void couchette_collator_version(const void *collator, uint8_t version[4]);

/* ICU's version, "72.1". */
const char *couchette_icu_version(void);
#endif
