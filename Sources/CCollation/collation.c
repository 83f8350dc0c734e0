#include "CCollation.h"
#include <unicode/ucol.h>
#include <unicode/uiter.h>
#include <unicode/uversion.h>

const void *couchette_collator_open(void) {
    UErrorCode status = U_ZERO_ERROR;
    UCollator *collator = ucol_open("", &status);
    if (U_FAILURE(status)) {
        if (collator) ucol_close(collator);
        return 0;
    }
    return collator;
}

int couchette_collate_utf8(const void *collator, const char *a, int32_t aLength, const char *b, int32_t bLength) {
    UErrorCode status = U_ZERO_ERROR;
    UCharIterator left, right;
    uiter_setUTF8(&left, a, aLength);
    uiter_setUTF8(&right, b, bLength);
    UCollationResult result = ucol_strcollIter((const UCollator *)collator, &left, &right, &status);
    if (U_FAILURE(status)) return 2;
    return result == UCOL_LESS ? -1 : (result == UCOL_GREATER ? 1 : 0);
}

int32_t couchette_sort_key(const void *collator, const uint16_t *text, int32_t length, uint8_t *key, int32_t capacity) {
    return ucol_getSortKey((const UCollator *)collator, (const UChar *)text, length, key, capacity);
}

const char *couchette_icu_version(void) { return U_ICU_VERSION; }

void couchette_collator_version(const void *collator, uint8_t version[4]) {
    UVersionInfo info = {0};
    ucol_getVersion((const UCollator *)collator, info);
    for (int i = 0; i < 4; i++) version[i] = info[i];
}
