#include "core/utf8.h"

size_t utf8_sequence(const unsigned char *s, size_t left, uint32_t *cp)
{
    if (left == 0) return 0;
    unsigned char c = s[0];
    size_t n;
    /* The second byte's range excludes overlong forms (E0, F0),
     * surrogates (ED) and code points past U+10FFFF (F4). */
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) n = 2, *cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, *cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, *cp = c & 0x07;
    else return 0;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    if (left < n) return 0;
    for (size_t i = 1; i < n; i++) {
        unsigned char b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
        *cp = (*cp << 6) | (b & 0x3F);
    }
    return n;
}

bool utf8_valid(const void *s, size_t len)
{
    const unsigned char *p = s;
    uint32_t cp;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_sequence(p + i, len - i, &cp);
        if (n == 0) return false;
        i += n;
    }
    return true;
}
